"""Replaying OTLP export files through the live ingest path.

Replays go through the OTLP decoders and :class:`~ingest.writer.SpanWriter`, so they are
validated the same way and stay idempotent: a file replayed twice stores nothing twice.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ingest import decoding, otlp_json, protobuf
from ingest.writer import DatabaseUnavailable, SpanWriter
from latencyboard.db import conninfo
from latencyboard.teams.models import Team
from latencyboard.windows import DAY, duration_ns, unix_ns

logger = logging.getLogger(__name__)

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class ReplayReport:
    """What a replay did so far; ``reasons`` counts rejected spans by reason."""

    files: int = 0
    requests: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def add(self, other: ReplayReport) -> None:
        self.files += other.files
        self.requests += other.requests
        self.stored += other.stored
        self.duplicates += other.duplicates
        self.rejected += other.rejected
        self.reasons.update(other.reasons)


class ReplayError(Exception):
    """A file could not be replayed; ``report`` holds what was stored before it."""

    def __init__(self, path: Path, message: str, report: ReplayReport) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.report = report


def replay_files(
    team: Team,
    paths: Sequence[Path],
    *,
    max_age_days: int,
    now: dt.datetime,
    on_file: Callable[[Path, ReplayReport], None] | None = None,
) -> ReplayReport:
    """Store the spans of OTLP export files for ``team``, file by file, request by request.

    A file holds one binary protobuf ``ExportTraceServiceRequest``, one OTLP/JSON request, or
    JSON Lines of requests (what the Collector's file exporter writes); any of them may be
    gzipped. Spans starting more than ``max_age_days`` before ``now`` are rejected, as live
    ingest rejects spans older than its retention. Each request is stored in its own
    transaction, so a :class:`ReplayError` (an unreadable file or request) leaves everything
    before it stored; replaying again after a fix stores only what is missing.
    """
    missing = [path for path in paths if not path.is_file()]
    if missing:
        raise ReplayError(missing[0], "no such file", ReplayReport())
    limits = decoding.Limits(max_age_ns=duration_ns(max_age_days * DAY))
    now_ns = unix_ns(now)
    total = ReplayReport()
    writer = SpanWriter(conninfo(), max_connections=1)
    try:
        for path in paths:
            report = ReplayReport(files=1)
            try:
                for where, fmt, body in _requests(path):
                    decode = otlp_json.decode_json if fmt == "json" else protobuf.decode_protobuf
                    try:
                        decoded = decode(body, now_ns=now_ns, limits=limits)
                        _store(writer, team, decoded, f"replay/{fmt}", now, report)
                    except (decoding.DecodeError, DatabaseUnavailable) as exc:
                        raise _Unreadable(f"{where}{exc}") from exc
            except _Unreadable as exc:
                total.add(report)
                raise ReplayError(path, str(exc), total) from exc
            total.add(report)
            if on_file is not None:
                on_file(path, report)
    finally:
        writer.close()
    logger.info("replay.done", extra={"team": team.pk, "files": total.files, "spans": total.stored})
    return total


class _Unreadable(Exception):
    """A file or one of its requests cannot be read; ``replay_files`` names the file."""


def _store(
    writer: SpanWriter,
    team: Team,
    decoded: decoding.DecodedExport,
    protocol: str,
    now: dt.datetime,
    report: ReplayReport,
) -> None:
    report.requests += 1
    report.rejected += decoded.rejected_spans
    report.reasons.update(_reasons(decoded))
    if not decoded.spans:
        return  # live ingest writes no batch for a request without spans either
    result = writer.write(
        team.pk, decoded.spans, rejected=decoded.rejected_spans, protocol=protocol, received_at=now
    )
    report.stored += result.stored
    report.duplicates += result.duplicates


def _reasons(decoded: decoding.DecodedExport) -> Counter[str]:
    """Rejections by reason, read back from the partial-success message the decoder writes
    (``"3 spans rejected: 2 zero span_id, 1 end before start"``); the whole message is the
    reason should its form ever change."""
    if not decoded.rejected_spans:
        return Counter()
    reasons: Counter[str] = Counter()
    for part in decoded.error_message.partition(" rejected: ")[2].split(", "):
        count, _, reason = part.partition(" ")
        if count.isdigit() and reason:
            reasons[reason] += int(count)
    if sum(reasons.values()) != decoded.rejected_spans:
        return Counter({decoded.error_message: decoded.rejected_spans})
    return reasons


def _requests(path: Path) -> Iterator[tuple[str, str, bytes]]:
    """``(where, format, body)`` of each request in the file; ``where`` is ``"line N: "`` in
    JSON Lines. The format is read from the content, not the file name."""
    try:
        data = path.read_bytes()
        if data[:2] == _GZIP_MAGIC:
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise _Unreadable(f"cannot read: {exc}") from exc
    text = data.strip()
    # JSON starts with "{", maybe after white space. A protobuf request starts with "\n" (the
    # tag of its field 1) and then a length, which can be 123, a "{": but its random binary
    # ids are not UTF-8.
    if not (text.startswith(b"{") and _is_utf8(data)):
        yield "", "protobuf", data
    elif b"\n" not in text or not _is_json(text[: text.index(b"\n")]):
        yield "", "json", data  # one request, maybe pretty-printed over many lines
    else:
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line.strip():
                yield f"line {number}: ", "json", line


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True

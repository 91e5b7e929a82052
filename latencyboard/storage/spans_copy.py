"""PostgreSQL binary COPY rows for the span table, encoded without a database connection.

Pure (stdlib, numpy and orjson; no Django). The one encoder of span rows: live ingest and
replays encode a request's spans one by one with :func:`encode_span`; the demo back-fill
encodes millions of rows a second with :class:`TemplateEncoder`, which fills the same layout
column-wise. Both write :data:`COLUMNS` in the same order with the same bytes (a test checks
one against the other), so a change of the span row is made here once.

PostgreSQL's ``jsonb`` cannot hold ``\\u0000``: a NUL in an attribute becomes U+FFFD, the
replacement character, rather than failing the whole request (the decoder does the same for
the text columns).
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt
import orjson

from latencyboard.storage import copy_format
from latencyboard.storage.timestamps import PG_EPOCH_US

COLUMNS: Final = (
    "team_id, batch_id, pipeline_id, stage_id, trace_id, span_id, parent_span_id, name, kind, "
    "status_code, status_message, start_time, duration_ns, is_root, attributes"
)
FIELD_COUNT: Final = 15
HEADER: Final = copy_format.HEADER
TRAILER: Final = copy_format.TRAILER

_JSONB_VERSION = b"\x01"
_NULL = struct.pack(">i", -1)

# Each field's format once; the per-row encoder packs several at a time (fewer calls on
# the ingest hot path), the template encoder packs a template's constant ones on their own.
_OWNERS_FORMAT = "iqiqi"  # pipeline_id, stage_id, then the length of trace_id
# trace_id (uuid: the 16 bytes as they are), span_id (int8: the 8 id bytes are already its
# big-endian two's complement), then the length of parent_span_id
_IDS_FORMAT = "16si8s"
_TIMES_FORMAT = "qiq"  # start_time, duration_ns (the start's length ends the middle part)
_ROOT_FORMAT = "i?i"  # is_root, and the length of the jsonb that follows

_PREFIX = struct.Struct(">hiqiq")  # field count, team_id, batch_id
_OWNERS = struct.Struct(">" + _OWNERS_FORMAT)
_OWNERS_IDS = struct.Struct(">" + _OWNERS_FORMAT + _IDS_FORMAT)
_PARENT = struct.Struct(">i8s")
_LENGTH = struct.Struct(">i")
_KIND_STATUS = struct.Struct(">ihih")  # kind, status_code
_TIMES_ROOT = struct.Struct(">i" + _TIMES_FORMAT + _ROOT_FORMAT)
_ROOT = struct.Struct(">" + _ROOT_FORMAT)

_JSON_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def prefix(team_id: int, batch_id: int) -> bytes:
    """The start of every row of one request: field count, team and ingest batch."""
    return _PREFIX.pack(FIELD_COUNT, 8, team_id, 8, batch_id)


def stream(row_prefix: bytes, rows: list[bytes]) -> bytes:
    """A whole COPY stream: header, each row behind ``row_prefix``, trailer."""
    if not rows:
        return HEADER + TRAILER
    return b"".join((HEADER, row_prefix, row_prefix.join(rows), TRAILER))


@functools.lru_cache(maxsize=4096)  # span names are low-cardinality, status messages mostly ""
def _text(value: str) -> bytes:
    data = value.encode()
    return _LENGTH.pack(len(data)) + data


def _jsonb(attributes: dict[str, object]) -> bytes:
    data = orjson.dumps(attributes)
    if b"\\u0000" in data:
        # An escape only when preceded by an even number of backslashes: "\\u0000" in the
        # JSON is a literal backslash followed by "u0000", which stays as it is.
        data = _JSON_NUL.sub(rb"\1\\ufffd", data)
    return data


def _middle(name: str, kind: int, status_code: int, status_message: str) -> bytes:
    return _text(name) + _KIND_STATUS.pack(2, kind, 2, status_code) + _text(status_message)


def _tail(is_root: bool, attributes_json: bytes) -> bytes:
    return _ROOT.pack(1, is_root, len(attributes_json) + 1) + _JSONB_VERSION + attributes_json


def encode_span(
    pipeline_id: int,
    stage_id: int,
    trace_id: bytes,
    span_id: bytes,
    parent_span_id: bytes | None,
    name: str,
    kind: int,
    status_code: int,
    status_message: str,
    start_ns: int,
    duration_ns: int,
    is_root: bool,
    attributes: dict[str, object],
) -> bytes:
    """One row without its :func:`prefix`; ids are the raw 16- and 8-byte OTLP ids."""
    attributes_json = _jsonb(attributes)
    return b"".join(
        (
            _OWNERS_IDS.pack(8, pipeline_id, 8, stage_id, 16, trace_id, 8, span_id),
            _NULL if parent_span_id is None else _PARENT.pack(8, parent_span_id),
            _text(name),
            _KIND_STATUS.pack(2, kind, 2, status_code),
            _text(status_message),
            _TIMES_ROOT.pack(
                8,
                start_ns // 1000 - PG_EPOCH_US,
                8,
                duration_ns,
                1,
                is_root,
                len(attributes_json) + 1,
            ),
            _JSONB_VERSION,
            attributes_json,
        )
    )


class Template(Protocol):
    """What the spans of one kind share: every column but ids, times and durations."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> int: ...
    @property
    def status_code(self) -> int: ...
    @property
    def status_message(self) -> str: ...
    @property
    def is_root(self) -> bool: ...
    @property
    def attributes(self) -> dict[str, object]: ...


@dataclass(frozen=True, slots=True)
class SpanRows:
    """Spans grouped by template: the first ``counts[0]`` rows are of template 0, the next
    ``counts[1]`` of template 1, and so on. Times are Unix microseconds (the precision of
    ``timestamptz``); ``parent_span_id`` is meaningless on root rows."""

    counts: npt.NDArray[np.int64]
    trace_id: npt.NDArray[np.uint8]
    """(m, 16) bytes."""
    span_id: npt.NDArray[np.int64]
    parent_span_id: npt.NDArray[np.int64]
    start_us: npt.NDArray[np.int64]
    duration_ns: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.span_id)


class TemplateEncoder:
    """Encodes :class:`SpanRows` of one pipeline as the rows :func:`encode_span` would give,
    whole arrays at a time; ``stage_ids[t]`` is the stage row of template ``t``.

    A template's constant columns are encoded once; its rows are one numpy structured array
    whose few varying fields are filled column-wise.
    """

    def __init__(
        self,
        templates: Sequence[Template],
        *,
        team_id: int,
        pipeline_id: int,
        stage_ids: Sequence[int],
    ) -> None:
        self._team_id = team_id
        self._roots = [template.is_root for template in templates]
        self._owners = [_OWNERS.pack(8, pipeline_id, 8, stage_id, 16) for stage_id in stage_ids]
        self._middles: list[bytes] = []
        self._tails: list[bytes] = []
        self._dtypes: list[np.dtype[np.void]] = []
        for template, owners in zip(templates, self._owners, strict=True):
            middle = _middle(
                template.name, template.kind, template.status_code, template.status_message
            )
            tail = _tail(template.is_root, _jsonb(template.attributes))
            self._middles.append(middle + _LENGTH.pack(8))
            self._tails.append(tail)
            # A root's parent is NULL (length -1, no bytes); a child's is the root's span id.
            parent = [] if template.is_root else [("parent", ">i8")]
            self._dtypes.append(
                np.dtype(
                    [
                        ("head", f"V{_PREFIX.size + len(owners)}"),
                        ("trace_id", "u1", (16,)),
                        ("span_id_len", ">i4"),
                        ("span_id", ">i8"),
                        ("parent_len", ">i4"),
                        *parent,
                        ("middle", f"V{len(self._middles[-1])}"),
                        ("start", ">i8"),
                        ("duration_len", ">i4"),
                        ("duration", ">i8"),
                        ("tail", f"V{len(tail)}"),
                    ]
                )
            )

    def encode(self, rows: SpanRows, batch_id: int) -> list[bytes]:
        """The rows' part of a COPY stream (no header, no trailer), all in batch ``batch_id``:
        one block of bytes per template that has rows."""
        row_prefix = prefix(self._team_id, batch_id)
        blocks = []
        end = 0
        for t, count in enumerate(rows.counts.tolist()):
            if not count:
                continue
            start, end = end, end + count
            # Every constant field at once: one record, copied into each row.
            constant = np.zeros(1, self._dtypes[t])
            constant["head"] = np.void(row_prefix + self._owners[t])
            constant["span_id_len"] = 8
            constant["parent_len"] = -1 if self._roots[t] else 8
            constant["middle"] = np.void(self._middles[t])
            constant["duration_len"] = 8
            constant["tail"] = np.void(self._tails[t])
            out = np.empty(count, self._dtypes[t])
            # As raw bytes: numpy copies structured records field by field.
            out.view(np.uint8).reshape(count, -1)[:] = constant.view(np.uint8)
            out["trace_id"] = rows.trace_id[start:end]
            out["span_id"] = rows.span_id[start:end]
            if not self._roots[t]:
                out["parent"] = rows.parent_span_id[start:end]
            out["start"] = rows.start_us[start:end] - PG_EPOCH_US
            out["duration"] = rows.duration_ns[start:end]
            blocks.append(out.tobytes())
        return blocks

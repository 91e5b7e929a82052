"""PostgreSQL binary COPY rows for ``spans_span``, encoded without a database connection.

Pure (stdlib and orjson only). The writer encodes a request's spans once with
:func:`encode_span` and sends them as one buffer; a row is a handful of ``struct.pack`` calls
joined together, a fraction of what per-field adaptation costs on the ingest hot path.

Binary COPY format (PostgreSQL docs, "COPY" → "Binary Format"): a signature and header, then
per row a 16-bit field count followed by each field as a 32-bit length (-1 for NULL) and its
bytes in the type's binary send format, then a 16-bit -1 trailer.

PostgreSQL's ``jsonb`` cannot hold ``\\u0000``: a NUL in an attribute becomes U+FFFD, the
replacement character, rather than failing the whole request (the decoder does the same for
the text columns).
"""

from __future__ import annotations

import functools
import re
import struct
from typing import Final

import orjson

# Columns in the order :func:`encode_span` writes them, after the per-request prefix.
COLUMNS: Final = (
    "team_id, batch_id, pipeline_id, stage_id, trace_id, span_id, parent_span_id, name, kind, "
    "status_code, status_message, start_time, duration_ns, is_root, attributes"
)
FIELD_COUNT: Final = 15
HEADER: Final = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension length
TRAILER: Final = b"\xff\xff"

PG_EPOCH_US: Final = 946_684_800 * 10**6  # 2000-01-01, where binary timestamptz counts from
_JSONB_VERSION = b"\x01"
_NULL = struct.pack(">i", -1)

# team_id, batch_id
_PREFIX = struct.Struct(">hiqiq")
# pipeline_id, stage_id, trace_id (uuid: the 16 bytes as they are), span_id (int8: the
# 8 id bytes are already its big-endian two's complement), then parent_span_id
_IDS = struct.Struct(">iqiqi16si8s")
_PARENT = struct.Struct(">i8s")
_LENGTH = struct.Struct(">i")
# kind, status_code
_KIND_STATUS = struct.Struct(">ihih")
# start_time, duration_ns, is_root, and the length of the jsonb that follows
_TIMES = struct.Struct(">iqiqi?i")

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
            _IDS.pack(8, pipeline_id, 8, stage_id, 16, trace_id, 8, span_id),
            _NULL if parent_span_id is None else _PARENT.pack(8, parent_span_id),
            _text(name),
            _KIND_STATUS.pack(2, kind, 2, status_code),
            _text(status_message),
            _TIMES.pack(
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

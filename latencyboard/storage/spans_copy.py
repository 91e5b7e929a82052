"""PostgreSQL binary COPY rows for the span table, encoded without a database connection.

Pure (stdlib and orjson; no Django, no numpy in the ingest processes). The one encoder of
span rows: live ingest and replays encode a request's spans one by one with
:func:`encode_span`; the demo back-fill encodes millions of rows a second with
:class:`~latencyboard.storage.spans_copy_columns.TemplateEncoder`, which fills the same
layout column-wise from this module's :func:`template_parts`. Both write :data:`COLUMNS` in
the same order with the same bytes (a test checks one against the other), so a change of the
span row is made here once.

PostgreSQL's ``jsonb`` cannot hold ``\\u0000``: a NUL in an attribute becomes U+FFFD, the
replacement character, rather than failing the whole request (the decoder does the same for
the text columns).
"""

from __future__ import annotations

import functools
import re
import struct
from typing import Final, Protocol

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
PREFIX_SIZE: Final = _PREFIX.size
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


def template_parts(
    template: Template, pipeline_id: int, stage_id: int
) -> tuple[bytes, bytes, bytes]:
    """The constant bytes of a row of ``template`` around its varying fields: after the
    :func:`prefix`, before the trace id; between the parent span id and the start time;
    after the duration (see :class:`~latencyboard.storage.spans_copy_columns.TemplateEncoder`)."""
    return (
        _OWNERS.pack(8, pipeline_id, 8, stage_id, 16),
        _middle(template.name, template.kind, template.status_code, template.status_message)
        + _LENGTH.pack(8),
        _tail(template.is_root, _jsonb(template.attributes)),
    )

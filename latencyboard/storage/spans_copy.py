"""PostgreSQL binary COPY rows for the span table, encoded without a database connection.

Pure (stdlib and orjson; no Django, no numpy in the ingest processes). The one encoder of
span rows: live ingest and replays encode a request's spans one by one with
:func:`encode_span`; the demo back-fill encodes millions of rows a second with
:class:`~latencyboard.storage.spans_copy_columns.TemplateEncoder`, which fills the same
layout column-wise from this module's :func:`template_parts`. Both write :data:`COLUMNS` in
the same order with the same bytes (a test checks one against the other), so a change of the
span row is made here once.

The span row (migration ``spans.0004``) is ordered widest first so that no byte goes to
alignment padding: the 8-byte columns (the batch id first: a request's rows share it), the
uuid, the 4-byte dictionary ids (team, pipeline, stage), the small ones, then the variable
ones. A span points at its template (resource, name, repeating attributes:
:mod:`.span_templates`), so its ``name`` is written empty and its ``attributes`` hold only
what the template does not, mostly ``{}``: about 112 bytes a row with its tuple header.
Its indexes and what each is for:

* primary key ``(team_id, trace_id, span_id, start_time)``: the dedupe key (a retried export
  stores only what is missing) and one trace's spans by trace id;
* ``spans_span_roots`` ``(pipeline_id, start_time) INCLUDE (duration_ns, status_code) WHERE
  is_root``: trace search and root exemplars over a window, from the index alone;
* ``spans_span_stage_time`` ``(pipeline_id, stage_id, start_time)``: a stage's spans over a
  window (search by stage, stage exemplars, the attribute keys offered as cohorts, rollup
  rebuilds);
* ``spans_span_batch``, a block-range index on ``batch_id``: the fold's spans of its batches.
"""

from __future__ import annotations

import functools
import struct
from typing import Final, Protocol

from latencyboard.storage import copy_format
from latencyboard.storage.span_templates import json_bytes
from latencyboard.storage.timestamps import PG_EPOCH_US

COLUMNS: Final = (
    "batch_id, start_time, duration_ns, span_id, parent_span_id, template_id, trace_id, "
    "team_id, pipeline_id, stage_id, kind, status_code, is_root, name, status_message, "
    "attributes"
)
FIELD_COUNT: Final = 16
HEADER: Final = copy_format.HEADER
TRAILER: Final = copy_format.TRAILER

_JSONB_VERSION = b"\x01"
_EMPTY_NAME = struct.pack(">i", 0)

# Each field's format once; the per-row encoder packs several at a time (fewer calls on
# the ingest hot path), the template encoder packs a template's constant ones on their own.
_TIMES_FORMAT = "iqiq"  # start_time, duration_ns
_SPAN_FORMAT = "i8s"  # span_id (int8: the 8 id bytes are already its big-endian two's complement)
_TEMPLATE_FORMAT = "iqi"  # template_id, then the length of trace_id
_OWNERS_FORMAT = "iiiiii"  # team_id, pipeline_id, stage_id, after the trace id's 16 bytes
_FLAGS_FORMAT = "ihihi?"  # kind, status_code, is_root

_PREFIX = struct.Struct(">hiq")  # field count, batch_id
PREFIX_SIZE: Final = _PREFIX.size
_TEMPLATE = struct.Struct(">" + _TEMPLATE_FORMAT)
_OWNERS_FLAGS = struct.Struct(">" + _OWNERS_FORMAT + _FLAGS_FORMAT)
_LENGTH = struct.Struct(">i")
# A row's fixed columns in one pack (the ingest hot path): with a parent span, and without
# (its length -1, SQL NULL).
_FIXED_CHILD = struct.Struct(
    ">"
    + _TIMES_FORMAT
    + _SPAN_FORMAT
    + "i8s"
    + _TEMPLATE_FORMAT
    + "16s"
    + _OWNERS_FORMAT
    + _FLAGS_FORMAT
)
_FIXED_ROOT = struct.Struct(
    ">"
    + _TIMES_FORMAT
    + _SPAN_FORMAT
    + "i"
    + _TEMPLATE_FORMAT
    + "16s"
    + _OWNERS_FORMAT
    + _FLAGS_FORMAT
)


def prefix(batch_id: int) -> bytes:
    """The start of every row of one request: field count and ingest batch."""
    return _PREFIX.pack(FIELD_COUNT, 8, batch_id)


def stream(row_prefix: bytes, rows: list[bytes]) -> bytes:
    """A whole COPY stream: header, each row behind ``row_prefix``, trailer."""
    if not rows:
        return HEADER + TRAILER
    return b"".join((HEADER, row_prefix, row_prefix.join(rows), TRAILER))


@functools.lru_cache(maxsize=4096)  # status messages are mostly ""
def _text(value: str) -> bytes:
    data = value.encode()
    return _LENGTH.pack(len(data)) + data


@functools.lru_cache(maxsize=4096)  # a span's own attributes are mostly {}
def _jsonb(data: bytes) -> bytes:
    return _LENGTH.pack(len(data) + 1) + _JSONB_VERSION + data


def _tail(status_message: str, attributes_json: bytes) -> bytes:
    """The variable columns: the name is empty (the template's)."""
    return _EMPTY_NAME + _text(status_message) + _jsonb(attributes_json)


def encode_span(
    team_id: int,
    pipeline_id: int,
    stage_id: int,
    template_id: int,
    trace_id: bytes,
    span_id: bytes,
    parent_span_id: bytes | None,
    kind: int,
    status_code: int,
    status_message: str,
    start_ns: int,
    duration_ns: int,
    is_root: bool,
    attributes: dict[str, object],
) -> bytes:
    """One row without its :func:`prefix`; ids are the raw 16- and 8-byte OTLP ids,
    ``attributes`` those of the span its template does not hold."""
    start_us = start_ns // 1000 - PG_EPOCH_US
    tail = _tail(status_message, json_bytes(attributes) if attributes else b"{}")
    if parent_span_id is None:
        return _FIXED_ROOT.pack(
            8, start_us, 8, duration_ns, 8, span_id, -1, 8, template_id, 16, trace_id,
            4, team_id, 4, pipeline_id, 4, stage_id, 2, kind, 2, status_code, 1, is_root,
        ) + tail  # fmt: skip
    return _FIXED_CHILD.pack(
        8, start_us, 8, duration_ns, 8, span_id, 8, parent_span_id, 8, template_id, 16, trace_id,
        4, team_id, 4, pipeline_id, 4, stage_id, 2, kind, 2, status_code, 1, is_root,
    ) + tail  # fmt: skip


class Template(Protocol):
    """What the spans of one kind share: every column but ids, times and durations."""

    @property
    def kind(self) -> int: ...
    @property
    def status_code(self) -> int: ...
    @property
    def status_message(self) -> str: ...
    @property
    def is_root(self) -> bool: ...


def template_parts(
    template: Template, *, team_id: int, pipeline_id: int, stage_id: int, template_id: int
) -> tuple[bytes, bytes]:
    """The constant bytes of a row of ``template`` around its varying fields (see
    :class:`~latencyboard.storage.spans_copy_columns.TemplateEncoder`): from the parent span
    id to the trace id, and everything after the trace id. Its span attributes all sit in its
    template (``template_id``): the row's own are ``{}``."""
    return (
        _TEMPLATE.pack(8, template_id, 16),
        _OWNERS_FLAGS.pack(
            4,
            team_id,
            4,
            pipeline_id,
            4,
            stage_id,
            2,
            template.kind,
            2,
            template.status_code,
            1,
            template.is_root,
        )
        + _tail(template.status_message, b"{}"),
    )

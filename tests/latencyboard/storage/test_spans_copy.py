"""The span COPY encoder: live ingest's per-span rows and the back-fill's template rows are
the same bytes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from latencyboard.storage import spans_copy, spans_copy_columns

TRACE = bytes(range(16))
START_US = 1_773_100_800_123_456  # 2026-03-10T00:00:00.123456Z


@dataclass(frozen=True)
class Template:
    name: str
    kind: int
    status_code: int
    status_message: str
    is_root: bool
    attributes: dict[str, object]


ROOT = Template("POST /score", 2, 0, "", True, {"http.route": "/score", "model.version": "v2"})
CHILD = Template(
    "model_forward", 1, 2, "Timeout", False, {"inference.stage": "model_forward", "n": 3}
)


def _rows(count: int, span_id: int, parent: int) -> spans_copy_columns.SpanRows:
    return spans_copy_columns.SpanRows(
        counts=np.array([count], dtype=np.int64),
        trace_id=np.frombuffer(TRACE, dtype=np.uint8).reshape(1, 16),
        span_id=np.array([span_id], dtype=np.int64),
        parent_span_id=np.array([parent], dtype=np.int64),
        start_us=np.array([START_US], dtype=np.int64),
        duration_ns=np.array([12_345_678], dtype=np.int64),
    )


@pytest.mark.parametrize("template", [ROOT, CHILD], ids=["root", "child"])
def test_template_rows_are_the_bytes_of_per_span_rows(template):
    # given one span of a template, with a negative span id (the high bit set)
    span_id, parent = -0x0123_4567_89AB_CDEF, 0x1122_3344_5566_7788
    encoder = spans_copy_columns.TemplateEncoder(
        [template], team_id=7, pipeline_id=11, stage_ids=[13], template_ids=[-17]
    )

    # when both encoders write it in batch 42, its attributes all in its template
    [block] = encoder.encode(_rows(1, span_id, parent), batch_id=42)
    row = spans_copy.encode_span(
        7,
        11,
        13,
        -17,
        TRACE,
        span_id.to_bytes(8, "big", signed=True),
        None if template.is_root else parent.to_bytes(8, "big", signed=True),
        template.kind,
        template.status_code,
        template.status_message,
        START_US * 1000 + 999,  # nanoseconds below the microsecond are dropped
        12_345_678,
        template.is_root,
        {},
    )

    # then the bytes are the same
    assert block == spans_copy.prefix(42) + row


def test_an_empty_stream_is_header_and_trailer():
    assert spans_copy.stream(spans_copy.prefix(1), []) == (
        b"PGCOPY\n\xff\r\n\x00" + bytes(8) + b"\xff\xff"
    )

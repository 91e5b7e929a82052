"""Derivation of broken or hostile spans: bounded work, and stages within their span."""

from __future__ import annotations

import pytest

from latencyboard.pipelines import derivation
from latencyboard.pipelines.derivation import DerivedRule, SpanView, derive

TRACE = b"\x02" * 16
QUEUE = DerivedRule("queue", start_event="QUEUE_START", end_event="COMPUTE_START")


def _chain(length: int, end_at: int) -> list[SpanView]:
    """Spans 1..length, each the parent of the next, each with a QUEUE_START; span
    ``end_at`` has the COMPUTE_START."""
    return [
        SpanView(
            TRACE,
            i.to_bytes(8, "big"),
            None if i == 1 else (i - 1).to_bytes(8, "big"),
            0,
            10**9,
            {},
            [(10, "QUEUE_START"), *([(20, "COMPUTE_START")] if i == end_at else [])],
        )
        for i in range(1, length + 1)
    ]


def test_an_end_event_is_looked_for_on_at_most_max_searched_spans():
    # given a chain of 2,000 spans each with a start event, the end event on the last
    spans = _chain(2000, end_at=2000)

    # when the stages are derived
    found = derive(spans, [QUEUE], measures=False)

    # then only the spans close enough above the end found it
    anchors = sorted(d.anchor for d in found)
    assert anchors == list(range(2000 - derivation.MAX_SEARCHED, 2000))


@pytest.mark.parametrize(
    ("attributes", "stages"),
    [
        ({"q": 0.4, "c": 0.6}, ["queue", "compute"]),
        ({"q": 0.4, "c": 0.6000000001}, ["queue", "compute"]),  # float rounding: cut at end
        ({"q": 0.4, "c": 0.7}, ["queue"]),
        ({"q": 1e300, "c": 0.5}, ["compute"]),
    ],
)
def test_attribute_stages_lie_within_their_span(attributes, stages):
    rules = [DerivedRule("queue", "q"), DerivedRule("compute", "c")]
    span = SpanView(TRACE, b"\x00" * 7 + b"\x01", None, 5 * 10**9, 6 * 10**9, attributes, [])

    found = derive([span], rules, measures=False)

    assert [d.stage for d in found] == stages
    assert all(span.start_ns <= d.start_ns <= d.end_ns <= span.end_ns for d in found)


def test_a_ttft_longer_than_its_span_is_no_measure():
    span = SpanView(
        TRACE,
        b"\x00" * 7 + b"\x01",
        None,
        0,
        10**9,
        {"gen_ai.latency.time_to_first_token": 1e10, "gen_ai.usage.completion_tokens": 9},
        [],
    )

    assert derive([span], [], measures=True) == []

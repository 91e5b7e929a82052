"""The waterfall maths of one trace, pure: nesting, self time, critical path, orphans."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from latencyboard.traces.waterfall import SpanTiming, Waterfall, build, union_ns

MS = 1_000_000


def span(span_id: int, parent: int | None, start_ms: float, end_ms: float) -> SpanTiming:
    return SpanTiming(span_id, parent, int(start_ms * MS), int((end_ms - start_ms) * MS))


def rows_by_id(spans: list[SpanTiming], result: Waterfall) -> dict[int, tuple[int, float, float]]:
    """span id -> (depth, self ms, offset ms) for each row."""
    return {
        spans[row.index].span_id: (row.depth, row.self_ns / MS, row.offset_ns / MS)
        for row in result.rows
    }


def order(spans: list[SpanTiming], result: Waterfall) -> list[int]:
    return [spans[row.index].span_id for row in result.rows]


def path(spans: list[SpanTiming], result: Waterfall) -> list[int]:
    return [spans[index].span_id for index in result.critical_path]


def segments(spans: list[SpanTiming], result: Waterfall) -> list[tuple[int, float, float]]:
    """The critical path in time order as (span id, start ms, end ms)."""
    return [
        (spans[s.index].span_id, s.start_ns / MS, s.end_ns / MS) for s in result.critical_segments
    ]


@pytest.mark.parametrize(
    ("intervals", "low", "high", "expected"),
    [
        pytest.param([], 0, 100, 0, id="none"),
        pytest.param([(10, 20), (30, 50)], 0, 100, 30, id="apart"),
        pytest.param([(10, 40), (30, 50)], 0, 100, 40, id="overlapping"),
        pytest.param([(10, 90), (20, 30)], 0, 100, 80, id="contained"),
        pytest.param([(10, 20), (20, 30)], 0, 100, 20, id="touching"),
        pytest.param([(-50, 20), (90, 150)], 0, 100, 30, id="clipped-to-the-span"),
        pytest.param([(120, 150), (-20, -10)], 0, 100, 0, id="wholly-outside"),
    ],
)
def test_union_of_intervals(intervals, low, high, expected):
    assert union_ns(intervals, low, high) == expected


def test_sequential_children_leave_the_gaps_as_self_time():
    # given a root with two children one after the other
    spans = [span(1, None, 0, 100), span(2, 1, 10, 40), span(3, 1, 40, 90)]

    # when the waterfall is built
    result = build(spans)

    # then the root's self time is its duration minus both children, and both children are
    # on the critical path, the root's own time around them
    assert rows_by_id(spans, result) == {1: (0, 20, 0), 2: (1, 30, 10), 3: (1, 50, 40)}
    assert order(spans, result) == [1, 2, 3]
    assert path(spans, result) == [1, 2, 3]
    assert segments(spans, result) == [(1, 0, 10), (2, 10, 40), (3, 40, 90), (1, 90, 100)]
    assert (result.start_ns, result.duration_ns) == (0, 100 * MS)


def test_overlapping_children_are_subtracted_once():
    spans = [span(1, None, 0, 100), span(2, 1, 10, 60), span(3, 1, 30, 80)]

    result = build(spans)

    # [10, 60] and [30, 80] cover 70 ms of the root together, not 100
    assert rows_by_id(spans, result)[1] == (0, 30, 0)
    # the root waited for 3, which started while 2 ran: 2 gated nothing
    assert path(spans, result) == [1, 3]
    assert segments(spans, result) == [(1, 0, 30), (3, 30, 80), (1, 80, 100)]


def test_nested_children_nest_depth_first_and_the_path_follows_the_last_to_finish():
    # given root > (A > (A1, A2), B), listed out of order
    spans = [
        span(5, 1, 20, 30),  # B
        span(4, 2, 40, 90),  # A2
        span(1, None, 0, 100),  # root
        span(3, 2, 10, 50),  # A1
        span(2, 1, 5, 95),  # A
    ]

    result = build(spans)

    assert order(spans, result) == [1, 2, 3, 4, 5]
    assert rows_by_id(spans, result) == {
        1: (0, 10, 0),  # 100 - [5, 95]
        2: (1, 10, 5),  # 90 - [10, 90]
        3: (2, 40, 10),
        4: (2, 50, 40),
        5: (1, 10, 20),
    }
    assert path(spans, result) == [1, 2, 4]
    assert [row.critical for row in result.rows] == [True, True, False, True, False]
    assert segments(spans, result) == [
        (1, 0, 5),
        (2, 5, 40),
        (4, 40, 90),
        (2, 90, 95),
        (1, 95, 100),
    ]
    assert [row.critical_ns / MS for row in result.rows] == [10, 40, 0, 50, 0]
    parents = {spans[row.index].span_id: row.parent for row in result.rows}
    assert parents == {1: None, 2: 2, 3: 4, 4: 4, 5: 2}  # input positions


@pytest.mark.parametrize(
    ("children", "expected_path"),
    [
        pytest.param([(2, 0, 100), (3, 60, 100)], [1, 2], id="tie-goes-to-the-longest"),
        pytest.param([(2, 0, 60), (3, 50, 150)], [1, 3], id="outliving-child-counts-to-end"),
        pytest.param([(2, 0, 80), (3, 120, 130)], [1, 2], id="child-after-the-end-not-taken"),
        pytest.param([(2, 10, 50), (3, 10, 90)], [1, 3], id="parallel-the-longer-gates"),
        pytest.param([(2, 10, 50), (3, 50, 50), (4, 50, 90)], [1, 2, 4], id="zero-length-skipped"),
        pytest.param([(2, 100, 100)], [1], id="zero-length-at-the-end"),
        pytest.param([(2, -30, 40), (3, 40, 130)], [1, 2, 3], id="clock-skewed-both-sides"),
        pytest.param([(2, -30, -10), (3, 20, 30)], [1, 3], id="child-before-the-start-not-taken"),
        pytest.param([], [1], id="no-children"),
    ],
)
def test_critical_path_choice(children, expected_path):
    spans = [span(1, None, 0, 100)] + [span(i, 1, a, b) for i, a, b in children]

    assert path(spans, build(spans)) == expected_path


def test_clock_skewed_children_are_clamped_to_their_parent_on_the_path():
    # given a root whose children's clocks run ahead and behind, one with a child of its own
    # running past both of them
    spans = [
        span(1, None, 0, 100),
        span(2, 1, -30, 40),
        span(3, 1, 40, 130),
        span(4, 3, 60, 150),
    ]

    result = build(spans)

    # then each stretch is counted once, within the root, and the path fills the root
    assert segments(spans, result) == [(2, 0, 40), (3, 40, 60), (4, 60, 100)]
    assert path(spans, result) == [1, 2, 3, 4]
    assert [row.critical_ns / MS for row in result.rows] == [0, 40, 20, 40]


def test_a_slow_model_forward_is_the_critical_path_not_the_last_tiny_stage():
    # given the stages of one slow request, one after the other: model_forward took 37,742 ms
    # of 37,751 ms and serialize, the last, 0.45 ms
    stages_us = [
        (2, "queue_wait", 1_200),
        (3, "feature_hydration", 4_800),
        (4, "preprocess", 1_500),
        (5, "model_forward", 37_742_000),
        (6, "postprocess", 900),
        (7, "serialize", 450),
    ]
    spans = [SpanTiming(1, None, 0, 37_751_498_000)]
    at_ns = 300_000
    for span_id, _, us in stages_us:
        spans.append(SpanTiming(span_id, 1, at_ns, us * 1000))
        at_ns += us * 1000

    # when the waterfall is built
    result = build(spans)

    # then every stage is on the path, model_forward with 37,742 ms of it, and the path's
    # durations sum to the root's
    assert path(spans, result) == [1, 2, 3, 4, 5, 6, 7]
    on_path_ms = {spans[row.index].span_id: row.critical_ns / MS for row in result.rows}
    assert on_path_ms[5] == 37_742.0
    assert on_path_ms[7] == 0.45
    assert sum(s.end_ns - s.start_ns for s in result.critical_segments) == spans[0].duration_ns
    assert sum(row.critical_ns for row in result.rows) == spans[0].duration_ns


def test_children_outside_their_parent_count_only_inside_it():
    spans = [span(1, None, 0, 100), span(2, 1, 0, 80), span(3, 1, 120, 130)]

    result = build(spans)

    assert rows_by_id(spans, result)[1] == (0, 20, 0)
    assert result.duration_ns == 130 * MS  # the trace ends with its last span


def test_orphans_are_top_level_marked_and_keep_their_children():
    # given a root and a span whose parent (999) never arrived, with a child of its own
    spans = [span(1, None, 0, 100), span(2, 999, 20, 50), span(3, 2, 25, 30)]

    result = build(spans)

    assert order(spans, result) == [1, 2, 3]
    assert [(row.depth, row.orphan) for row in result.rows] == [
        (0, False),
        (0, True),
        (1, False),
    ]
    # nothing is subtracted from the root for the orphan, and the path stays with the root
    assert rows_by_id(spans, result)[1] == (0, 100, 0)
    assert rows_by_id(spans, result)[2] == (0, 25, 20)
    assert path(spans, result) == [1]


def test_without_a_root_the_path_starts_at_the_orphan_that_ends_last():
    spans = [span(2, 7, 0, 50), span(3, 8, 10, 80), span(4, 3, 20, 70)]

    result = build(spans)

    assert path(spans, result) == [3, 4]
    assert all(row.orphan for row in result.rows if row.depth == 0)


def test_a_cycle_of_parent_ids_is_cut_at_its_earliest_span():
    spans = [span(1, None, 0, 100), span(2, 3, 10, 20), span(3, 2, 5, 30)]

    result = build(spans)

    assert order(spans, result) == [1, 3, 2]
    assert [(row.depth, row.orphan) for row in result.rows] == [
        (0, False),
        (0, True),
        (1, False),
    ]


def test_a_span_stored_twice_takes_the_children_under_its_first_copy():
    spans = [span(1, None, 0, 100), span(5, 1, 30, 40), span(5, 1, 10, 20), span(6, 5, 12, 15)]

    result = build(spans)

    assert [row.index for row in result.rows] == [0, 2, 3, 1]
    assert result.rows[2].parent == 2


def test_offsets_are_from_the_earliest_span():
    spans = [span(1, None, 1000, 1100), span(2, 1, 1010, 1020)]

    result = build(spans)

    assert [row.offset_ns for row in result.rows] == [0, 10 * MS]
    assert result.start_ns == 1000 * MS


def test_an_empty_trace_has_an_empty_waterfall():
    assert build([]) == Waterfall(
        rows=(), start_ns=0, end_ns=0, critical_path=(), critical_segments=()
    )


def test_a_very_deep_trace_does_not_recurse():
    depth = 5000
    spans = [span(i + 1, i or None, i, 2 * depth - i) for i in range(depth)]

    result = build(spans)

    assert [row.depth for row in result.rows] == list(range(depth))
    assert len(result.critical_path) == depth


@st.composite
def traces(draw: st.DrawFn) -> list[SpanTiming]:
    """Spans with parents among earlier spans, unknown ids (orphans) or none (roots)."""
    count = draw(st.integers(1, 30))
    spans = []
    for i in range(count):
        parent = draw(st.one_of(st.none(), st.integers(1, count + 3)))
        start = draw(st.integers(0, 1000))
        spans.append(SpanTiming(i + 1, parent, start, draw(st.integers(0, 1000))))
    return spans


@given(traces())
def test_every_span_is_drawn_once_with_a_sane_self_time(spans):
    result = build(spans)

    assert sorted(row.index for row in result.rows) == list(range(len(spans)))
    depth = {row.index: row.depth for row in result.rows}
    for row in result.rows:
        assert 0 <= row.self_ns <= row.duration_ns
        assert row.depth == (0 if row.parent is None else depth[row.parent] + 1)
        assert row.orphan == (row.parent is None and spans[row.index].parent_span_id is not None)
    parent = {row.index: row.parent for row in result.rows}
    on_path = list(result.critical_path)
    root = spans[on_path[0]]
    assert parent[on_path[0]] is None
    assert all(parent[i] in on_path for i in on_path[1:])
    assert on_path == [row.index for row in result.rows if row.critical]
    # the path's segments tile the root's interval, each in a span on the path
    bounds = [(s.start_ns, s.end_ns) for s in result.critical_segments]
    assert all(start < end for start, end in bounds)
    assert all(a[1] == b[0] for a, b in pairwise(bounds))
    assert sum(end - start for start, end in bounds) == root.duration_ns
    assert {s.index for s in result.critical_segments} <= set(on_path)


def test_stages_that_follow_each_other_are_all_on_the_path_despite_microsecond_starts():
    # given derived stages laid end to end, their starts stored to the microsecond: prefill
    # seems to end 600 ns after decode starts
    spans = [
        SpanTiming(1, None, 0, 100_000_000),
        SpanTiming(2, 1, 0, 20_000_400),  # queue
        SpanTiming(3, 1, 20_000_000, 10_000_600),  # prefill
        SpanTiming(4, 1, 30_000_000, 70_000_000),  # decode
    ]

    found = build(spans)

    # then every stage is on the critical path and the path still tiles the root
    assert found.critical_path == (0, 1, 2, 3)
    assert sum(s.end_ns - s.start_ns for s in found.critical_segments) == 100_000_000

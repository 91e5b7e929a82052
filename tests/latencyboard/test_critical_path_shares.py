"""Critical-path time per span, per request: hand-built traces, properties, and agreement with the
trace page's waterfall (one rule, two implementations: one trace in Python, all requests in
numpy); then the shares the worker stores beside the work shares and the API gives, on real
PostgreSQL with spans stored as ingest stores them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import critical_path, stage_share_minutes
from latencyboard.rollups.models import StageShare
from latencyboard.rollups.stage_share_queries import stage_breakdown
from latencyboard.rollups.stage_share_services import compute_stage_shares
from latencyboard.storage.stage_share_rows import TraceSpans
from latencyboard.traces import waterfall
from tests.factories import make_team, make_user
from tests.latencyboard.test_stage_shares import DONE, MINUTE, T0, db, decoded, store
from tests.latencyboard.test_stage_shares import S as Span

MS = 10**6
US = 10**3


@dataclass(frozen=True)
class S:
    """A span of a hand-built trace: times in ns from the trace's start."""

    span: int
    parent: int | None
    start: int
    duration: int
    root: bool = False


def arrays(traces: Sequence[Sequence[S]]) -> TraceSpans:
    spans = [(t, s) for t, trace in enumerate(traces) for s in trace]
    return TraceSpans(
        trace=np.array([t for t, _ in spans], dtype=np.int64),
        span_id=np.array([s.span for _, s in spans], dtype=np.int64),
        parent_span_id=np.array([s.parent or 0 for _, s in spans], dtype=np.int64),
        has_parent=np.array([s.parent is not None for _, s in spans], dtype=np.bool_),
        stage_id=np.zeros(len(spans), dtype=np.int64),
        start_ns=np.array([60_000 * MS + s.start for _, s in spans], dtype=np.int64),
        duration_ns=np.array([s.duration for _, s in spans], dtype=np.int64),
        is_root=np.array([s.root for _, s in spans], dtype=np.bool_),
    )


def critical_ms(trace: Sequence[S]) -> list[float]:
    return (stage_share_minutes.critical_time_ns(arrays([trace])) / MS).tolist()


def self_ms(trace: Sequence[S]) -> list[float]:
    return (stage_share_minutes.self_time_ns(arrays([trace])) / MS).tolist()


def ms(span: int, parent: int | None, start_ms: float, end_ms: float) -> S:
    return S(span, parent, int(start_ms * MS), int((end_ms - start_ms) * MS), root=parent is None)


@pytest.mark.parametrize(
    ("trace", "expected"),
    [
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 10, 80), ms(3, 1, 10, 60)],
            [30, 70, 0],
            id="parallel-children-the-longer-counts",
        ),
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 10, 40), ms(3, 1, 40, 90)],
            [20, 30, 50],
            id="sequential-children-as-self-time",
        ),
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 10, 60), ms(3, 1, 30, 80)],
            [50, 0, 50],
            id="overlapping-only-children-ending-before-the-cursor",
        ),
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 50, 150), ms(3, 1, -30, 20)],
            [30, 50, 20],
            id="children-clipped-to-the-parent",
        ),
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 120, 150)], [100, 0], id="child-wholly-after-the-parent"
        ),
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 40, 40), ms(3, 2, 40, 40)],
            [100, 0, 0],
            id="zero-length-children",
        ),
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 10, 90), ms(3, 99, 0, 100)],
            [20, 80, 0],
            id="orphan-off-the-path",
        ),
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 10, 90), ms(3, 2, 15, 25), ms(4, 2, 25, 70)],
            [20, 25, 10, 45],
            id="into-the-chosen-child",
        ),
        pytest.param(
            [ms(1, None, 0, 100), ms(2, 1, 0, 100), S(3, 1, 20 * MS, 80 * MS, root=True)],
            [0, 100, 80],
            id="nested-root-is-a-request-of-its-own",
        ),
    ],
)
def test_critical_time(trace: list[S], expected: list[float]):
    assert critical_ms(trace) == expected


def test_derived_stages_one_after_another_are_all_on_the_path():
    # given a span with two derived stages laid end to end; starts are stored to the
    # microsecond, so the second may seem to start before the first ends
    trace = [
        S(1, None, 0, 100 * MS, root=True),
        S(2, 1, 0, 40 * MS + 400),  # ends 400 ns into the next one
        S(3, 1, 40 * MS, 60 * MS),
    ]

    # then both are on the path, the first up to where the second starts
    assert stage_share_minutes.critical_time_ns(arrays([trace])).tolist() == [0, 40 * MS, 60 * MS]


def test_a_repeated_span_id_counts_once():
    trace = [ms(1, None, 0, 100), ms(2, 1, 10, 90), ms(2, 1, 10, 90)]

    assert sorted(critical_ms(trace)) == [0, 20, 80]


def test_traces_are_walked_together_and_apart():
    one = [ms(1, None, 0, 100), ms(2, 1, 10, 80), ms(3, 1, 10, 60)]
    two = [ms(1, None, 0, 50), ms(2, 1, 0, 50)]

    result = stage_share_minutes.critical_time_ns(arrays([one, two])) / MS

    assert result.tolist() == [30, 70, 0, 0, 50]


# ----- properties ------------------------------------------------------------------------------


@st.composite
def traces(draw: st.DrawFn, nested_roots: bool = True) -> list[S]:
    """A root and up to 30 spans under any span or a missing one, at microsecond starts with
    nanosecond durations (as stored), some of zero length, some nested roots."""
    count = draw(st.integers(min_value=0, max_value=30))
    trace = [S(0, None, 0, draw(st.integers(0, 100)) * US, root=True)]
    for span in range(1, count + 1):
        parent = draw(st.integers(min_value=-1, max_value=count))
        trace.append(
            S(
                span,
                parent if parent >= 0 else 1000,
                draw(st.integers(-20, 120)) * US,
                draw(st.sampled_from([0, 1, 999, 1000, 1001])) + draw(st.integers(0, 80)) * US,
                root=nested_roots and draw(st.booleans()) and draw(st.booleans()),
            )
        )
    return trace


@given(trace=traces())
def test_critical_times_add_up_to_the_roots_durations(trace: list[S]):
    critical = stage_share_minutes.critical_time_ns(arrays([trace]))

    assert critical.min() >= 0
    assert critical.sum() == sum(s.duration for s in trace if s.root)


@given(trace=traces(nested_roots=False))
def test_the_same_path_as_the_trace_pages_waterfall(trace: list[S]):
    # given a trace with one root, in span-id order (the order ties are broken in)
    timings = [
        waterfall.SpanTiming(s.span, s.parent, s.start, s.duration)
        for s in sorted(trace, key=lambda s: s.span)
    ]
    drawn = waterfall.build(timings)
    on_page = {timings[row.index].span_id: row.critical_ns for row in drawn.rows}

    critical = stage_share_minutes.critical_time_ns(arrays([trace])).tolist()

    assert dict(zip((s.span for s in trace), critical, strict=True)) == on_page


def test_hundreds_of_siblings_within_one_microsecond_take_the_waterfalls_path():
    # given a root with 400 children all starting and ending within the same microsecond or
    # two (below the stored precision: each may follow any other, so the path has to look far
    # along the siblings for the next one that starts earlier)
    trace = [S(0, None, 0, 10 * US, root=True)]
    trace += [S(i, 0, 2 * US + (i * 37 % 9) * 100, 100 + (i * 53 % 7) * 100) for i in range(1, 401)]
    timings = [waterfall.SpanTiming(s.span, s.parent, s.start, s.duration) for s in trace]
    on_page = {timings[row.index].span_id: row.critical_ns for row in waterfall.build(timings).rows}

    critical = stage_share_minutes.critical_time_ns(arrays([trace])).tolist()

    assert dict(zip((s.span for s in trace), critical, strict=True)) == on_page
    assert sum(critical) == 10 * US


def test_a_chain_deeper_than_the_walk_keeps_its_time_at_the_deepest_level_walked():
    # given a request that is one chain of spans, each 1 us inside its parent at both ends,
    # 50 levels deeper than the walk goes
    depth = critical_path.MAX_DEPTH + 50
    trace = [S(0, None, 0, 2 * depth * US, root=True)]
    trace += [S(i, i - 1, i * US, 2 * (depth - i) * US) for i in range(1, depth)]

    critical = critical_ms(trace)

    # then every span above the last level walked keeps its two edges, the last level
    # walked keeps the rest, nothing below it counts, and the request still adds up
    last = critical_path.MAX_DEPTH
    assert critical[:last] == [2 * US / MS] * last
    assert critical[last] == 2 * (depth - last) * US / MS
    assert critical[last + 1 :] == [0.0] * (depth - last - 1)
    assert sum(critical) == pytest.approx(2 * depth * US / MS)


@st.composite
def sequential_traces(draw: st.DrawFn) -> list[S]:
    """A tree whose children run one after another inside their parent, touching or not."""
    trace = [S(0, None, 0, 1000 * MS, root=True)]
    pending = [0]
    while pending and len(trace) < 30:
        parent = trace[pending.pop()]
        cuts = sorted(draw(st.lists(st.integers(0, parent.duration // MS), max_size=6)))
        for lo, hi in zip(cuts[::2], cuts[1::2], strict=False):
            trace.append(S(len(trace), parent.span, parent.start + lo * MS, (hi - lo) * MS))
            pending.append(len(trace) - 1)
    return trace


@given(trace=sequential_traces())
def test_children_one_after_another_give_their_self_times(trace: list[S]):
    assert critical_ms(trace) == self_ms(trace)


@given(
    durations=st.lists(st.integers(1, 100), min_size=2, max_size=8, unique=True),
    gap=st.integers(0, 50),
)
def test_of_parallel_children_only_the_longer_counts(durations: list[int], gap: int):
    # given children all starting together inside the root
    longest = max(durations)
    trace = [ms(0, None, 0, gap + longest + gap)]
    trace += [ms(i + 1, 0, gap, gap + d) for i, d in enumerate(durations)]

    critical = critical_ms(trace)

    # then the root keeps the gaps and the longest child the rest; the others count nothing
    assert critical[0] == 2 * gap
    assert critical[1:] == [d if d == longest else 0 for d in durations]


# ----- stored and read on real PostgreSQL --------------------------------------------------------


@pytest.fixture
def writer(django_db_setup: None) -> Iterator[SpanWriter]:
    span_writer = SpanWriter(conninfo(), max_connections=2)
    yield span_writer
    span_writer.close()


# A request whose feature hydration (70 ms) and model (50 ms) run side by side under a 100 ms
# root: work shares count both, the critical path only the hydration the request waited for.
SIDE_BY_SIDE = [
    Span(1, None, "predict", 0, 100, root=True),
    Span(2, 1, "feature_hydration", 10, 70),
    Span(3, 1, "model_forward", 10, 50),
]


@db
def test_parallel_children_critical_path_shares_differ_from_work_shares(writer, client):
    # given ten such requests stored as ingest stores them, and their minute's shares computed
    team = make_team()
    for second in range(10):
        store(writer, team, decoded(SIDE_BY_SIDE, T0 + dt.timedelta(seconds=second)))
    compute_stage_shares(DONE, seconds=60)

    # then each stage's row holds its self time and, beside it, its critical-path time
    assert {
        r.stage.name: (r.self_ms_sum, r.critical_ms_sum, r.key_critical_ms)
        for r in StageShare.objects.filter(team=team, resolution="minute").select_related("stage")
    } == {
        "predict": (300.0, 300.0, [300.0]),
        "feature_hydration": (700.0, 700.0, [700.0]),
        "model_forward": (500.0, 0.0, [0.0]),
    }

    # when a member asks the API for the window's breakdown
    pipeline = Pipeline.objects.get(team=team)
    client.force_login(make_user(team))
    response = client.get(
        f"/api/pipelines/{pipeline.pk}/stage-breakdown/",
        {"start": T0.isoformat(), "end": (T0 + 5 * MINUTE).isoformat(), "step": "60"},
    )

    # then work shares divide 150 ms of work, critical-path shares the 100 ms each took
    body = response.json()
    assert response.status_code == 200
    assert body["critical_shown"] is True
    assert [
        (
            s["name"],
            s["mean_self_ms_all"],
            s["share_all"],
            s["mean_critical_ms_all"],
            s["share_critical_all"],
        )
        for s in body["stages"]
    ] == [
        ("feature_hydration", 70.0, 70 / 150, 70.0, 0.7),
        ("model_forward", 50.0, 50 / 150, 0.0, 0.0),
        ("predict", 30.0, 30 / 150, 30.0, 0.3),
    ]
    assert body["mean_root_ms_all"] == 100.0
    # and so do the minute's shares in the series, the minutes without requests left empty
    assert {
        s["name"]: (s["share_all"][0], s["share_critical_all"]) for s in body["series"]["stages"]
    } == {
        "feature_hydration": (70 / 150, [0.7, None, None, None, None]),
        "model_forward": (50 / 150, [0.0, None, None, None, None]),
        "predict": (30 / 150, [0.3, None, None, None, None]),
    }


@db
def test_hours_keep_critical_path_sums_only_when_all_their_minutes_have_them(writer):
    # given one minute computed with critical paths, and one before they were (as the
    # migration leaves older rows)
    team = make_team()
    store(writer, team, decoded(SIDE_BY_SIDE, T0 + dt.timedelta(seconds=5)))
    store(writer, team, decoded(SIDE_BY_SIDE, T0 + MINUTE + dt.timedelta(seconds=5)))
    compute_stage_shares(DONE, seconds=60)
    StageShare.objects.filter(team=team, resolution="minute").update(
        critical_ms_sum=None, key_critical_ms=None
    )
    compute_stage_shares(DONE + MINUTE, seconds=60)
    pipeline = Pipeline.objects.get(team=team)

    # then the hour summing both has none, and a window over them offers none
    hour = StageShare.objects.filter(team=team, resolution="hour")
    assert {r.critical_ms_sum for r in hour} == {None}
    both = stage_breakdown(pipeline, T0, T0 + 2 * MINUTE)
    assert (both.requests, both.critical_shown) == (2, False)
    assert {s.share_critical_all for s in both.stages} == {None}
    # while a window over the new minute alone does
    new = stage_breakdown(pipeline, T0 + MINUTE, T0 + 2 * MINUTE)
    assert (new.requests, new.critical_shown) == (1, True)
    assert {s.stage: s.share_critical_all for s in new.stages} == {
        "feature_hydration": 0.7,
        "model_forward": 0.0,
        "predict": 0.3,
    }

"""Stage shares: self time per stage over all requests and the slowest 1%, per minute.

The pure maths is checked on hand-built span arrays and against a plain per-span reference;
the worker on real PostgreSQL with spans stored as live ingest stores them (``SpanWriter``),
and once on a demo backfill against self times recomputed in SQL with ``range_agg``.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.demo.backfill import backfill_demo
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import stage_share_minutes, stage_share_services, tails
from latencyboard.rollups.models import StageShare, StageShareWatermark
from latencyboard.rollups.stage_share_queries import StageFigures, stage_breakdown
from latencyboard.rollups.stage_share_services import ShareResult, compute_stage_shares
from latencyboard.rollups.tasks import stage_shares
from latencyboard.storage import stage_share_rows
from latencyboard.storage.stage_share_rows import TraceSpans, decode_trace_spans
from latencyboard.teams.models import Team
from tests.factories import make_team

SERVER, INTERNAL = 2, 1
MS = 10**6
MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
# Yesterday 10:00 UTC: inside the raw retention.
DAY = dt.datetime.combine(
    dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC
)
T0 = DAY + dt.timedelta(hours=10)
GRACE = dt.timedelta(seconds=120)  # STAGE_SHARE_GRACE_SECONDS' default
DONE = T0 + MINUTE + GRACE  # the first moment minute T0 is ready

db = pytest.mark.django_db(transaction=True)
_ids = itertools.count(1)


# ----- helpers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class S:
    """A span of a hand-built trace: times in ms from the trace's start."""

    span: int
    parent: int | None
    stage: str
    start_ms: int
    duration_ms: int
    root: bool = False


def arrays(traces: Sequence[Sequence[S]], start_ms: int = 0) -> TraceSpans:
    """Trace ``t`` of ``traces`` as span arrays; stage ids are the stage names' ranks."""
    spans = [(t, s) for t, trace in enumerate(traces) for s in trace]
    names = sorted({s.stage for _, s in spans})
    return TraceSpans(
        trace=np.array([t for t, _ in spans], dtype=np.int64),
        span_id=np.array([s.span for _, s in spans], dtype=np.int64),
        parent_span_id=np.array([s.parent or 0 for _, s in spans], dtype=np.int64),
        has_parent=np.array([s.parent is not None for _, s in spans], dtype=np.bool_),
        stage_id=np.array([names.index(s.stage) for _, s in spans], dtype=np.int64),
        start_ns=np.array([(start_ms + s.start_ms) * MS for _, s in spans], dtype=np.int64),
        duration_ns=np.array([s.duration_ms * MS for _, s in spans], dtype=np.int64),
        is_root=np.array([s.root for _, s in spans], dtype=np.bool_),
    )


def self_ms(trace: Sequence[S]) -> list[float]:
    return (stage_share_minutes.self_time_ns(arrays([trace])) / MS).tolist()


def decoded(
    trace: Sequence[S],
    start: dt.datetime,
    trace_id: bytes | None = None,
    service: str = "recommender",
) -> list[DecodedSpan]:
    """The hand-built trace as ingest decodes it, starting at ``start``."""
    trace_id = trace_id or next(_ids).to_bytes(16, "big")
    base_ns = int(start.timestamp()) * 10**9 + start.microsecond * 1000
    return [
        DecodedSpan(
            trace_id=trace_id,
            span_id=s.span.to_bytes(8, "big"),
            parent_span_id=None if s.parent is None else s.parent.to_bytes(8, "big"),
            name=s.stage,
            kind=SERVER if s.root else INTERNAL,
            start_ns=base_ns + s.start_ms * MS,
            end_ns=base_ns + (s.start_ms + s.duration_ms) * MS,
            status_code=0,
            status_message="",
            service_name=service,
            environment="",
            stage=None if s.root else s.stage,
            attributes={},
            dropped_attributes=0,
        )
        for s in trace
    ]


def store(writer: SpanWriter, team: Team, spans: list[DecodedSpan]) -> None:
    """One export request, as live ingest writes it."""
    writer.write(team.pk, spans, rejected=0, protocol="test", received_at=T0)


def compute(now: dt.datetime) -> ShareResult:
    return compute_stage_shares(now, seconds=60)


Figures = tuple[int, float, int, float, float, float]


def rows(team: Team, resolution: str = "minute") -> dict[tuple[str, dt.datetime], Figures]:
    """(stage, bucket) -> (requests, self, requests of the slowest root bucket, self in it,
    root, root in it) sums."""
    return {
        (r.stage.name, r.bucket_start): (
            r.requests,
            r.self_ms_sum,
            r.key_requests[-1],
            r.key_self_ms[-1],
            r.root_ms_sum,
            r.key_root_ms[-1],
        )
        for r in StageShare.objects.filter(team=team, resolution=resolution).select_related("stage")
    }


def watermark(team: Team) -> dt.datetime:
    return StageShareWatermark.objects.get(pipeline__team=team).done_until


@pytest.fixture
def writer(django_db_setup: None) -> Iterator[SpanWriter]:
    span_writer = SpanWriter(conninfo(), max_connections=2)
    yield span_writer
    span_writer.close()


# Four requests of one minute with known self times (ms), root stage "predict".
SEQUENTIAL = [  # predict 5, queue_wait 10, model_forward 70, serialize 15
    S(1, None, "predict", 0, 100, root=True),
    S(2, 1, "queue_wait", 0, 10),
    S(3, 1, "model_forward", 10, 70),
    S(4, 1, "serialize", 80, 15),
]
PARALLEL = [  # two concurrent hydrations: predict 60 - |5..55| = 10, hydration 30 + 30, model 10
    S(1, None, "predict", 0, 60, root=True),
    S(2, 1, "feature_hydration", 5, 30),
    S(3, 1, "feature_hydration", 15, 30),
    S(4, 1, "model_forward", 45, 10),
]
NESTED = [  # predict 20, model_forward 180 - 40 = 140, preprocess 20, serialize 20
    S(1, None, "predict", 0, 200, root=True),
    S(2, 1, "model_forward", 10, 180),
    S(3, 2, "preprocess", 10, 20),
    S(4, 2, "serialize", 150, 20),
]
ORPHANED = [  # the postprocess span's parent (99) never arrives: predict 50 - 20, postprocess 40
    S(1, None, "predict", 0, 50, root=True),
    S(2, 1, "queue_wait", 0, 20),
    S(3, 99, "postprocess", 30, 40),
]
HAND_BUILT = (SEQUENTIAL, PARALLEL, NESTED, ORPHANED)
# NESTED (200 ms) is the slowest of the four, alone in its root bucket.
EXPECTED_SUMS = {  # stage: (self over all four, self over the slowest root bucket)
    "predict": (5 + 10 + 20 + 30, 20),
    "queue_wait": (10 + 20, 0),
    "model_forward": (70 + 10 + 140, 140),
    "serialize": (15 + 20, 20),
    "feature_hydration": (60, 0),
    "preprocess": (20, 20),
    "postprocess": (40, 0),
}


def expected_rows(bucket: dt.datetime) -> dict[tuple[str, dt.datetime], Figures]:
    return {
        (stage, bucket): (4, float(all_ms), 1, float(tail_ms), 410.0, 200.0)
        for stage, (all_ms, tail_ms) in EXPECTED_SUMS.items()
    }


def store_hand_built(writer: SpanWriter, team: Team, minute: dt.datetime = T0) -> None:
    for second, trace in zip((5, 15, 25, 35), HAND_BUILT, strict=True):
        store(writer, team, decoded(trace, minute + dt.timedelta(seconds=second)))


# ----- self time (pure) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trace", "expected"),
    [
        pytest.param(SEQUENTIAL, [5, 10, 70, 15], id="sequential-children"),
        pytest.param(PARALLEL, [10, 30, 30, 10], id="overlapping-children"),
        pytest.param(NESTED, [20, 140, 20, 20], id="nested-grandchildren"),
        pytest.param(ORPHANED, [30, 20, 40], id="orphan-keeps-its-duration"),
        pytest.param(
            [
                S(1, None, "predict", 0, 100, root=True),
                S(2, 1, "network", -20, 30),  # 0..10 inside
                S(3, 1, "network", 90, 40),  # 90..100 inside
                S(4, 1, "network", 150, 10),  # wholly after its parent
            ],
            [80, 30, 40, 10],
            id="children-clipped-to-the-parent",
        ),
        pytest.param(
            [
                S(1, None, "predict", 0, 100, root=True),
                S(2, 1, "model_forward", 10, 50),
                S(3, 1, "model_forward", 10, 50),  # exactly the same interval
                S(4, 1, "model_forward", 20, 10),  # inside the others
            ],
            [50, 50, 50, 10],
            id="identical-and-contained-children",
        ),
        pytest.param(
            [
                S(1, None, "predict", 0, 100, root=True),
                S(2, 1, "network", 10, 80),
                S(3, 2, "predict", 20, 60, root=True),  # the service calling itself
                S(4, 3, "model_forward", 30, 40),
            ],
            [20, 80, 20, 40],
            id="nested-root-is-not-subtracted",
        ),
        pytest.param(
            [
                S(1, None, "predict", 0, 100, root=True),
                S(2, 2, "network", 10, 30),  # its own parent
                S(3, 4, "queue_wait", 40, 10),  # 3 and 4 are each other's parent
                S(4, 3, "serialize", 45, 20),
            ],
            [100, 30, 5, 15],
            id="cycles-of-parent-ids",
        ),
        pytest.param(
            [
                S(-(2**63), None, "predict", 0, 100, root=True),
                S(2**63 - 1, -(2**63), "model_forward", 0, 60),
                S(-1, 2**63 - 1, "serialize", 0, 10),
            ],
            [40, 50, 10],
            id="extreme-span-ids",
        ),
    ],
)
def test_self_time(trace: list[S], expected: list[int]):
    assert self_ms(trace) == expected


def test_span_id_stored_twice_counts_once():
    # given a child stored twice with two start times
    trace = [
        S(1, None, "predict", 0, 100, root=True),
        S(2, 1, "model_forward", 10, 50),
        S(2, 1, "model_forward", 40, 50),
    ]

    # then either copy counts, once: both lie within the root
    assert sorted(self_ms(trace)) == [0, 50, 50]
    minutes = stage_share_minutes.stage_minutes(arrays([trace]))
    assert [(m.stage_id, m.self_ms_sum) for m in minutes] == [(0, 50.0), (1, 50.0)]


def test_a_minute_counts_its_requests_and_self_times_per_root_bucket():
    # given requests of 1, 2, … 300 ms in one minute, each with one model_forward child of 1 ms
    durations = np.arange(1, 301)
    traces = [
        [S(1, None, "predict", 0, int(n), root=True), S(2, 1, "model_forward", 0, 1)]
        for n in durations
    ]

    model, predict = stage_share_minutes.stage_minutes(arrays(traces))

    # then both rows carry the minute's root buckets, the sketch's, with each one's requests
    # and root time, and each stage's self time in them
    keys, where = np.unique(tails.root_keys(durations.astype(float)), return_inverse=True)
    per_key = np.bincount(where)
    assert predict.root_keys == model.root_keys == tuple(keys.tolist())
    assert predict.key_requests == model.key_requests == tuple(per_key.tolist())
    assert predict.key_root_ms == tuple(np.bincount(where, weights=durations).tolist())
    assert predict.key_self_ms == tuple(np.bincount(where, weights=durations - 1).tolist())
    assert model.key_self_ms == tuple(per_key.astype(float).tolist())
    assert sum(predict.key_requests) == predict.requests == 300


def test_requests_belong_to_their_roots_minute():
    # given one request at 10:00:59.990 whose child runs into the next minute, one at 10:01:30
    traces = [
        [S(1, None, "predict", 0, 30, root=True), S(2, 1, "model_forward", 5, 20)],
        [S(1, None, "predict", 30_010, 8, root=True)],
    ]
    first_minute_ms = int(T0.timestamp()) * 1000

    minutes = stage_share_minutes.stage_minutes(arrays(traces, start_ms=first_minute_ms + 59_990))

    bucket = int(T0.timestamp())
    assert [(m.bucket - bucket, m.stage_id, m.requests, m.self_ms_sum) for m in minutes] == [
        (0, 0, 1, 20.0),
        (0, 1, 1, 10.0),
        (60, 1, 1, 8.0),
    ]


def test_no_spans_no_minutes():
    assert stage_share_minutes.stage_minutes(arrays([])) == []
    assert stage_share_minutes.self_time_ns(arrays([])).tolist() == []


def test_decode_rejects_other_streams():
    with pytest.raises(ValueError, match="COPY"):
        decode_trace_spans(b"PGCOPY\n\xff\r\n\x00" + bytes(8) + bytes(60) + b"\xff\xff")


def reference_self_ms(trace: Sequence[S]) -> list[int]:
    """Self time one span at a time, the obvious way (span ids are unique)."""
    result = []
    for span in trace:
        end = span.start_ms + span.duration_ms
        clipped = sorted(
            (max(c.start_ms, span.start_ms), min(c.start_ms + c.duration_ms, end))
            for c in trace
            if c.parent == span.span and c is not span and not c.root
        )
        covered, reach = 0, span.start_ms
        for lower, upper in clipped:
            lower = max(lower, reach)
            if upper > lower:
                covered, reach = covered + upper - lower, upper
        result.append(span.duration_ms - covered)
    return result


@st.composite
def traces(draw: st.DrawFn) -> list[S]:
    """A root and up to 30 spans, each under any span (itself included) or a missing one."""
    count = draw(st.integers(min_value=0, max_value=30))
    trace = [S(0, None, "root", 0, draw(st.integers(0, 100)), root=True)]
    for span in range(1, count + 1):
        parent = draw(st.integers(min_value=-1, max_value=count))
        trace.append(
            S(
                span,
                parent if parent >= 0 else 1000,
                draw(st.sampled_from(["a", "b", "root"])),
                draw(st.integers(-20, 120)),
                draw(st.integers(0, 80)),
                root=draw(st.booleans()) and draw(st.booleans()),
            )
        )
    return trace


@given(trace=traces())
def test_self_time_matches_the_reference(trace: list[S]):
    assert self_ms(trace) == reference_self_ms(trace)


@given(trace=traces())
def test_every_span_counts_once_in_a_request(trace: list[S]):
    # given a trace whose first span is a root, so that orphans too have a request
    minutes = stage_share_minutes.stage_minutes(arrays([trace], start_ms=60_000))

    # then the stages' sums are the spans' self times, and the requests its roots
    names = sorted({s.stage for s in trace})
    sums: dict[str, float] = {}
    for minute in minutes:
        sums[names[minute.stage_id]] = sums.get(names[minute.stage_id], 0.0) + minute.self_ms_sum
    expected: dict[str, float] = {}
    for span, time in zip(trace, reference_self_ms(trace), strict=True):
        expected[span.stage] = expected.get(span.stage, 0.0) + time
    assert sums == expected
    requests = {minute.bucket: minute.requests for minute in minutes}
    assert sum(requests.values()) == sum(s.root for s in trace)


# ----- the worker --------------------------------------------------------------------------------


@db
def test_minute_rows_hold_each_stages_self_time(writer):
    # given the four hand-built requests in minute T0
    team = make_team()
    store_hand_built(writer, team)

    # when the minute is ready
    result = compute(DONE)

    # then each stage's sums are the hand-computed ones, and hour and day say the same
    assert result == ShareResult(minutes=1, requests=4, spans=15, behind=0)
    assert rows(team) == expected_rows(T0)
    assert rows(team, "hour") == expected_rows(T0)
    assert rows(team, "day") == expected_rows(DAY)
    assert watermark(team) == T0 + MINUTE


@db
def test_spans_of_a_trace_in_two_batches_are_assembled(writer):
    # given a request whose child spans come in a second export, within the grace period
    team = make_team()
    first, *children = decoded(SEQUENTIAL, T0 + dt.timedelta(seconds=50))
    store(writer, team, [first])

    early = compute(DONE - dt.timedelta(seconds=1))
    store(writer, team, children)
    result = compute(DONE)

    # then nothing was written before the grace period ran out, and then the whole trace
    assert early == ShareResult(minutes=0, requests=0, spans=0, behind=0)
    assert result.spans == 4
    assert rows(team) == {
        ("predict", T0): (1, 5.0, 1, 5.0, 100.0, 100.0),
        ("queue_wait", T0): (1, 10.0, 1, 10.0, 100.0, 100.0),
        ("model_forward", T0): (1, 70.0, 1, 70.0, 100.0, 100.0),
        ("serialize", T0): (1, 15.0, 1, 15.0, 100.0, 100.0),
    }


@db
def test_span_arriving_after_the_watermark_is_left_out(writer):
    # given a minute written while one child of a request had not arrived
    team = make_team()
    root, *children = decoded(SEQUENTIAL, T0 + dt.timedelta(seconds=50))
    store(writer, team, [root, *children[:2]])
    compute(DONE)
    written = rows(team)

    # when the last child arrives later and the worker runs again
    store(writer, team, children[2:])
    result = compute(DONE + 10 * MINUTE)

    # then the minute is not computed again: the late child's time stays in predict's
    assert result == ShareResult(minutes=0, requests=0, spans=0, behind=0)
    assert rows(team) == written
    assert written[("predict", T0)][1] == 20.0
    assert watermark(team) == T0 + 11 * MINUTE


@db
def test_computing_again_changes_nothing(writer):
    team = make_team()
    store_hand_built(writer, team)
    compute(DONE)
    before = list(StageShare.objects.filter(team=team).order_by("pk").values())

    again = compute(DONE)

    assert again == ShareResult(minutes=0, requests=0, spans=0, behind=0)
    assert list(StageShare.objects.filter(team=team).order_by("pk").values()) == before
    assert len(before) == 3 * len(EXPECTED_SUMS)


@db
def test_failed_step_writes_nothing_and_the_next_run_does_it(writer, monkeypatch):
    # given a step that fails after writing its minute rows, before moving the watermark
    team = make_team()
    store_hand_built(writer, team)

    def fail(*args: object) -> None:
        raise RuntimeError("worker lost")

    with monkeypatch.context() as patched:
        patched.setattr(stage_share_services, "_sum_finer", fail)
        with pytest.raises(RuntimeError, match="worker lost"):
            compute(DONE)
    assert not StageShare.objects.filter(team=team).exists()
    assert not StageShareWatermark.objects.filter(pipeline__team=team).exists()

    # when the worker runs again
    compute(DONE)

    # then the minute is written once
    assert rows(team) == expected_rows(T0)


@db
def test_steps_skip_quiet_minutes_and_sum_hours_and_days(writer):
    # given requests at 10:00 and at 12:30, three steps' worth of 15 minutes apart
    team = make_team()
    store(writer, team, decoded(SEQUENTIAL, T0 + dt.timedelta(seconds=10)))
    later = T0 + 2 * HOUR + 30 * MINUTE
    store(writer, team, decoded(NESTED, later + dt.timedelta(seconds=10)))

    result = compute(later + MINUTE + GRACE)

    # then both minutes are written, each hour holds its own and the day holds both, each in
    # its root bucket (the slowest bucket holds the 200 ms request)
    assert result == ShareResult(minutes=2, requests=2, spans=8, behind=0)
    assert {key: value[:2] for key, value in rows(team, "hour").items()} == {
        ("predict", T0): (1, 5.0),
        ("queue_wait", T0): (1, 10.0),
        ("model_forward", T0): (1, 70.0),
        ("serialize", T0): (1, 15.0),
        ("predict", T0 + 2 * HOUR): (1, 20.0),
        ("model_forward", T0 + 2 * HOUR): (1, 140.0),
        ("preprocess", T0 + 2 * HOUR): (1, 20.0),
        ("serialize", T0 + 2 * HOUR): (1, 20.0),
    }
    assert rows(team, "day") == {
        ("predict", DAY): (2, 25.0, 1, 20.0, 300.0, 200.0),
        ("queue_wait", DAY): (2, 10.0, 1, 0.0, 300.0, 200.0),
        ("model_forward", DAY): (2, 210.0, 1, 140.0, 300.0, 200.0),
        ("serialize", DAY): (2, 35.0, 1, 20.0, 300.0, 200.0),
        ("preprocess", DAY): (2, 20.0, 1, 20.0, 300.0, 200.0),
    }
    day = StageShare.objects.get(team=team, resolution="day", stage__name="queue_wait")
    assert (day.key_requests, day.key_root_ms, day.key_self_ms) == (
        [1, 1],
        [100.0, 200.0],
        [10.0, 0.0],
    )
    assert watermark(team) == later + MINUTE


@db
def test_a_backlog_is_read_in_steps_of_bounded_requests(writer, monkeypatch):
    # given four requests in minute T0, then one in each of the next two minutes
    team = make_team()
    store_hand_built(writer, team)
    store(writer, team, decoded(SEQUENTIAL, T0 + MINUTE + dt.timedelta(seconds=5)))
    store(writer, team, decoded(NESTED, T0 + 2 * MINUTE + dt.timedelta(seconds=5)))
    reads: list[tuple[dt.datetime, dt.datetime, int]] = []
    read = stage_share_rows.trace_spans

    def recorded(*args: Any, **kwargs: Any) -> TraceSpans:
        spans = read(*args, **kwargs)
        reads.append((kwargs["start"], kwargs["end"], int(spans.is_root.sum())))
        return spans

    monkeypatch.setattr(stage_share_rows, "trace_spans", recorded)

    # when the three minutes are computed at most two requests a step
    result = compute_stage_shares(T0 + 3 * MINUTE + GRACE, seconds=60, requests_per_step=2)

    # then T0 is a step of its own (a minute is never split), the other two share one
    assert reads == [(T0, T0 + MINUTE, 4), (T0 + MINUTE, T0 + 3 * MINUTE, 2)]
    assert result == ShareResult(minutes=3, requests=6, spans=23, behind=0)
    assert {key: value for key, value in rows(team).items() if key[1] == T0} == expected_rows(T0)
    assert watermark(team) == T0 + 3 * MINUTE


@db
def test_rows_carry_the_pipelines_team_and_other_teams_spans_stay_out(writer):
    # given another team sending the same trace ids and root span id, one 1 s span each
    team, outsider = make_team(), make_team("outsider")
    trace_ids = [bytes([n]) * 16 for n in range(1, 5)]
    for second, trace, trace_id in zip((5, 15, 25, 35), HAND_BUILT, trace_ids, strict=True):
        at = T0 + dt.timedelta(seconds=second)
        store(writer, team, decoded(trace, at, trace_id))
        store(writer, outsider, decoded([S(1, None, "predict", 0, 1000, root=True)], at, trace_id))

    compute(DONE)

    # then each team's rows are its own spans' and carry its own team
    assert rows(team) == expected_rows(T0)
    assert StageShare.objects.filter(pipeline__team=team).exclude(team=team).count() == 0
    assert StageShare.objects.filter(pipeline__team=outsider).exclude(team=outsider).count() == 0
    assert rows(outsider) == {("predict", T0): (4, 4000.0, 4, 4000.0, 4000.0, 4000.0)}


@db
def test_the_task_computes_with_the_current_time(writer):
    # given yesterday's hand-built minute, long ready by the wall clock
    team = make_team()
    store_hand_built(writer, team)

    # when the beat's task runs (in this process: until it joins tasks.py no worker has it)
    stage_shares.apply()

    # then the minute is written
    assert rows(team) == expected_rows(T0)


@db
def test_a_call_into_another_pipeline_is_the_callers_own_time(writer):
    # given a recommender request whose network span calls the feature store (a root there)
    team = make_team()
    trace_id = next(_ids).to_bytes(16, "big")
    at = T0 + dt.timedelta(seconds=20)
    caller = [S(1, None, "predict", 0, 100, root=True), S(2, 1, "network", 10, 80)]
    callee = [S(3, 2, "lookup", 20, 60, root=True), S(4, 3, "db", 30, 40)]
    store(writer, team, decoded(caller, at, trace_id) + decoded(callee, at, trace_id, "features"))

    compute(DONE)

    # then the call is the caller's network time, and the feature store has its own request
    assert rows(team) == {
        ("predict", T0): (1, 20.0, 1, 20.0, 100.0, 100.0),
        ("network", T0): (1, 80.0, 1, 80.0, 100.0, 100.0),
        ("lookup", T0): (1, 20.0, 1, 20.0, 60.0, 60.0),
        ("db", T0): (1, 40.0, 1, 40.0, 60.0, 60.0),
    }


# ----- the breakdown -----------------------------------------------------------------------------


def figures(stage: str, all_ms: float, critical_ms: float) -> StageFigures:
    """A stage's figures over the four hand-built requests: far too few for a slowest 1%.
    Their work is 470 ms, their end-to-end time 410 ms."""
    return StageFigures(
        stage_id=Pipeline.objects.get().stages.get(name=stage).pk,
        stage=stage,
        mean_self_ms_all=all_ms / 4,
        mean_self_ms_tail=None,
        share_all=all_ms / 470,
        share_tail=None,
        mean_critical_ms_all=critical_ms / 4,
        share_critical_all=critical_ms / 410,
    )


@db
def test_breakdown_means_and_shares(writer):
    team = make_team()
    store_hand_built(writer, team)
    compute(DONE)

    breakdown = stage_breakdown(Pipeline.objects.get(team=team), T0, T0 + 5 * MINUTE)

    # then the means and shares are over the four requests (root times 50, 60, 100 and 200
    # ms): the one above their p99 (100 ms) is no slowest 1% to show
    assert (breakdown.start, breakdown.end) == (T0, T0 + 5 * MINUTE)
    assert (breakdown.requests, breakdown.tail_requests, breakdown.tail_shown) == (4, 1, False)
    assert breakdown.p99_ms == pytest.approx(100, rel=0.01)
    assert (breakdown.mean_root_ms_all, breakdown.mean_root_ms_tail) == (410 / 4, None)
    # and on the critical path the parallel request's second hydration and the orphan count
    # nothing, its root the 15 ms before the hydration it waited for
    assert breakdown.critical_shown
    assert breakdown.stages == (
        figures("model_forward", 220, 220),
        figures("predict", 65, 75),
        figures("feature_hydration", 60, 30),
        figures("postprocess", 40, 0),
        figures("serialize", 35, 35),
        figures("queue_wait", 30, 30),
        figures("preprocess", 20, 20),
    )
    assert sum(f.share_all for f in breakdown.stages) == pytest.approx(1.0, abs=1e-12)
    assert sum(f.share_critical_all or 0 for f in breakdown.stages) == pytest.approx(1, abs=1e-12)


@db
def test_breakdown_reads_hours_once_minutes_expired(writer):
    # given shares computed, then read a day past the minutes' retention: the minutes are gone
    team = make_team()
    store_hand_built(writer, team)
    compute(DONE)
    compute(DONE + dt.timedelta(days=settings.ROLLUP_MINUTE_DAYS + 1))
    assert not StageShare.objects.filter(team=team, resolution="minute").exists()

    breakdown = stage_breakdown(Pipeline.objects.get(team=team), T0 + 10 * MINUTE, T0 + HOUR)

    # then the window widens to the hour, whose row says the same
    assert (breakdown.start, breakdown.end) == (T0, T0 + HOUR)
    assert breakdown.stages[0] == figures("model_forward", 220, 220)
    assert rows(team, "hour") == expected_rows(T0)


@db
def test_breakdown_of_a_quiet_window_is_empty(writer):
    team = make_team()
    store_hand_built(writer, team)
    compute(DONE)

    breakdown = stage_breakdown(Pipeline.objects.get(team=team), T0 + HOUR, T0 + 2 * HOUR)

    assert (breakdown.requests, breakdown.mean_root_ms_all, breakdown.stages) == (0, None, ())


# ----- a demo backfill against SQL ---------------------------------------------------------------

# Self time of every span recomputed in SQL (range_agg merges the clipped child intervals),
# then summed per (pipeline, minute of the trace's root, stage).
# Demo traces are one root with direct children, so a trace is a request.
_SQL_SHARES = """
WITH s AS (
    SELECT pipeline_id, trace_id, span_id, parent_span_id, stage_id, is_root, duration_ns,
           (extract(epoch FROM start_time) * 1000000000)::int8 AS start_ns
    FROM spans_span WHERE team_id = %(team)s
),
covered AS (
    SELECT p.trace_id, p.span_id, sum(upper(piece) - lower(piece)) AS ns
    FROM (
        SELECT p.trace_id, p.span_id, unnest(range_agg(int8range(
            greatest(c.start_ns, p.start_ns),
            least(c.start_ns + c.duration_ns, p.start_ns + p.duration_ns)))) AS piece
        FROM s p JOIN s c ON c.trace_id = p.trace_id AND c.parent_span_id = p.span_id
        WHERE NOT c.is_root
          AND greatest(c.start_ns, p.start_ns)
              < least(c.start_ns + c.duration_ns, p.start_ns + p.duration_ns)
        GROUP BY p.trace_id, p.span_id
    ) p
    GROUP BY p.trace_id, p.span_id
),
requests AS (
    SELECT trace_id, pipeline_id, duration_ns, start_ns / 60000000000 * 60 AS bucket,
           count(*) OVER (PARTITION BY pipeline_id, start_ns / 60000000000) AS n
    FROM s WHERE is_root
)
SELECT r.pipeline_id, r.bucket, s.stage_id, max(r.n), sum(s.duration_ns - coalesce(c.ns, 0))
FROM s JOIN requests r USING (trace_id)
LEFT JOIN covered c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
GROUP BY 1, 2, 3
"""


@db
def test_demo_backfill_matches_self_times_recomputed_in_sql():
    # given a day of demo traffic for three pipelines
    team = make_team()
    end = DAY
    backfill_demo(team, days=1, end=end, now=end, scale=0.005, seed=7)

    # when every minute is ready, in steps of 15 minutes
    result = compute(end + MINUTE + GRACE)

    # then every minute row is the SQL's figures
    with connection.cursor() as cursor:
        cursor.execute(_SQL_SHARES, {"team": team.pk})
        expected = {
            (pipeline, bucket, stage): (n, int(self_ns) / MS)
            for pipeline, bucket, stage, n, self_ns in cursor.fetchall()
        }
        cursor.execute("SELECT count(*) FROM spans_span WHERE team_id = %s AND is_root", [team.pk])
        (roots,) = cursor.fetchone()
    minute_rows = StageShare.objects.filter(team=team, resolution="minute")
    written = {
        (r.pipeline_id, int(r.bucket_start.timestamp()), r.stage_id): (r.requests, r.self_ms_sum)
        for r in minute_rows
    }
    assert len(expected) > 10_000
    assert written == expected
    # and each row's per-root-bucket figures add up to its own
    assert all(
        (sum(r.key_requests), round(sum(r.key_self_ms), 6)) == (r.requests, round(r.self_ms_sum, 6))
        for r in minute_rows
    )
    assert (result.requests, result.behind) == (roots, 0)

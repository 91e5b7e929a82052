"""The slowest 1% of a window is the requests above the window's p99, whatever each minute's
traffic: no tail (and no class built on one) from a handful of requests, the exact tail set up
to the p99's own sketch bucket at volume, and no class flip from the demo incident.

Requests are sampled as the demo samples them, turned into span arrays, and written as the
stage-share worker writes minute rows (``stage_share_minutes`` then ``insert_rows``); the
breakdown and the class are then read through the product's queries.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from django.db import transaction

from latencyboard.dashboards.bottleneck import Bottleneck
from latencyboard.dashboards.bottleneck_queries import bottlenecks
from latencyboard.db import psycopg_cursor
from latencyboard.demo.incident import Incident
from latencyboard.demo.profiles import PIPELINES, RequestBatch, sample_requests
from latencyboard.demo.service import slow_down
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import stage_share_minutes, tails
from latencyboard.rollups.models import Resolution
from latencyboard.rollups.stage_share_queries import stage_breakdown
from latencyboard.sketches.buckets import GAMMA
from latencyboard.storage import stage_share_rows
from latencyboard.storage.stage_share_rows import TraceSpans
from tests.factories import make_team

pytestmark = pytest.mark.django_db

MINUTE = dt.timedelta(minutes=1)
T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
FRAUD = PIPELINES[0]


def spans_of(batch: RequestBatch, starts_ns: np.ndarray, stage_ids: list[int]) -> TraceSpans:
    """Each request of ``batch`` as a root (stage ``stage_ids[0]``) with one child per stage
    that ran (``stage_ids[1:]``, in the pipeline's order), starting at ``starts_ns``."""
    n = len(batch)
    ran = batch.ran
    child_trace, child_stage = np.nonzero(ran)
    trace = np.concatenate([np.arange(n), child_trace])
    return TraceSpans(
        trace=trace,
        span_id=np.concatenate([np.ones(n, np.int64), child_stage + 2]),
        parent_span_id=np.concatenate([np.zeros(n, np.int64), np.ones(len(child_trace), np.int64)]),
        has_parent=np.concatenate([np.zeros(n, bool), np.ones(len(child_trace), bool)]),
        stage_id=np.array(stage_ids, dtype=np.int64)[
            np.concatenate([np.zeros(n, int), child_stage + 1])
        ],
        start_ns=np.concatenate(
            [starts_ns, starts_ns[child_trace] + batch.stage_start_ns[ran]]
        ).astype(np.int64),
        duration_ns=np.concatenate([batch.root_ns, batch.stage_ns[ran]]).astype(np.int64),
        is_root=np.concatenate([np.ones(n, bool), np.zeros(len(child_trace), bool)]),
    )


def fraud_scorer() -> tuple[Pipeline, list[int]]:
    pipeline = Pipeline.objects.create(team=make_team(), service_name=FRAUD.name)
    names = [FRAUD.root_name, *(stage.name for stage in FRAUD.stages)]
    return pipeline, [Stage.objects.create(pipeline=pipeline, name=name).pk for name in names]


def write_minutes(
    pipeline: Pipeline,
    stage_ids: list[int],
    per_minute: int,
    minutes: int,
    seed: int,
    incident_from: int | None = None,
    start: dt.datetime = T0,
) -> tuple[RequestBatch, np.ndarray]:
    """``per_minute`` fraud-scorer requests in each of ``minutes`` minutes from ``start``, the
    demo incident (model_forward 1.5x slower) from minute ``incident_from`` on; written as
    the stage-share worker writes them. Returns the requests and their start times."""
    rng = np.random.default_rng(seed)
    batch = sample_requests(FRAUD, per_minute * minutes, rng)
    incident = Incident(FRAUD.name, "model_forward", 1.5, until_unix_s=float("inf"))
    if incident_from is not None:
        late = slice(incident_from * per_minute, None)
        # Views of the batch's arrays: slowed in place, as the demo slows its batches.
        slowed = RequestBatch(
            batch.stage_ns[late],
            batch.gap_ns[late],
            batch.cache_hit[late],
            batch.model_version_idx[late],
            batch.error_stage[late],
        )
        slow_down(FRAUD, slowed, incident)
    minute_of = np.repeat(np.arange(minutes), per_minute)
    offset_ns = rng.integers(0, 50 * 10**9, size=len(minute_of))
    starts_ns = int(start.timestamp()) * 10**9 + minute_of * 60 * 10**9 + offset_ns
    rows = stage_share_minutes.stage_minutes(spans_of(batch, starts_ns, stage_ids))
    with transaction.atomic():
        stage_share_rows.insert_rows(
            psycopg_cursor(), pipeline.team_id, pipeline.pk, Resolution.MINUTE, rows
        )
    return batch, starts_ns


def test_three_requests_a_minute_show_no_slowest_1_percent_and_no_class_built_on_it():
    # given an hour of fraud-scorer at 3 requests a minute: 180 requests
    pipeline, stage_ids = fraud_scorer()
    write_minutes(pipeline, stage_ids, per_minute=3, minutes=60, seed=1)

    breakdown = stage_breakdown(pipeline, T0, T0 + 60 * MINUTE)
    found = bottlenecks([pipeline], T0, T0 + 60 * MINUTE, 5 * MINUTE)[pipeline.pk]

    # then the 1 or 2 requests above the p99 are no slowest 1%: no tail figures at all
    assert breakdown.requests == 180
    assert breakdown.tail_requests < tails.MIN_TAIL_REQUESTS
    assert breakdown.tail_shown is False
    assert breakdown.mean_root_ms_tail is None
    assert {(f.mean_self_ms_tail, f.share_tail) for f in breakdown.stages} == {(None, None)}
    # and the class is decided by all requests, saying why the tail was not used
    assert found.classification.cohort in ("all", None)
    assert found.classification.share_tail is None
    assert "slowest 1%" not in found.classification.reason.split("(")[0]


def test_at_500_requests_a_minute_the_tail_is_the_exact_one_within_the_sketchs_bound():
    # given 10 minutes of fraud-scorer at 500 requests a minute
    pipeline, stage_ids = fraud_scorer()
    batch, _ = write_minutes(pipeline, stage_ids, per_minute=500, minutes=10, seed=2)

    breakdown = stage_breakdown(pipeline, T0, T0 + 10 * MINUTE)

    # the exact p99 (the order statistic the sketch estimates) and the requests above it
    root_ms = batch.root_ns / 1e6
    exact_p99 = np.quantile(root_ms, tails.TAIL_QUANTILE, method="lower")
    exact_tail = root_ms > exact_p99
    # the window's tail: every request above the p99's sketch bucket
    p99_key = tails.root_keys(np.array([exact_p99]))[0]
    tail = tails.root_keys(root_ms) > p99_key
    # then the window's p99 is within 1% and its tail is the exact tail set less those
    # requests within the p99's own bucket (less than a factor GAMMA above the p99)
    assert breakdown.p99_ms == pytest.approx(exact_p99, rel=0.01)
    assert breakdown.tail_shown is True
    assert breakdown.tail_requests == tail.sum()
    assert not (tail & ~exact_tail).any()
    assert (root_ms[exact_tail & ~tail] < exact_p99 * GAMMA).all()
    assert tail.sum() >= 0.6 * exact_tail.sum()
    # and its figures are those of exactly that set: the mean end-to-end and per stage
    assert breakdown.mean_root_ms_tail == pytest.approx(root_ms[tail].mean(), rel=1e-9)
    forward = next(f for f in breakdown.stages if f.stage == "model_forward")
    index = [stage.name for stage in FRAUD.stages].index("model_forward")
    assert forward.mean_self_ms_tail == pytest.approx(
        batch.stage_ns[tail, index].mean() / 1e6, rel=1e-9
    )


def test_the_demo_incident_does_not_flip_the_class():
    # given 40 minutes of fraud-scorer at 300 requests a minute, model_forward 1.5x slower
    # (the demo incident) over the last 20
    pipeline, stage_ids = fraud_scorer()
    write_minutes(pipeline, stage_ids, per_minute=300, minutes=40, seed=3, incident_from=20)

    before = bottlenecks([pipeline], T0, T0 + 20 * MINUTE, 5 * MINUTE)[pipeline.pk]
    during = bottlenecks([pipeline], T0 + 20 * MINUTE, T0 + 40 * MINUTE, 5 * MINUTE)[pipeline.pk]
    whole = bottlenecks([pipeline], T0, T0 + 40 * MINUTE, 5 * MINUTE)[pipeline.pk]

    # then the class stays what the slowest 1% says, feature fetching (cache misses), before
    # and during the incident, and no change of class is named
    assert before.classification.bottleneck == Bottleneck.FEATURE
    assert during.classification.bottleneck == Bottleneck.FEATURE
    assert whole.classification.bottleneck == Bottleneck.FEATURE
    assert (before.change, during.change, whole.change) == (None, None, None)


def test_the_bottleneck_window_ends_where_asked_not_at_the_end_of_its_hour():
    # given an hour of requests, 50 a minute
    pipeline, stage_ids = fraud_scorer()
    write_minutes(pipeline, stage_ids, per_minute=50, minutes=60, seed=5)

    # when the class of its first ten minutes is asked for, in hour steps
    found = bottlenecks([pipeline], T0, T0 + 10 * MINUTE, 60 * MINUTE)[pipeline.pk]

    # then those ten minutes' 500 requests are read, not the whole hour's 3,000
    assert (found.start, found.end) == (T0, T0 + 10 * MINUTE)
    assert found.classification.requests == 500

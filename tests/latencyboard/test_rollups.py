"""The rollup worker's services on real PostgreSQL: folding, compaction, retention, rebuild.

Spans are stored as live ingest stores them (``SpanWriter``, each write one ingest batch), and
every expectation is recomputed independently from the raw rows of ``spans_span``.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.management import call_command
from django.db import connection

from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.live.groups import team_group
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import compaction, folding, rebuild, services
from latencyboard.rollups.models import Rollup
from latencyboard.sketches.sketch import Sketch, merge_many
from latencyboard.sla.models import Objective, SlaMinute
from latencyboard.spans.columns import SpanColumns
from latencyboard.spans.models import IngestBatch
from latencyboard.storage import fold_spans
from latencyboard.teams.models import Team
from tests.factories import make_team

QUANTILES = [0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]
STAGES = ("queue_wait", "model_forward", "serialize")
SERVER, INTERNAL = 2, 1
# Yesterday 10:00 UTC: inside the raw retention, in a partition migrate created.
DAY = dt.datetime.combine(
    dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC
)
T0 = DAY + dt.timedelta(hours=10)
MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)

db = pytest.mark.django_db(transaction=True)


# ----- helpers -----------------------------------------------------------------------------------


def requests(
    rng: np.random.Generator,
    count: int,
    start: dt.datetime,
    seconds: int,
    service: str = "recommender",
) -> list[DecodedSpan]:
    """``count`` requests starting within ``seconds`` of ``start``: a root span ("predict")
    and a child per stage in ``STAGES``; one in ten failed."""
    spans = []
    start_ns = int(start.timestamp()) * 10**9
    for _ in range(count):
        trace, root = rng.bytes(16), rng.bytes(8)
        at = start_ns + int(rng.integers(0, seconds * 10**9))
        failed = bool(rng.random() < 0.1)
        durations = rng.lognormal(np.log(4e6), 0.9, size=len(STAGES)).astype(np.int64)
        spans.append(
            _span(trace, root, None, "predict", SERVER, at, int(durations.sum()), failed, service)
        )
        for stage, duration in zip(STAGES, durations.tolist(), strict=True):
            spans.append(
                _span(trace, rng.bytes(8), root, stage, INTERNAL, at, duration, failed, service)
            )
            at += duration
    return spans


def _span(
    trace: bytes,
    span_id: bytes,
    parent: bytes | None,
    name: str,
    kind: int,
    start_ns: int,
    duration_ns: int,
    failed: bool,
    service: str,
) -> DecodedSpan:
    return DecodedSpan(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_ns=start_ns,
        end_ns=start_ns + duration_ns,
        status_code=2 if failed else 0,
        status_message="",
        service_name=service,
        environment="",
        stage=None if parent is None else name,
        attributes={},
        dropped_attributes=0,
    )


@dataclass(frozen=True)
class RawGroup:
    errors: int
    durations_ms: np.ndarray


Key = tuple[int, int | None, dt.datetime]


def raw_groups(team: Team, unit: str = "minute") -> dict[Key, RawGroup]:
    """Per (pipeline, stage, bucket) from the raw spans; stage None: the root spans."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT pipeline_id, stage_id, date_trunc(%(unit)s, start_time, 'UTC'),
                   count(*) FILTER (WHERE status_code = 2), array_agg(duration_ns)
            FROM spans_span WHERE team_id = %(team)s GROUP BY 1, 2, 3
            UNION ALL
            SELECT pipeline_id, NULL::bigint, date_trunc(%(unit)s, start_time, 'UTC'),
                   count(*) FILTER (WHERE status_code = 2), array_agg(duration_ns)
            FROM spans_span WHERE team_id = %(team)s AND is_root GROUP BY 1, 2, 3
            """,
            {"unit": unit, "team": team.pk},
        )
        return {
            (p, s, b): RawGroup(e, np.array(d, dtype=np.float64) / 1e6)
            for p, s, b, e, d in cursor.fetchall()
        }


def rollups(team: Team, resolution: str) -> dict[Key, Rollup]:
    rows = Rollup.objects.filter(team=team, resolution=resolution)
    return {(r.pipeline_id, r.stage_id, r.bucket_start): r for r in rows}


def assert_rollups_match_spans(team: Team, resolution: str) -> None:
    raw = raw_groups(team, resolution)
    rows = rollups(team, resolution)
    assert rows.keys() == raw.keys()
    for key, group in raw.items():
        row, expected = rows[key], Sketch.from_values(group.durations_ms)
        sketch = Sketch.from_bytes(row.sketch)
        assert (row.count, row.error_count) == (len(group.durations_ms), group.errors), key
        assert (row.min_ms, row.max_ms) == (expected.min, expected.max), key
        assert row.sum_ms == pytest.approx(expected.sum, rel=1e-12), key
        assert sketch.count == row.count, key
        np.testing.assert_array_equal(sketch.quantiles(QUANTILES), expected.quantiles(QUANTILES))


def sla_counts(objective: Objective) -> dict[dt.datetime, tuple[int, int]]:
    rows = SlaMinute.objects.filter(objective=objective)
    return {row.minute: (row.good, row.total) for row in rows}


def raw_sla_counts(objective: Objective) -> dict[dt.datetime, tuple[int, int]]:
    match = "is_root" if objective.stage_id is None else "stage_id = %(stage)s"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT date_trunc('minute', start_time, 'UTC'),
                   count(*) FILTER (WHERE duration_ns <= %(threshold_ns)s), count(*)
            FROM spans_span WHERE pipeline_id = %(pipeline)s AND {match} GROUP BY 1
            """,  # noqa: S608 - one of two constant filters
            {
                "pipeline": objective.pipeline_id,
                "stage": objective.stage_id,
                "threshold_ns": round(objective.threshold_ms * 1e6),
            },
        )
        return {minute: (good, total) for minute, good, total in cursor.fetchall()}


def store(writer: SpanWriter, team: Team, spans: list[DecodedSpan], size: int = 512) -> int:
    """Write ``spans`` as ingest does, ``size`` per request; returns the batches written."""
    for first in range(0, len(spans), size):
        writer.write(
            team.pk,
            spans[first : first + size],
            rejected=0,
            protocol="test",
            received_at=T0,
        )
    return -(-len(spans) // size)


def fold_all(now: dt.datetime) -> services.FoldResult:
    return services.fold_until_idle(lambda: now, seconds=60)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261121)


@pytest.fixture
def writer(django_db_setup: None) -> Iterator[SpanWriter]:
    span_writer = SpanWriter(conninfo(), max_connections=2)
    yield span_writer
    span_writer.close()


# ----- folding (pure) ----------------------------------------------------------------------------


def columns(**values: list[int | float | bool]) -> SpanColumns:
    return SpanColumns(
        pipeline_id=np.array(values["pipeline"], dtype=np.int64),
        stage_id=np.array(values["stage"], dtype=np.int64),
        is_root=np.array(values["root"], dtype=np.bool_),
        minute=np.array(values["minute"], dtype=np.int64),
        duration_ms=np.array(values["ms"], dtype=np.float64),
        is_error=np.array(values["error"], dtype=np.bool_),
    )


def test_fold_minutes_groups_stages_and_root_spans_end_to_end_first():
    spans = columns(
        pipeline=[7, 7, 7, 7, 3],
        stage=[20, 21, 20, 20, 30],
        root=[True, False, True, False, True],
        minute=[100, 100, 100, 101, 100],
        ms=[10.0, 4.0, 30.0, 5.0, 1.0],
        error=[False, True, True, False, False],
    )

    folds = folding.fold_minutes(spans)

    summary = [(f.pipeline_id, f.stage_id, f.bucket, f.error_count, f.sketch.count) for f in folds]
    assert summary == [
        (3, None, 6000, 0, 1),
        (3, 30, 6000, 0, 1),
        (7, None, 6000, 1, 2),
        (7, 20, 6000, 1, 2),
        (7, 20, 6060, 0, 1),
        (7, 21, 6000, 1, 1),
    ]
    end_to_end = folds[2].sketch
    assert (end_to_end.min, end_to_end.max, end_to_end.sum) == (10.0, 30.0, 40.0)


def test_fold_minutes_of_no_spans_is_empty():
    empty: list[int | float | bool] = []
    spans = columns(pipeline=empty, stage=empty, root=empty, minute=empty, ms=empty, error=empty)

    assert folding.fold_minutes(spans) == []


def test_combine_merges_rows_of_a_bucket_in_order():
    a, b, c = Sketch.from_values([1.0]), Sketch.from_values([2.0, 3.0]), Sketch.from_values([9.0])
    rows: list[tuple[int, int | None, int, int, Sketch | bytes]] = [
        (1, None, 0, 1, a.to_bytes()),
        (1, None, 0, 0, b),
        (1, 5, 0, 2, c.to_bytes()),
    ]

    combined = folding.combine(rows)

    assert [(f.pipeline_id, f.stage_id, f.bucket, f.error_count) for f in combined] == [
        (1, None, 0, 1),
        (1, 5, 0, 2),
    ]
    assert combined[0].sketch.to_bytes() == merge_many([a, b]).to_bytes()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(bytes(35), "whole 34-byte", id="torn-record"),
        pytest.param(bytes(32) + b"\x02\x00", "layout", id="not-a-boolean"),
    ],
)
def test_decode_spans_rejects_other_layouts(data: bytes, message: str):
    with pytest.raises(ValueError, match=message):
        fold_spans.decode(data)


# ----- folding ---------------------------------------------------------------------------------


@db
def test_fold_counts_every_span_once_per_stage_minute_and_end_to_end(rng, writer):
    # given two pipelines' requests over five minutes, in batches of 512 spans
    team = make_team()
    spans = requests(rng, 300, T0, 300) + requests(rng, 200, T0, 300, service="fraud")
    batches = store(writer, team, spans)

    # when the pending batches are folded
    now = T0 + 10 * MINUTE
    result = services.fold_pending_batches(now)

    # then every (pipeline, stage, minute) and end-to-end minute holds exactly its raw spans
    assert result == services.FoldResult(batches=batches, spans=len(spans))
    assert_rollups_match_spans(team, "minute")
    assert set(IngestBatch.objects.filter(team=team).values_list("rolled_up_at", flat=True)) == {
        now
    }


@db
def test_end_to_end_rows_count_only_root_spans(rng, writer):
    # given 40 requests of four spans each, all in one minute
    team = make_team()
    spans = requests(rng, 40, T0, 50)
    store(writer, team, spans)

    # when they are folded
    fold_all(T0 + MINUTE)

    # then the end-to-end row holds the root spans only, which also count for their stage
    end_to_end = Rollup.objects.get(team=team, stage=None)
    roots = [s for s in spans if s.parent_span_id is None]
    assert end_to_end.count == len(roots) == 40
    assert end_to_end.max_ms == max(s.end_ns - s.start_ns for s in roots) / 1e6
    predict = Stage.objects.get(pipeline__team=team, name="predict")
    assert Rollup.objects.get(stage=predict).count == 40


@db
def test_retried_batch_is_not_double_counted(rng, writer):
    # given a request that was stored, then retried by the exporter (stored nothing new)
    team = make_team()
    spans = requests(rng, 100, T0, 120)
    store(writer, team, spans)
    store(writer, team, spans)

    # when everything pending is folded
    result = fold_all(T0 + 5 * MINUTE)

    # then the spans count once and the empty retry batch is marked rolled up all the same
    assert result == services.FoldResult(batches=2, spans=len(spans))
    assert_rollups_match_spans(team, "minute")
    assert IngestBatch.objects.filter(team=team, rolled_up_at=None).count() == 0


@db
def test_late_spans_merge_into_their_rolled_up_minute(rng, writer):
    # given minutes that are rolled up already
    team = make_team()
    store(writer, team, requests(rng, 100, T0, 120))
    fold_all(T0 + 5 * MINUTE)
    before = {key: row.count for key, row in rollups(team, "minute").items()}

    # when late spans of those minutes (and of the next) arrive and are folded
    store(writer, team, requests(rng, 150, T0, 180))
    fold_all(T0 + 10 * MINUTE)

    # then the minutes hold old and late spans alike, sketches included
    assert_rollups_match_spans(team, "minute")
    after = rollups(team, "minute")
    assert all(after[key].count > count for key, count in before.items())


@db
def test_spans_of_a_deleted_pipeline_do_not_block_the_fold(rng, writer):
    # given pending spans of two pipelines, one of which is then deleted
    team = make_team()
    store(writer, team, requests(rng, 20, T0, 60) + requests(rng, 10, T0, 60, "fraud"))
    Pipeline.objects.filter(team=team, service_name="fraud").delete()

    # when the batch is folded
    result = fold_all(T0)

    # then the other pipeline's spans are counted and the batch is done
    assert result == services.FoldResult(batches=1, spans=80)
    assert sum(r.count for r in Rollup.objects.filter(team=team).exclude(stage=None)) == 80
    assert IngestBatch.objects.filter(team=team, rolled_up_at=None).count() == 0


@db
def test_fold_claims_batches_up_to_the_span_budget(rng, writer):
    team = make_team()
    store(writer, team, requests(rng, 256, T0, 60))  # two batches of 512 spans

    first = services.fold_pending_batches(T0, max_spans=1000)
    second = services.fold_pending_batches(T0, max_spans=100)
    third = services.fold_pending_batches(T0)

    assert (first, second, third) == (
        services.FoldResult(1, 512),
        services.FoldResult(1, 512),
        services.FoldResult(0, 0),
    )


@db
def test_sla_counters_match_a_count_of_raw_spans(rng, writer):
    # given objectives on a stage and end to end, created before any span
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="recommender")
    forward = Stage.objects.create(pipeline=pipeline, name="model_forward")
    objectives = [
        Objective.objects.create(
            team=team,
            pipeline=pipeline,
            stage=stage,
            name="fast",
            threshold_ms=threshold,
            target_percent=99,
        )
        for stage, threshold in [(forward, 4.0), (None, 15.0)]
    ]

    # when requests are folded over several transactions
    store(writer, team, requests(rng, 400, T0, 240))
    while services.fold_pending_batches(T0 + 5 * MINUTE, max_batches=1).batches:
        pass

    # then each objective's counters equal an independent count of its raw spans
    for objective in objectives:
        assert sla_counts(objective) == raw_sla_counts(objective)
        assert sum(total for _, total in sla_counts(objective).values()) == 400


@db
def test_concurrent_folds_fold_each_batch_once(rng, writer):
    # given many small batches
    team = make_team()
    spans = requests(rng, 600, T0, 300)
    store(writer, team, spans, size=40)
    barrier = threading.Barrier(2)
    folded: list[list[services.FoldResult]] = [[], []]

    def fold(results: list[services.FoldResult]) -> None:
        barrier.wait()
        try:
            while (result := services.fold_pending_batches(T0, max_batches=3)).batches:
                results.append(result)
        finally:
            connection.close()

    # when two workers fold at the same time, each on its own connection
    threads = [threading.Thread(target=fold, args=(results,)) for results in folded]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # then both did part of the work and no span counts twice
    assert all(folded), "each worker should have claimed batches"
    assert sum(r.spans for results in folded for r in results) == len(spans)
    assert sum(r.batches for results in folded for r in results) == len(spans) // 40
    assert_rollups_match_spans(team, "minute")


@db
def test_fold_tells_the_team_s_live_pages(rng, writer):
    team = make_team()
    layer = get_channel_layer()
    assert layer is not None
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(team_group(team.pk), channel)
    store(writer, team, requests(rng, 5, T0, 10))

    fold_all(T0)

    message = async_to_sync(layer.receive)(channel)
    pipeline = Pipeline.objects.get(team=team)
    assert message == {
        "type": "live.event",
        "event": {"type": "rollup", "pipelines": [pipeline.pk]},
    }


# ----- compaction and retention ----------------------------------------------------------------


def assert_coarse_rows_merge_their_finer_rows(team: Team, fine: str, coarse: str) -> None:
    width = HOUR if coarse == "hour" else dt.timedelta(days=1)
    finer = sorted(rollups(team, fine).items(), key=lambda item: item[0][2])
    for (pipeline, stage, start), row in rollups(team, coarse).items():
        parts = [
            r
            for (p, s, b), r in finer
            if (p, s) == (pipeline, stage) and start <= b < start + width
        ]
        merged = merge_many(bytes(r.sketch) for r in parts)
        assert row.count == sum(r.count for r in parts) == merged.count
        assert row.error_count == sum(r.error_count for r in parts)
        assert row.sum_ms == merged.sum
        assert bytes(row.sketch) == merged.to_bytes()


@pytest.fixture
def two_hours(rng, writer) -> Team:
    """A team with requests over 10:00-12:00 of yesterday, folded."""
    team = make_team()
    store(writer, team, requests(rng, 300, T0, 7200) + requests(rng, 100, T0, 7200, "fraud"))
    fold_all(T0 + 3 * HOUR)
    return team


@db
def test_compaction_merges_minutes_into_hours_and_hours_into_days(two_hours):
    # when the day is over
    result = compaction.compact_rollups(DAY + dt.timedelta(days=1, minutes=30))

    # then each hour and the day hold exactly their raw spans, as merges of the finer rows
    assert_rollups_match_spans(two_hours, "hour")
    assert_rollups_match_spans(two_hours, "day")
    assert_coarse_rows_merge_their_finer_rows(two_hours, "minute", "hour")
    assert_coarse_rows_merge_their_finer_rows(two_hours, "hour", "day")
    assert (result.hours, result.days) == (len(rollups(two_hours, "hour")), 10)


@db
def test_compaction_rerun_changes_nothing(two_hours):
    now = DAY + dt.timedelta(days=1, minutes=30)
    compaction.compact_rollups(now)
    before = {key: bytes(row.sketch) for key, row in rollups(two_hours, "hour").items()}

    again = compaction.compact_rollups(now)

    assert again == compaction.CompactionResult(hours=0, days=0, from_spans=0, deleted=0)
    assert {key: bytes(row.sketch) for key, row in rollups(two_hours, "hour").items()} == before
    assert_rollups_match_spans(two_hours, "hour")
    assert_rollups_match_spans(two_hours, "day")


@db
def test_compaction_waits_for_the_hour_to_end_plus_grace(two_hours):
    compaction.compact_rollups(T0 + 2 * HOUR + compaction.GRACE - dt.timedelta(seconds=1))

    hours = {start for _, _, start in rollups(two_hours, "hour")}
    assert hours == {T0}
    assert rollups(two_hours, "day") == {}


@db
def test_late_minutes_reach_their_compacted_hour_and_day(rng, writer, two_hours):
    # given hours and the day compacted already
    compaction.compact_rollups(DAY + dt.timedelta(days=1, minutes=30))

    # when late spans of 10:xx are folded, then compaction runs again
    store(writer, two_hours, requests(rng, 50, T0, 600))
    fold_all(DAY + dt.timedelta(days=1, hours=1))
    result = compaction.compact_rollups(DAY + dt.timedelta(days=1, hours=1))

    # then only the hour they changed, and its day, are recomputed, and both are exact again
    assert (result.hours, result.days, result.from_spans) == (5, 5, 0)
    assert_rollups_match_spans(two_hours, "hour")
    assert_rollups_match_spans(two_hours, "day")


@db
def test_spans_later_than_minute_retention_reach_their_hour(rng, writer, two_hours, settings):
    # given yesterday's minutes compacted and then deleted by retention
    settings.ROLLUP_MINUTE_DAYS = 1
    compaction.compact_rollups(DAY + dt.timedelta(days=1, minutes=30))
    compaction.compact_rollups(DAY + dt.timedelta(days=2))
    assert rollups(two_hours, "minute") == {}

    # when spans of 10:xx arrive later still, are folded, and compaction runs
    store(writer, two_hours, requests(rng, 30, T0, 600))
    fold_all(DAY + dt.timedelta(days=2, hours=1))
    result = compaction.compact_rollups(DAY + dt.timedelta(days=2, hours=1))

    # then their hour is recomputed from the raw spans, the day from the hours, stray minutes
    # expire, and every row is exact
    assert (result.from_spans, result.days) == (5, 5)
    assert rollups(two_hours, "minute") == {}
    assert_rollups_match_spans(two_hours, "hour")
    assert_rollups_match_spans(two_hours, "day")


@db
def test_retention_deletes_each_resolution_after_its_days(two_hours, settings):
    settings.ROLLUP_MINUTE_DAYS, settings.ROLLUP_HOUR_DAYS, settings.ROLLUP_DAY_DAYS = 2, 5, 9
    expected_rows = [
        (dt.timedelta(days=1, minutes=30), {"minute", "hour", "day"}),
        (dt.timedelta(days=2, hours=11), {"minute", "hour", "day"}),  # 11:xx minutes remain
        (dt.timedelta(days=2, hours=13), {"hour", "day"}),
        (dt.timedelta(days=5, hours=23), {"hour", "day"}),
        (dt.timedelta(days=6), {"day"}),
        (dt.timedelta(days=9, hours=23), {"day"}),
        (dt.timedelta(days=10), set()),
    ]
    for after, resolutions in expected_rows:
        compaction.compact_rollups(DAY + after)
        kept = set(Rollup.objects.filter(team=two_hours).values_list("resolution", flat=True))
        assert kept == resolutions, after


# ----- rebuild ---------------------------------------------------------------------------------


@db
def test_rebuild_replaces_corrupted_rows_with_counts_from_raw_spans(rng, writer, two_hours):
    # given compacted rollups and SLA counters, then damaged rows
    pipeline = Pipeline.objects.get(team=two_hours, service_name="recommender")
    objective = Objective.objects.create(
        team=two_hours, pipeline=pipeline, name="e2e", threshold_ms=12.0, target_percent=99
    )
    store(writer, two_hours, requests(rng, 50, T0, 7200))
    fold_all(T0 + 3 * HOUR)
    now = DAY + dt.timedelta(days=1, minutes=30)
    compaction.compact_rollups(now)
    Rollup.objects.filter(team=two_hours, resolution="minute").filter(
        pk__in=Rollup.objects.filter(team=two_hours, resolution="minute").values("pk")[:3]
    ).update(count=0, error_count=0, sketch=Sketch().to_bytes())
    Rollup.objects.filter(team=two_hours, resolution="hour").update(count=0)
    SlaMinute.objects.filter(objective=objective).update(good=0, total=0)

    # when the range is rebuilt
    result = rebuild.rebuild_rollups(two_hours, T0, T0 + 2 * HOUR, now=now)

    # then every resolution and the SLA counters match the raw spans again
    assert (result.start, result.end, result.spans) == (T0, T0 + 2 * HOUR, 1800)
    assert_rollups_match_spans(two_hours, "minute")
    assert_rollups_match_spans(two_hours, "hour")
    assert_rollups_match_spans(two_hours, "day")
    assert sla_counts(objective) == raw_sla_counts(objective)


@db
def test_rebuild_leaves_pending_batches_to_the_fold(rng, writer, two_hours):
    # given a batch stored but not folded yet
    store(writer, two_hours, requests(rng, 20, T0, 600))
    now = DAY + dt.timedelta(days=1, minutes=30)

    # when the range is rebuilt, then the batch folded
    rebuild.rebuild_rollups(two_hours, T0, T0 + 2 * HOUR, now=now)
    fold_all(now)

    # then its spans count once
    assert_rollups_match_spans(two_hours, "minute")


@db
def test_rebuild_refuses_a_range_whose_spans_expired(settings):
    settings.RETENTION_DAYS = 1
    team = make_team()

    with pytest.raises(ValueError, match="RETENTION_DAYS"):
        rebuild.rebuild_rollups(team, T0 - dt.timedelta(days=1), T0, now=T0 + HOUR)


@db
def test_rebuild_rollups_command(two_hours, capsys):
    Rollup.objects.filter(team=two_hours, resolution="minute").update(count=0)

    call_command(
        "rebuild_rollups",
        "--team",
        two_hours.slug,
        "--start",
        T0.replace(tzinfo=None).isoformat(),
        "--end",
        (T0 + 2 * HOUR).isoformat(),
    )

    assert capsys.readouterr().out.startswith(
        f"rebuilt {T0.isoformat()} to {(T0 + 2 * HOUR).isoformat()}: 1,600 spans"
    )
    assert_rollups_match_spans(two_hours, "minute")

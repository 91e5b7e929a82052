"""Tiered retention on real PostgreSQL: thinning a folded day of demo traffic to its error
traces, its slow traces and a sample, with every derived figure unchanged."""

from __future__ import annotations

import datetime as dt
import io
import pickle
import threading
import uuid
from decimal import Decimal
from typing import cast

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection

from latencyboard.compare.queries import Side, compare
from latencyboard.db import conninfo
from latencyboard.demo.backfill import backfill_demo
from latencyboard.pipelines.models import Pipeline
from latencyboard.retention import sampling, services
from latencyboard.retention.models import ThinnedDay
from latencyboard.retention.queries import SampledPeriod, sampled_periods
from latencyboard.rollups import compaction, rebuild, stage_share_services
from latencyboard.rollups import services as rollup_services
from latencyboard.rollups.models import CohortRollup, Rollup, StageShare
from latencyboard.rollups.queries import percentile_series
from latencyboard.sketches.sketch import Sketch
from latencyboard.sla import queries as sla_queries
from latencyboard.sla import services as sla_services
from latencyboard.sla.models import Objective, SlaMinute
from latencyboard.spans import services as span_services
from latencyboard.spans.models import Span
from latencyboard.storage import span_events, thinning
from latencyboard.storage.partitions import DayPartition
from latencyboard.teams.models import Role, Team
from tests.factories import make_team, make_user
from tests.snapshots import Seeds

pytestmark = pytest.mark.django_db(transaction=True)

DAY = dt.date(2026, 3, 10)
START = dt.datetime(2026, 3, 10, 10, tzinfo=dt.UTC)
END = START + dt.timedelta(hours=2)
FOLDED = dt.datetime(2026, 3, 11, 1, 10, tzinfo=dt.UTC)  # shares are written past 01:00
THIN_AT = dt.datetime(2026, 3, 13, 0, 30, tzinfo=dt.UTC)  # two days after the day ended
PERCENT = 5


def backfill_day(team: Team) -> None:
    backfill_demo(team, days=1, start=START, end=END, now=START, requests_per_s=0.4, seed=7)


def fold_everything() -> None:
    rollup_services.fold_until_idle(lambda: FOLDED, seconds=120)
    compaction.compact_rollups(FOLDED)
    stage_share_services.compute_stage_shares(FOLDED, seconds=120)


@pytest.fixture
def folded_day(settings, seeds: Seeds) -> Team:
    """Two hours of demo traffic on DAY, folded, compacted and split into stage shares, with
    an objective counting them (built once in a test process, each test gets its own copy)."""
    settings.RETENTION_DAYS = 4000
    return cast(Team, seeds.get("retention folded day", _folded_day))


def _folded_day() -> Team:
    team = make_team()
    backfill_day(team)
    pipeline = Pipeline.objects.get(team=team, service_name="fraud-scorer")
    admin = cast(User, make_user(team, role=Role.ADMIN))
    sla_services.create_objective(
        team, pipeline, None, "fast", 60, Decimal("99"), "rolling_28d", admin
    )
    fold_everything()
    return team


def _spans_by_trace(team: Team) -> dict[str, set[tuple[int, int]]]:
    traces: dict[str, set[tuple[int, int]]] = {}
    for trace_id, span_id, duration in Span.objects.filter(team=team).values_list(
        "trace_id", "span_id", "duration_ns"
    ):
        traces.setdefault(str(trace_id), set()).add((span_id, duration))
    return traces


def _error_traces(team: Team) -> set[str]:
    failed = Span.objects.filter(team=team, status_code=2)
    return {str(trace_id) for trace_id in failed.values_list("trace_id", flat=True)}


def _slow_traces(team: Team) -> set[str]:
    """Traces with a root span slower than the p99 of its pipeline's end-to-end minute."""
    p99 = {
        (row.pipeline_id, row.bucket_start): Sketch.from_bytes(row.sketch).quantile(0.99)
        for row in Rollup.objects.filter(team=team, resolution="minute", stage=None)
    }
    slow = set()
    for trace_id, pipeline_id, start, duration in Span.objects.filter(
        team=team, is_root=True
    ).values_list("trace_id", "pipeline_id", "start_time", "duration_ns"):
        if duration / 1e6 > p99[(pipeline_id, start.replace(second=0, microsecond=0))]:
            slow.add(str(trace_id))
    return slow


def _partition_bytes() -> int:
    """The day's partition on disk: heap, indexes and TOAST."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size(%s::regclass)", [DayPartition(DAY).name])
        return int(cursor.fetchone()[0])


def _derived(team: Team) -> bytes:
    """Every figure a user reads from the day: percentiles, SLA attainment, compare, and the
    rows behind them, pickled (the figures hold numpy arrays, NaN where a bucket is empty)."""
    user = cast(User, make_user(team))
    pipeline = Pipeline.objects.get(team=team, service_name="fraud-scorer")
    objective = Objective.objects.get(team=team)
    day_start = dt.datetime.combine(DAY, dt.time(), tzinfo=dt.UTC)
    return pickle.dumps(
        {
            "percentiles": percentile_series(
                user,
                pipeline.pk,
                None,
                day_start,
                day_start + dt.timedelta(days=1),
                dt.timedelta(hours=1),
            ),
            "attainment": sla_queries.attainment(
                objective, START, END, dt.timedelta(minutes=10), THIN_AT
            ),
            "compare": compare(
                user,
                pipeline.pk,
                Side(START, START + dt.timedelta(hours=1)),
                Side(START + dt.timedelta(hours=1), END),
            ),
            "rollups": sorted(Rollup.objects.filter(team=team).values_list()),
            "cohorts": sorted(CohortRollup.objects.filter(team=team).values_list()),
            "sla": sorted(SlaMinute.objects.values_list()),
            "shares": sorted(StageShare.objects.filter(team=team).values_list()),
        }
    )


def test_thinning_keeps_every_error_and_slow_trace_whole_and_a_sample_of_the_rest(folded_day):
    # given a folded day of demo traffic
    team = folded_day
    before = _spans_by_trace(team)
    errors, slow = _error_traces(team), _slow_traces(team)
    derived = _derived(team)
    assert errors
    assert slow

    # when the day is thinned two days after it ended
    result = services.thin_day(DAY, THIN_AT, PERCENT)

    # then every error trace and every slow trace is still there, with all its spans
    after = _spans_by_trace(team)
    assert result is not None
    for trace_id in errors | slow:
        assert after[trace_id] == before[trace_id]
    # and every kept trace is whole, and the rest are the ones the sample picks
    for trace_id, spans in after.items():
        assert spans == before[trace_id]
    rest = set(before) - errors - slow
    kept_rest = set(after) - errors - slow
    share = len(kept_rest) / len(rest)
    assert 0.035 < share < 0.065
    assert result.selection.errors == len(errors)
    assert result.selection.errors + result.selection.slow == len(errors | slow)
    assert result.selection.sampled == len(kept_rest)
    assert result.spans_after == sum(len(spans) for spans in after.values())
    # and percentiles, SLA attainment, compare and the rows behind them are identical
    assert _derived(team) == derived
    assert ThinnedDay.objects.get(day=DAY).sample_percent == PERCENT
    # and the kept spans take no more room than freshly built: rebuilding frees nothing
    thinned_bytes = _partition_bytes()
    with connection.cursor() as cursor:
        cursor.execute(f"REINDEX TABLE {DayPartition(DAY).name}")
    assert _partition_bytes() == thinned_bytes


def _give_roots_events(team: Team) -> None:
    roots = Span.objects.filter(team=team, is_root=True).values_list(
        "trace_id", "span_id", "start_time"
    )
    rows = [
        span_events.EventRow(
            trace_id.bytes,
            span_id.to_bytes(8, "big", signed=True),
            int(start.timestamp()) * 10**9 + start.microsecond * 1000,
            0,
            [(int(start.timestamp()) * 10**9, "exception", {"exception.type": "E"}, 0)],
        )
        for trace_id, span_id, start in roots
    ]
    with psycopg.connect(conninfo()) as conn, conn.cursor() as cursor:
        span_events.insert(cursor, team.id, rows)


def _traces_with_events(team: Team) -> set[str]:
    stored = Span.objects.filter(team=team).values_list("trace_id", flat=True)
    traces = {str(trace_id) for trace_id in stored}
    return {
        trace_id for trace_id in traces if span_events.trace_events([team.id], uuid.UUID(trace_id))
    }


def test_thinning_keeps_the_events_of_the_kept_traces_only(folded_day):
    # given a folded day whose every root span has an event
    team = folded_day
    _give_roots_events(team)
    assert len(_traces_with_events(team)) == len(_spans_by_trace(team))

    # when the day is thinned
    services.thin_day(DAY, THIN_AT, PERCENT)

    # then exactly the kept traces keep their events
    assert _traces_with_events(team) == set(_spans_by_trace(team))


def test_dropping_an_expired_day_drops_its_events_too():
    # given a day past retention, with its span and event partitions
    old = DayPartition(dt.date(2000, 1, 1))
    with connection.cursor() as cursor:
        cursor.execute(old.create_sql())
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [old.events_name])
        assert cursor.fetchone()[0]

    # when retention drops it
    span_services.drop_expired_partitions(dt.datetime(2000, 1, 3, tzinfo=dt.UTC), retention_days=1)

    # then both partitions are gone
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s), to_regclass(%s)", [old.name, old.events_name])
        assert cursor.fetchone() == (None, None)


def test_thinning_twice_changes_nothing_the_second_time(folded_day):
    # given a thinned day
    team = folded_day
    services.thin_day(DAY, THIN_AT, PERCENT)
    thinned = _spans_by_trace(team)

    # when it is thinned again, by the task's sweep and by the command
    swept = services.thin_due(THIN_AT)
    out = io.StringIO()
    call_command("thin_spans", "--day", DAY.isoformat(), stdout=out)

    # then nothing more is dropped and one row records the day
    # (other days, of other tests in this process, may be due: they have no span)
    assert DAY not in {result.day for result in swept}
    assert all(result.spans_before == result.spans_after == 0 for result in swept)
    assert out.getvalue() == f"{DAY} is thinned already\n"
    assert _spans_by_trace(team) == thinned
    assert ThinnedDay.objects.filter(day=DAY).count() == 1


def test_dropping_an_expired_day_waits_for_a_thinning_in_progress():
    # given a day past retention, and a thinner at work: it holds its lock until it commits
    old = DayPartition(dt.date(2000, 1, 1))
    with connection.cursor() as cursor:
        cursor.execute(old.create_sql())
    dropped: list[list[str]] = []

    def drop() -> None:
        try:
            now = dt.datetime(2000, 1, 3, tzinfo=dt.UTC)
            dropped.append(span_services.drop_expired_partitions(now, retention_days=1))
        finally:
            connection.close()

    with psycopg.connect(conninfo()) as thinner:
        thinning.lock(thinner.cursor())

        # when retention drops expired days meanwhile
        dropping = threading.Thread(target=drop)
        dropping.start()
        dropping.join(1.0)

        # then the drop waits for the thinner's commit, and the day is still there
        assert dropping.is_alive()
        assert old.name in span_services.existing_partitions()
        thinner.commit()
    dropping.join(30.0)
    assert dropped == [[old.name]]
    assert old.name not in span_services.existing_partitions()


def test_a_day_with_unfolded_spans_is_not_thinned(settings):
    # given a day of traffic no fold has read
    settings.RETENTION_DAYS = 4000
    team = make_team()
    backfill_day(team)
    spans = Span.objects.filter(team=team).count()

    # when the command is asked to thin it, then it refuses and every span stays
    with pytest.raises(CommandError, match="not folded yet"):
        call_command("thin_spans", "--day", DAY.isoformat())
    assert Span.objects.filter(team=team).count() == spans
    assert not ThinnedDay.objects.exists()


def test_a_day_within_the_hot_period_is_not_thinned(folded_day):
    # given a folded day that ended an hour ago
    spans = Span.objects.filter(team=folded_day).count()

    # when it is thinned, then it is refused and every span stays
    with pytest.raises(services.NotThinnable, match="hot period"):
        services.thin_day(DAY, FOLDED, PERCENT)
    assert Span.objects.filter(team=folded_day).count() == spans


def test_a_hot_period_as_long_as_retention_thins_nothing(folded_day, settings):
    # given a folded day past the hot period, and a retention as short as the hot period
    settings.RETENTION_DAYS = settings.SPAN_HOT_DAYS
    spans = Span.objects.filter(team=folded_day).count()

    # when the task's sweep runs, then no day is thinned
    assert services.thin_due(THIN_AT) == []
    assert Span.objects.filter(team=folded_day).count() == spans
    assert not ThinnedDay.objects.exists()


def test_rebuild_refuses_a_thinned_day(folded_day):
    # given a thinned day
    services.thin_day(DAY, THIN_AT, PERCENT)
    rollups = sorted(Rollup.objects.filter(team=folded_day).values_list())

    # when its rollups are rebuilt, then it refuses and they stay as folded
    with pytest.raises(ValueError, match="thinned"):
        rebuild.rebuild_rollups(folded_day, START, END, now=THIN_AT)
    assert sorted(Rollup.objects.filter(team=folded_day).values_list()) == rollups


def test_a_new_objective_counts_no_thinned_day(folded_day):
    # given a thinned day
    services.thin_day(DAY, THIN_AT, PERCENT)
    pipeline = Pipeline.objects.get(team=folded_day, service_name="fraud-scorer")
    admin = cast(User, make_user(folded_day, role=Role.ADMIN))

    # when an objective is created afterwards
    objective = sla_services.create_objective(
        folded_day, pipeline, None, "new", 60, Decimal("99"), "rolling_28d", admin
    )

    # then it has no counters from the sample of that day
    assert not SlaMinute.objects.filter(objective=objective).exists()


def test_sampling_is_by_trace_id_alone_and_nested_by_percent():
    # given ids, sequential ones included
    ids = b"".join(i.to_bytes(16, "big") for i in range(20_000))

    # when they are sampled at 5% and 10%
    five, ten = sampling.sampled(ids, 5), sampling.sampled(ids, 10)

    # then the same ids give the same answer, 10% keeps every 5% id, and shares are near
    assert (sampling.sampled(ids, 5) == five).all()
    assert (ten | ~five).all()
    assert 0.045 < five.mean() < 0.055
    assert 0.095 < ten.mean() < 0.105
    assert not sampling.sampled(ids, 0).any()
    assert sampling.sampled(ids, 100).all()


def test_due_days_are_past_the_hot_period_and_not_thinned():
    # given days around now, one of them thinned
    now = dt.datetime(2026, 3, 13, 0, 30, tzinfo=dt.UTC)
    days = [dt.date(2026, 3, d) for d in (8, 9, 10, 11, 12, 13)]

    # when the due days are chosen with a two-day hot period
    due = sampling.due_days(days, [dt.date(2026, 3, 9)], now, 2)

    # then they are those that ended two days ago or more, not thinned yet
    assert due == [dt.date(2026, 3, 8), dt.date(2026, 3, 10)]


def test_trace_search_over_a_sampled_day_says_so(folded_day, client):
    # given a thinned day and a member of the team
    services.thin_day(DAY, THIN_AT, PERCENT)
    pipeline = Pipeline.objects.get(team=folded_day, service_name="fraud-scorer")
    client.force_login(make_user(folded_day))

    # when they search its traces, and those of a day not thinned
    sampled = client.get(
        "/traces/",
        {"pipeline": pipeline.pk, "start": "2026-03-10T10:00:00", "end": "2026-03-10T11:00:00"},
    )
    whole = client.get(
        "/traces/",
        {"pipeline": pipeline.pk, "start": "2026-03-11T10:00:00", "end": "2026-03-11T11:00:00"},
    )

    # then only the search over the thinned day says it is sampled, and at what rate
    assert sampled.status_code == whole.status_code == 200
    assert "Raw spans of 2026-03-10 are sampled at 5%" in sampled.text
    assert "A search over it finds only the kept traces." in sampled.text
    assert 'id="sampled-note"' not in whole.text


def test_pipeline_page_names_the_sampled_days_and_rate(folded_day, client):
    # given a thinned day
    services.thin_day(DAY, THIN_AT, PERCENT)
    pipeline = Pipeline.objects.get(team=folded_day, service_name="fraud-scorer")
    client.force_login(make_user(folded_day))

    # when a member opens the pipeline page
    page = client.get(f"/pipelines/{pipeline.pk}/")

    # then it says which days are sampled, at what rate, and that figures count every span
    assert page.status_code == 200
    assert "Raw spans of 2026-03-10 are sampled at 5%" in page.text
    assert "still count every span" in page.text


def test_sampled_periods_join_consecutive_days_of_one_rate():
    # given days thinned at 5% on the 10th and 11th, and at 2% on the 12th
    for day, percent in ((10, 5), (11, 5), (12, 2)):
        ThinnedDay.objects.create(
            day=dt.date(2026, 3, day),
            thinned_at=THIN_AT,
            sample_percent=percent,
            spans_before=0,
            spans_after=0,
            traces_before=0,
            error_traces=0,
            slow_traces=0,
            sampled_traces=0,
        )

    # when the sampled periods of windows are read
    everything = sampled_periods()
    to_midnight = sampled_periods(
        dt.datetime(2026, 3, 9, tzinfo=dt.UTC), dt.datetime(2026, 3, 11, tzinfo=dt.UTC)
    )

    # then consecutive days of a rate are one period, and a window's end is exclusive
    assert everything == [
        SampledPeriod(dt.date(2026, 3, 10), dt.date(2026, 3, 11), 5),
        SampledPeriod(dt.date(2026, 3, 12), dt.date(2026, 3, 12), 2),
    ]
    assert to_midnight == [SampledPeriod(dt.date(2026, 3, 10), dt.date(2026, 3, 10), 5)]

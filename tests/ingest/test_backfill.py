"""Demo backfill: hours of sampled traffic COPYed into the span table with their batch rows."""

from __future__ import annotations

import datetime as dt
import io
import re
from collections import Counter

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models.functions import TruncHour

from latencyboard.demo import synthetic
from latencyboard.demo.backfill import BackfillProgress, backfill_demo
from latencyboard.demo.profiles import FRAUD_SCORER, PIPELINES, STAGE_NAMES
from latencyboard.pipelines.models import Pipeline
from latencyboard.spans.models import IngestBatch, Span
from latencyboard.teams.models import Team
from tests.factories import make_team

pytestmark = pytest.mark.django_db(transaction=True)

END = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)
NOW = END + dt.timedelta(minutes=5)
SCALE = 0.001  # about 36,000 spans over two days


def _backfill(team: Team, seed: int = 1) -> BackfillProgress:
    return backfill_demo(team, days=2, end=END, now=NOW, scale=SCALE, seed=seed)


def _stage_counts(team: Team) -> Counter[tuple[str, str]]:
    rows = Span.objects.filter(team=team).values_list("pipeline__service_name", "stage__name")
    return Counter(rows)


def test_span_count_is_what_the_batch_rows_say():
    # given a team
    team = make_team()

    # when two days are backfilled
    result = _backfill(team)

    # then every hour is one batch of protocol "backfill" awaiting rollup, and their
    # stored_spans add up to the spans in the table
    batches = IngestBatch.objects.filter(team=team)
    assert batches.count() == 48
    assert set(batches.values_list("protocol", "received_at", "duplicate_spans")) == {
        ("backfill", NOW, 0)
    }
    assert batches.filter(rolled_up_at=None).count() == 48
    stored = sum(batches.values_list("stored_spans", flat=True))
    assert Span.objects.filter(team=team).count() == stored == result.spans
    assert set(Span.objects.filter(team=team).values_list("batch_id", flat=True)) == set(
        batches.values_list("id", flat=True)
    )


def test_every_trace_has_one_root_containing_its_children():
    team = make_team()

    _backfill(team)

    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH traces AS (
                SELECT trace_id,
                       count(*) FILTER (WHERE is_root) AS roots,
                       max(span_id) FILTER (WHERE is_root) AS root_id,
                       max(start_time) FILTER (WHERE is_root) AS root_start,
                       max(duration_ns) FILTER (WHERE is_root) AS root_ns
                FROM spans_span WHERE team_id = %(team)s GROUP BY trace_id
            )
            SELECT t.trace_id FROM traces t
            JOIN spans_span c ON c.team_id = %(team)s AND c.trace_id = t.trace_id
                             AND NOT c.is_root
            GROUP BY t.trace_id, t.roots, t.root_id, t.root_start, t.root_ns
            HAVING t.roots <> 1
                OR bool_or(c.parent_span_id IS DISTINCT FROM t.root_id)
                OR bool_or(c.start_time < t.root_start)
                OR bool_or(c.start_time + c.duration_ns / 1000 * interval '1 microsecond'
                           > t.root_start + t.root_ns / 1000 * interval '1 microsecond')
                OR sum(c.duration_ns) > t.root_ns
            """,
            {"team": team.pk},
        )
        violations = cursor.fetchall()
        cursor.execute(
            "SELECT count(DISTINCT trace_id), count(*) FILTER (WHERE is_root),"
            " count(*) FILTER (WHERE is_root AND parent_span_id IS NULL)"
            " FROM spans_span WHERE team_id = %s",
            [team.pk],
        )
        traces, roots, roots_without_parent = cursor.fetchone()

    assert violations == []
    assert traces == roots == roots_without_parent
    assert traces > 4000


def test_spans_are_the_demo_pipelines_six_stages_under_their_root_span():
    team = make_team()

    _backfill(team)

    pipelines = Pipeline.objects.filter(team=team)
    assert sorted(pipelines.values_list("service_name", "environment")) == sorted(
        (profile.name, "production") for profile in PIPELINES
    )
    for profile in PIPELINES:
        # live ingest names a span without inference.stage after itself: so does the backfill
        assert set(
            pipelines.get(service_name=profile.name).stages.values_list("name", flat=True)
        ) == {
            *STAGE_NAMES,
            profile.root_name,
        }
    children = Span.objects.filter(team=team, is_root=False)
    assert set(children.values_list("stage__name", flat=True)) == set(STAGE_NAMES)
    assert set(children.values_list("kind", flat=True)) == {synthetic.SPAN_KIND_INTERNAL}
    roots = Span.objects.filter(team=team, is_root=True)
    assert set(roots.values_list("kind", flat=True)) == {synthetic.SPAN_KIND_SERVER}


def test_attributes_are_those_of_the_live_demo():
    team = make_team()

    _backfill(team)

    spans = Span.objects.filter(team=team, pipeline__service_name=FRAUD_SCORER.name)
    root = spans.filter(is_root=True, status_code=synthetic.STATUS_UNSET).first()
    assert root is not None
    assert root.name == "POST /v1/score"
    assert root.attributes == {
        "service.version": "3.4.1",
        "http.request.method": "POST",
        "http.route": "/v1/score",
        "http.response.status_code": 200,
        "model.version": root.attributes["model.version"],
    }
    assert root.attributes["model.version"] in {"v7", "v8"}
    hydration = spans.filter(stage__name="feature_hydration").values_list("attributes", flat=True)
    assert {attributes["cache_hit"] for attributes in hydration} == {True, False}
    failed = spans.filter(status_code=synthetic.STATUS_ERROR, is_root=False).first()
    assert failed is not None
    assert failed.status_message == failed.attributes["error.type"] != ""


def test_spans_cover_every_hour_asked_for_with_more_traffic_at_the_daily_peak():
    team = make_team()

    _backfill(team)

    roots = Span.objects.filter(team=team, is_root=True)
    hours = set(roots.annotate(hour=TruncHour("start_time")).values_list("hour", flat=True))
    assert hours == {END - dt.timedelta(hours=h) for h in range(1, 49)}
    # fraud-scorer peaks at 15:00 UTC (1.6x its mean rate) and bottoms out at 03:00 (0.4x)
    fraud_roots = roots.filter(pipeline__service_name=FRAUD_SCORER.name)
    peak = fraud_roots.filter(start_time__hour=15).count()
    trough = fraud_roots.filter(start_time__hour=3).count()
    assert peak > 2 * trough > 0


def test_spans_number_what_the_scale_promises():
    team = make_team()

    result = _backfill(team)

    expected = synthetic.expected_spans(PIPELINES, days=2, scale=SCALE)
    assert result.spans == pytest.approx(expected, rel=0.05)


def test_outsider_team_gets_nothing():
    team, outsider = make_team(), make_team("outsider")

    _backfill(team)

    assert Span.objects.filter(team=outsider).count() == 0
    assert IngestBatch.objects.filter(team=outsider).count() == 0
    assert Pipeline.objects.filter(team=outsider).count() == 0


def test_same_seed_same_traffic_but_fresh_ids():
    first, second = make_team(), make_team()

    _backfill(first, seed=7)
    _backfill(second, seed=7)

    assert _stage_counts(first) == _stage_counts(second)
    assert sum(_stage_counts(first).values()) > 0
    durations = Span.objects.filter(is_root=True).order_by("start_time", "duration_ns")
    assert list(durations.filter(team=first).values_list("start_time", "duration_ns")) == list(
        durations.filter(team=second).values_list("start_time", "duration_ns")
    )
    first_ids = set(Span.objects.filter(team=first).values_list("trace_id", flat=True))
    assert first_ids.isdisjoint(Span.objects.filter(team=second).values_list("trace_id", flat=True))


def test_command_reports_progress_and_warns_about_retention(settings):
    # given a retention of one day
    settings.RETENTION_DAYS = 1
    team = make_team()
    out, err = io.StringIO(), io.StringIO()

    # when two days ending now are backfilled
    call_command(
        "backfill_demo",
        "--team",
        team.slug,
        "--days",
        "2",
        "--scale",
        str(SCALE),
        "--seed",
        "3",
        stdout=out,
        stderr=err,
    )

    # then it warns that the older day will be dropped, and reports each day and the total
    stored = Span.objects.filter(team=team).count()
    lines = out.getvalue().splitlines()
    assert "dropped by the hourly retention task" in err.getvalue()
    assert len(lines) == 4
    assert lines[0].startswith("backfilling 2 days up to ")
    assert re.fullmatch(r"  through [-\d]+ [:\d]+: [,\d]+ spans, [,\d]+ spans/s", lines[1])
    assert re.fullmatch(rf"  through [-\d]+ [:\d]+: {stored:,} spans, [,\d]+ spans/s", lines[2])
    assert re.fullmatch(
        rf"done: {stored:,} spans in 48 batches, [.\d]+ s, [,\d]+ spans/s", lines[3]
    )

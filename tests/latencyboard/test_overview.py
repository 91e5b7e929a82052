"""The overview at a glance: window choice, the 24-hour p99 sparkline, the bottleneck class,
one read per concept whatever the number of pipelines, and scoping.

Rollups are written as the workers leave them: minute rows, and hour rows for the hours
compaction has reached (their minute rows stay until retention), so every hour must be
counted once.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from latencyboard.dashboards.bottleneck import Bottleneck
from latencyboard.dashboards.overview_queries import WINDOWS, overview
from latencyboard.dashboards.templatetags.dashboards import sparkline
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import Resolution, Rollup, StageShare
from latencyboard.sketches.sketch import Sketch
from latencyboard.sla.models import Objective, SlaMinute
from latencyboard.windows import floor_to
from tests.factories import make_stage_share, make_team, make_user

NOW = dt.datetime(2026, 3, 3, 11, 30, 30, tzinfo=dt.UTC)
END = dt.datetime(2026, 3, 3, 11, 30, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
DAY_START = END.replace(minute=0) - 24 * HOUR  # 2026-03-02 11:00, the 24 h window's start


def rollup(pipeline: Pipeline, resolution: str, start: dt.datetime, values) -> Rollup:
    values = np.asarray(values, dtype=float)
    return Rollup(
        team=pipeline.team,
        pipeline=pipeline,
        stage=None,
        resolution=resolution,
        bucket_start=start,
        count=len(values),
        error_count=0,
        sum_ms=float(values.sum()),
        min_ms=float(values.min()),
        max_ms=float(values.max()),
        sketch=Sketch.from_values(values).to_bytes(),
    )


def hour_ms(hour: int) -> float:
    """fraud-scorer's latency in the compacted hour ``hour`` after DAY_START."""
    return 10.0 * (hour + 1)


def seed_rollups(pipeline: Pipeline, end: dt.datetime = END) -> None:
    """As of END (11:30): compacted hours from DAY_START to 09:00 (10 requests each), 10:00
    not compacted yet (60 minutes at 500 ms), 11:00 in progress (a minute row at 700 ms for
    each minute so far); 09:00's minute rows still there (9999 ms: counted twice if read with
    their hour); one hour six days ago. The same shape before any other ``end``."""
    ten, eleven = end.replace(minute=0) - HOUR, end.replace(minute=0)
    rows = [
        rollup(pipeline, Resolution.HOUR, eleven - (24 - h) * HOUR, np.full(10, hour_ms(h)))
        for h in range(23)
    ]
    rows += [rollup(pipeline, Resolution.MINUTE, ten + m * MINUTE, [500.0]) for m in range(60)]
    rows += [
        rollup(pipeline, Resolution.MINUTE, eleven + m * MINUTE, [700.0]) for m in range(end.minute)
    ]
    rows += [
        rollup(pipeline, Resolution.MINUTE, ten - HOUR + m * MINUTE, [9999.0]) for m in range(60)
    ]
    rows.append(rollup(pipeline, Resolution.HOUR, eleven - 6 * 24 * HOUR, np.full(100, 3000.0)))
    Rollup.objects.bulk_create(rows)


def seed_shares(
    pipeline: Pipeline, end: dt.datetime, minutes: bool = True, **self_ms: tuple[float, float]
) -> None:
    """The same sums in a minute row 10 minutes before ``end`` (only if ``minutes``) and in
    the row of the hour that holds that minute, as the workers write them."""
    minute = end - 10 * MINUTE
    rows = [(Resolution.HOUR, floor_to(minute, HOUR))]
    if minutes:
        rows.append((Resolution.MINUTE, minute))
    for resolution, start in rows:
        StageShare.objects.bulk_create(
            make_stage_share(
                Stage.objects.get_or_create(pipeline=pipeline, name=name)[0],
                resolution,
                start,
                1000,
                own,
                tail_own,
            )
            for name, (own, tail_own) in self_ms.items()
        )


def seed(end: dt.datetime) -> dict:
    """Our fraud-scorer with rollups, stage shares and an objective up to ``end``, our
    recommender without traffic, and another team's pipeline."""
    ours, theirs = make_team("ours"), make_team("theirs")
    fraud = Pipeline.objects.create(team=ours, service_name="fraud-scorer", environment="prod")
    recs = Pipeline.objects.create(team=ours, service_name="recommender", environment="prod")
    secret = Pipeline.objects.create(team=theirs, service_name="their-secret-service")
    seed_rollups(fraud, end)
    Rollup.objects.bulk_create([rollup(secret, Resolution.MINUTE, end - MINUTE, [1.0])])
    seed_shares(fraud, end, model_forward=(5800.0, 71.0), feature_hydration=(4200.0, 29.0))
    # Compute-bound 7 hours earlier too: a class held in two buckets of the week's history.
    seed_shares(
        fraud, end - 7 * HOUR, False, model_forward=(5800.0, 71.0), feature_hydration=(4200.0, 29.0)
    )
    # Feature-bound a day and a half earlier, in two buckets of the week's history: inside the
    # 7-day window only.
    for before in (end - 36 * HOUR, end - 42 * HOUR):
        seed_shares(fraud, before, False, model_forward=(10.0, 1.0), feature_hydration=(90.0, 9.0))
    seed_shares(secret, end, queue_wait=(100.0, 100.0))
    objective = Objective.objects.create(
        team=ours,
        pipeline=fraud,
        name="99% under 600 ms",
        threshold_ms=600.0,
        target_percent=Decimal("99"),
    )
    SlaMinute.objects.bulk_create(
        [
            SlaMinute(objective=objective, minute=end - MINUTE, good=9, total=10),
            SlaMinute(objective=objective, minute=end - 3 * HOUR, good=90, total=90),
        ]
    )
    return {
        "fraud": fraud,
        "recs": recs,
        "secret": secret,
        "member": make_user(ours),
        "outsider": make_user(theirs),
    }


@pytest.fixture
def seeded() -> dict:
    """As of NOW: queries take the clock as an argument."""
    return seed(END)


@pytest.fixture
def seeded_now() -> dict:
    """As of the real clock, for pages; ``end`` is the minute the seed ends at."""
    end = timezone.now().replace(second=0, microsecond=0)
    return {**seed(end), "end": end}


def values_of(window: str) -> np.ndarray:
    """fraud-scorer's requests in the window, each counted once."""
    compacted = [np.full(10, hour_ms(h)) for h in range(23)]
    recent = [np.full(60, 500.0), np.full(30, 700.0)]
    return {
        "1h": np.concatenate([np.full(30, 500.0), np.full(30, 700.0)]),
        "24h": np.concatenate(compacted + recent),
        "7d": np.concatenate([*compacted, *recent, np.full(100, 3000.0)]),
    }[window]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("window", "start", "minutes"),
    [
        pytest.param("1h", END - HOUR, 60, id="1h-the-last-60-minutes"),
        pytest.param("24h", DAY_START, 24 * 60 + 30, id="24h-from-the-hour-a-day-ago"),
        pytest.param("7d", DAY_START - 6 * 24 * HOUR, 7 * 24 * 60 + 30, id="7d"),
    ],
)
def test_window_choice_changes_the_figures(seeded, window, start, minutes):
    result = overview(seeded["member"], NOW, WINDOWS[window])

    row = next(r for r in result.pipelines if r.pipeline == seeded["fraud"])
    values = values_of(window)
    expected = Sketch.from_values(values)
    assert (result.start, result.end) == (start, END)
    assert row.requests == len(values)
    assert row.requests_per_minute == len(values) / minutes
    assert row.p50_ms == expected.quantile(0.5)
    assert row.p99_ms == expected.quantile(0.99)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("window", "attainment"),
    [
        pytest.param("1h", 90.0, id="1h-only-the-last-minute"),
        pytest.param("24h", 99.0, id="24h-both-minutes"),
    ],
)
def test_sla_attainment_is_over_the_window(seeded, window, attainment):
    result = overview(seeded["member"], NOW, WINDOWS[window])

    row = next(r for r in result.pipelines if r.pipeline == seeded["fraud"])
    assert row.objectives[0].in_window.attainment_percent == attainment
    assert row.objectives[0].summary.total == 100  # the objective's own 28 days


@pytest.mark.django_db
def test_sparkline_is_the_p99_of_each_of_the_last_24_hours(seeded):
    result = overview(seeded["member"], NOW, WINDOWS["1h"])

    fraud = next(r for r in result.pipelines if r.pipeline == seeded["fraud"])
    recs = next(r for r in result.pipelines if r.pipeline == seeded["recs"])
    p99 = [Sketch.from_values(np.full(10, hour_ms(h))).quantile(0.99) for h in range(1, 23)]
    assert fraud.sparkline.start == DAY_START + HOUR
    assert fraud.sparkline.p99_ms == (*p99, 500.0, 700.0)
    assert recs.sparkline.p99_ms == (None,) * 24


@pytest.mark.django_db
@pytest.mark.parametrize("end", [END, END.replace(minute=0), END.replace(minute=5)])
def test_bottleneck_class_of_each_pipeline(end):
    seeded = seed(end)

    result = overview(seeded["member"], end + 30 * dt.timedelta(seconds=1), WINDOWS["24h"])

    fraud = next(r for r in result.pipelines if r.pipeline == seeded["fraud"])
    recs = next(r for r in result.pipelines if r.pipeline == seeded["recs"])
    assert fraud.bottleneck.classification.bottleneck == Bottleneck.COMPUTE
    assert fraud.bottleneck.classification.reason == (
        "model_forward is 71% of the slowest 1% (58% of all requests)"
    )
    assert recs.bottleneck.classification.bottleneck == Bottleneck.UNCLASSIFIED


@pytest.mark.django_db
def test_outsider_sees_only_their_own_pipeline(seeded):
    result = overview(seeded["outsider"], NOW, WINDOWS["24h"])

    assert [row.pipeline for row in result.pipelines] == [seeded["secret"]]
    assert result.pipelines[0].bottleneck.classification.requests == 1000


@pytest.mark.django_db
def test_one_read_per_concept_whatever_the_number_of_pipelines(seeded):
    with CaptureQueriesContext(connection) as few:
        overview(seeded["member"], NOW, WINDOWS["24h"])
    for n in range(6):
        more = Pipeline.objects.create(team=seeded["fraud"].team, service_name=f"more-{n}")
        seed_rollups(more)
        Objective.objects.create(
            team=more.team, pipeline=more, name="o", threshold_ms=1.0, target_percent=Decimal("99")
        )

    with CaptureQueriesContext(connection) as many:
        result = overview(seeded["member"], NOW, WINDOWS["24h"])

    assert len(result.pipelines) == 8
    assert len(many) == len(few)
    # teams, pipelines, objectives, rollups, maintenance and counters twice, stage shares (the
    # rows kept, the window's and the history's root buckets and stage sums, stage names)
    assert len(many) <= 10


@pytest.mark.django_db
@pytest.mark.parametrize("window", ["1h", "24h", "7d"])
def test_overview_page_shows_the_window_the_sparkline_and_the_class(client, seeded_now, window):
    client.force_login(seeded_now["member"])

    response = client.get("/", {"window": window})

    body = response.content.decode()
    assert response.status_code == 200
    assert f'<a href="?window={window}" aria-current="true">{window}</a>' in body
    assert body.count('<svg class="sparkline"') == 1  # fraud-scorer; recommender has no data
    assert "no requests in the last 24 hours" in body
    assert '<span class="badge badge-compute">compute-bound</span>' in body
    assert "batch requests on the accelerator" in body
    assert "Too little data: 0 requests, 50 needed, over the last " in body  # recommender
    assert "their-secret-service" not in body
    assert "<script>" not in body
    assert " onclick=" not in body


@pytest.mark.django_db
def test_overview_page_names_the_last_change_of_class(client, seeded_now):
    client.force_login(seeded_now["member"])

    last_day = client.get("/", {"window": "24h"}).content.decode()
    last_week = client.get("/", {"window": "7d"}).content.decode()

    # the 7-day history has 6-hour buckets (from midnight UTC): the change is in the first
    # that holds a compute-bound hour, 7 hours and 10 minutes before the seed's end (the
    # class held in the next too)
    bucket = floor_to(seeded_now["end"] - 7 * HOUR - 10 * MINUTE, 6 * HOUR)
    assert "No change of class over the last 24 hours." in last_day
    assert (
        "Changed from feature-bound to compute-bound at "
        f'<time datetime="{bucket.isoformat()}">{bucket:%b} {bucket.day} {bucket:%H:%M}</time> UTC.'
    ) in last_week


@pytest.mark.django_db
def test_overview_page_rejects_an_unknown_window(client, seeded):
    client.force_login(seeded["member"])

    response = client.get("/", {"window": "5y"})

    assert response.status_code == 400
    assert response.content.decode() == "Unknown window: choose one of 1h, 24h, 7d."


@pytest.mark.django_db
def test_pipeline_page_shows_the_class_of_the_last_day(client, seeded_now):
    client.force_login(seeded_now["member"])

    response = client.get(f"/pipelines/{seeded_now['fraud'].pk}/")

    body = response.content.decode()
    assert "Bottleneck, last 24 h:" in body
    assert '<span class="badge badge-compute">compute-bound</span>' in body


# ----- sparkline drawing (pure) -----------------------------------------------------------------


def test_sparkline_scales_between_lowest_and_highest_and_breaks_at_gaps():
    svg = sparkline([10.0, 20.0, None, 30.0])

    assert 'd="M2.0 26.0 L40.7 14.0 M118.0 2.0"' in svg
    assert '<circle cx="118.0" cy="2.0" r="2"/>' in svg
    assert 'aria-label="p99 hour by hour, last 4 hours: lowest 10.0 ms, highest 30.0 ms, ' in svg
    assert "latest 30.0 ms" in svg


def test_sparkline_of_a_flat_line_sits_at_the_bottom():
    assert 'd="M2.0 26.0 L118.0 26.0"' in sparkline([5.0, 5.0])


def test_sparkline_without_values_says_so():
    assert sparkline([None] * 24) == (
        '<span class="muted small">no requests in the last 24 hours</span>'
    )


def test_a_sparkline_shows_its_latest_value_and_its_scale():
    html = sparkline([None, 120.0, 80.0, 250.0, None, 212.0])

    assert (
        '<span class="spark-figures small" aria-hidden="true"><span class="spark-latest">'
        '212 ms</span><span class="muted">80.0 ms\u2013250 ms</span></span>'
    ) in html

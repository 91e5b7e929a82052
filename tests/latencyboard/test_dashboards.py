"""The overview and the pipeline page: queries on known data, their APIs, and scoping.

Pure parts (deployment markers, impact ranking, figure formatting) are checked without a
database; queries against rows written as the workers write them (rollups, stage shares, SLA
minutes) or spans stored as live ingest stores them (``SpanWriter``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Iterator
from decimal import Decimal

import numpy as np
import pytest
from django.utils import timezone

from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter
from latencyboard.alerts.models import Incident
from latencyboard.dashboards import deployments, queries, ranking
from latencyboard.dashboards.deployments import GAP, Marker, Segment, Sighting
from latencyboard.dashboards.overview_queries import WINDOWS, overview
from latencyboard.dashboards.templatetags.dashboards import ms, percent
from latencyboard.db import conninfo
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import services
from latencyboard.rollups.models import Resolution, Rollup, StageShare
from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.sketches.sketch import Sketch
from latencyboard.sla.models import Objective, SlaMinute
from latencyboard.teams.models import Team
from tests.factories import make_stage_share, make_team, make_user

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
MS = 10**6
_ids = itertools.count(1)


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


# ----- deployment markers (pure) -----------------------------------------------------------------


def sighting(value: str, first: float, last: float, spans: int = 10) -> Sighting:
    return Sighting("model.version", value, at(first), at(last), spans)


def segment(value: str, first: float, last: float, id_: int | None = None) -> Segment:
    return Segment(id_, "model.version", value, at(first), at(last), 0)


def test_sightings_within_the_gap_extend_the_stored_segment():
    # given a stored v7 segment up to minute 10
    stored = {("model.version", "v7"): Segment(1, "model.version", "v7", at(0), at(10), 100)}

    # when v7 is seen again 5 and 9 minutes later
    changed = deployments.extend_segments(
        stored, [sighting("v7", 19, 19.5, 3), sighting("v7", 15, 15.5, 2)]
    )

    # then the same segment reaches the last sighting and counts its spans
    assert changed == [Segment(1, "model.version", "v7", at(0), at(19.5), 105)]


def test_a_sighting_after_the_gap_starts_a_new_segment():
    stored = {("model.version", "v7"): Segment(1, "model.version", "v7", at(0), at(10), 100)}
    late = 10 + GAP / MINUTE + 1

    changed = deployments.extend_segments(
        stored, [sighting("v7", late, late + 1, 4), sighting("v8", 11, 12, 6)]
    )

    assert changed == [
        Segment(None, "model.version", "v7", at(late), at(late + 1), 4),
        Segment(None, "model.version", "v8", at(11), at(12), 6),
    ]


def test_a_gap_inside_one_scan_splits_the_segment():
    changed = deployments.extend_segments(
        {}, [sighting("v7", 0, 1, 1), sighting("v7", 2, 3, 1), sighting("v7", 40, 41, 1)]
    )

    assert changed == [
        Segment(None, "model.version", "v7", at(0), at(3), 2),
        Segment(None, "model.version", "v7", at(40), at(41), 1),
    ]


def test_a_canary_rollout_marks_the_new_version_and_the_old_ones_end():
    # given v7 serving from 0 to 300, v8 from a canary at 100 onward
    segments = [segment("v7", 0, 300), segment("v8", 100, 600)]

    found = deployments.markers(segments, at(0), at(1000))

    assert found == [
        Marker(at(100), "model.version", "v8", "appeared", "v7"),
        Marker(at(300), "model.version", "v7", "gone", None),
    ]


def test_a_rollback_is_a_deployment_of_the_old_version():
    segments = [segment("v7", 0, 300), segment("v8", 100, 500), segment("v7", 480, 900)]

    found = deployments.markers(segments, at(400), at(1000))

    assert found == [
        Marker(at(480), "model.version", "v7", "appeared", "v8"),
        Marker(at(500), "model.version", "v8", "gone", None),
    ]


@pytest.mark.parametrize(
    "segments",
    [
        pytest.param([segment("v7", 0, 100)], id="first-version-is-where-data-starts"),
        pytest.param(
            [segment("v7", 0, 100), segment("v7", 200, 300)], id="same-version-after-a-pause"
        ),
        pytest.param(
            [segment("v7", 0, 300), segment("v8", 100, 300 + GAP / MINUTE)],
            id="traffic-stopping-ends-no-version",
        ),
    ],
)
def test_no_deployment_without_a_change_of_version(segments):
    found = deployments.markers(segments, at(150), at(1000))

    assert found == []


# ----- impact ranking and formatting (pure) -------------------------------------------------------


@pytest.mark.parametrize(
    ("latency", "threshold", "expected"),
    [
        pytest.param(300.0, 250.0, 0.2, id="20-percent-over"),
        pytest.param(200.0, 250.0, 0.0, id="within"),
        pytest.param(None, 250.0, None, id="no-traffic"),
    ],
)
def test_over_budget(latency, threshold, expected):
    assert ranking.over_budget(latency, threshold) == pytest.approx(expected)


def test_impact_ranks_traffic_times_overshoot_then_closeness_then_traffic():
    rows = {
        "busy-and-over": (ranking.impact(1200, 0.2), 1.2, 1200),  # 240
        "quiet-and-far-over": (ranking.impact(100, 0.5), 1.5, 100),  # 50
        "within-but-close": (ranking.impact(500, 0.0), 0.95, 500),
        "within-and-far": (ranking.impact(900, 0.0), 0.5, 900),
        "no-objective-busy": (None, None, 3000),
        "no-objective-quiet": (None, None, 10),
    }

    order = sorted(rows, key=lambda name: ranking.sort_key(*rows[name], name))

    assert order == list(rows)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.4234, "423 \N{MICRO SIGN}s"),
        (0.0, "0.00 ms"),
        (2.5, "2.50 ms"),
        (12.345, "12.3 ms"),
        (212.4, "212 ms"),
        (1250.0, "1.25 s"),
        (37_751.498, "37.75 s"),
        (150_000.0, "2.5 min"),
        (None, "\N{EN DASH}"),
    ],
)
def test_ms_filter(value, expected):
    assert ms(value) == expected


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (99.95, 3, "99.95%"),
        (Decimal("99.900"), 3, "99.9%"),
        (99.99996, 3, "99.999%"),
        (100, 3, "100%"),
    ],
)
def test_percent_filter(value, digits, expected):
    assert percent(value, digits) == expected


# ----- overview ----------------------------------------------------------------------------------


def add_minutes(pipeline: Pipeline, first: dt.datetime, values: list[np.ndarray], errors: int = 0):
    """End-to-end minute rollups, one row per array of ``values`` (ms), from ``first``."""
    Rollup.objects.bulk_create(
        Rollup(
            team=pipeline.team,
            pipeline=pipeline,
            stage=None,
            resolution=Resolution.MINUTE,
            bucket_start=first + index * MINUTE,
            count=len(minute),
            error_count=errors if index == 0 else 0,
            sum_ms=float(minute.sum()),
            min_ms=float(minute.min()),
            max_ms=float(minute.max()),
            sketch=Sketch.from_values(minute).to_bytes(),
        )
        for index, minute in enumerate(values)
    )


def objective(pipeline: Pipeline, threshold_ms: float, target: str, **fields) -> Objective:
    return Objective.objects.create(
        team=pipeline.team,
        pipeline=pipeline,
        name=f"{target}% under {threshold_ms:g} ms",
        threshold_ms=threshold_ms,
        target_percent=Decimal(target),
        **fields,
    )


NOW = T0 + dt.timedelta(hours=2, seconds=30)  # the last hour is 10:02 to 11:02


@pytest.fixture
def seeded() -> dict:
    """Two pipelines of one team with a known last hour, one of another team."""
    rng = np.random.default_rng(7)
    ours, theirs = make_team("ours"), make_team("theirs")
    fraud = Pipeline.objects.create(team=ours, service_name="fraud-scorer", environment="prod")
    recs = Pipeline.objects.create(team=ours, service_name="recommender", environment="prod")
    quiet = Pipeline.objects.create(team=ours, service_name="quiet", environment="prod")
    secret = Pipeline.objects.create(team=theirs, service_name="their-secret-service")
    hour_start = NOW.replace(second=0) - HOUR
    fraud_values = [rng.lognormal(np.log(40), 0.5, 30) for _ in range(60)]
    recs_values = [rng.lognormal(np.log(120), 0.3, 10) for _ in range(60)]
    add_minutes(fraud, hour_start, fraud_values, errors=18)
    add_minutes(recs, hour_start, recs_values)
    # Outside the hour: neither counted.
    add_minutes(fraud, hour_start - MINUTE, [np.full(1000, 5000.0)])
    add_minutes(fraud, hour_start + HOUR, [np.full(1000, 5000.0)])
    add_minutes(secret, hour_start, [np.full(10, 1.0)])
    fraud_slo = objective(fraud, 60.0, "99")
    recs_slo = objective(recs, 500.0, "99.9")
    SlaMinute.objects.create(objective=fraud_slo, minute=hour_start, good=990, total=1000)
    SlaMinute.objects.create(objective=recs_slo, minute=hour_start, good=1000, total=1000)
    return {
        "team": ours,
        "fraud": (fraud, np.concatenate(fraud_values)),
        "recs": (recs, np.concatenate(recs_values)),
        "quiet": quiet,
        "member": make_user(ours),
        "outsider": make_user(theirs),
        "secret": secret,
    }


@pytest.mark.django_db
def test_overview_figures_of_the_last_hour(seeded):
    # when the member opens the overview
    result = overview(seeded["member"], NOW, WINDOWS["1h"])

    # then each pipeline's figures are those of its 60 minutes, merged exactly
    fraud, values = seeded["fraud"]
    row = next(r for r in result.pipelines if r.pipeline == fraud)
    expected = Sketch.from_values(values)
    assert (result.start, result.end) == (NOW.replace(second=0) - HOUR, NOW.replace(second=0))
    assert row.requests == 1800
    assert row.requests_per_minute == 30.0
    assert row.error_rate == 18 / 1800
    assert row.p50_ms == expected.quantile(0.5)
    assert row.p99_ms == expected.quantile(0.99)
    exact_p99 = np.sort(values)[int(0.99 * (len(values) - 1))]
    assert abs(row.p99_ms - exact_p99) <= RELATIVE_ERROR * exact_p99 * (1 + 1e-9)
    # and the impact is traffic times how far p99 (the 99% objective's quantile) is over 60 ms
    assert row.budget is not None
    assert row.budget.quantile == 0.99
    assert row.budget.over == row.p99_ms / 60.0 - 1
    assert row.impact == pytest.approx(30.0 * (row.p99_ms / 60.0 - 1))
    assert row.objectives[0].summary.attainment_percent == 99.0
    assert row.objectives[0].in_window.attainment_percent == 99.0


@pytest.mark.django_db
def test_overview_sorts_by_impact_and_shows_pipelines_without_traffic_last(seeded):
    result = overview(seeded["member"], NOW, WINDOWS["1h"])

    names = [row.pipeline.service_name for row in result.pipelines]
    recs = result.pipelines[1]
    assert names == ["fraud-scorer", "recommender", "quiet"]
    assert recs.impact == 0.0  # p99.9 of ~120 ms is well within 500 ms
    assert result.pipelines[2].requests == 0
    assert result.pipelines[2].p99_ms is None


@pytest.mark.django_db
def test_overview_shows_an_outsider_nothing_of_another_team(seeded):
    result = overview(seeded["outsider"], NOW, WINDOWS["1h"])

    assert [row.pipeline for row in result.pipelines] == [seeded["secret"]]
    assert result.pipelines[0].objectives == ()


@pytest.mark.django_db
def test_overview_page_links_each_pipeline_and_explains_impact(client, seeded):
    client.force_login(seeded["member"])

    response = client.get("/")

    body = response.content.decode()
    assert response.status_code == 200
    for pipeline in (seeded["fraud"][0], seeded["recs"][0], seeded["quiet"]):
        assert f'href="/pipelines/{pipeline.pk}/"' in body
    assert "their-secret-service" not in body
    assert "Impact = traffic (requests/min)" in body
    assert "Alerts" not in body  # no alerts feature yet: no column pretending otherwise


@pytest.mark.django_db
def test_empty_overview_teaches_how_to_send_traces(client):
    team = make_team("new")
    member = make_user(team)
    client.force_login(member)

    response = client.get("/", HTTP_HOST="localhost:8000")

    body = response.content.decode()
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318" in body
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf" in body
    assert "OTEL_EXPORTER_OTLP_HEADERS=" in body
    assert "http://localhost:4317" in body
    assert "inference.stage" in body


# ----- pipeline page -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_pipeline_page_for_a_member(client, seeded):
    fraud = seeded["fraud"][0]
    Stage.objects.create(pipeline=fraud, name="model_forward")
    client.force_login(seeded["member"])

    response = client.get(f"/pipelines/{fraud.pk}/")

    body = response.content.decode()
    assert response.status_code == 200
    assert "fraud-scorer" in body
    assert 'id="chart-percentiles"' in body
    assert "/static/vendor/plotly-basic.min.js" in body
    assert "model_forward" in body  # in the page's config


@pytest.mark.django_db
def test_pipeline_page_gives_its_charts_the_pipelines_recent_incidents(client, seeded):
    # given an open incident of fraud-scorer, one resolved 100 days ago, and one of another
    # pipeline
    fraud, quiet = seeded["fraud"][0], seeded["quiet"]
    now = timezone.now()
    opened = now - dt.timedelta(hours=2)
    Incident.objects.create(pipeline=fraud, status="firing", title="p99 up", opened_at=opened)
    old = now - dt.timedelta(days=100)
    Incident.objects.create(
        pipeline=fraud, status="resolved", title="old", opened_at=old, resolved_at=old
    )
    Incident.objects.create(pipeline=quiet, status="firing", title="elsewhere", opened_at=opened)
    client.force_login(seeded["member"])

    response = client.get(f"/pipelines/{fraud.pk}/")

    # then the page's config lists the open one, for the bands on its time charts
    config = json.loads(
        response.content.decode()
        .split('id="pipeline-config" type="application/json">')[1]
        .split("</script>")[0]
    )
    assert config["incidents"] == [
        {"title": "p99 up", "openedAt": opened.isoformat(), "resolvedAt": None}
    ]
    assert config["thinBelow"] == 10


@pytest.mark.django_db
def test_pipeline_without_objective_links_to_create_one(client, seeded):
    client.force_login(seeded["member"])

    response = client.get(f"/pipelines/{seeded['quiet'].pk}/")

    assert f"/slas/new/?pipeline={seeded['quiet'].pk}" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/pipelines/{id}/",
        "/api/pipelines/{id}/stage-breakdown/?start=2026-03-02T00:00:00Z&end=2026-03-03T00:00:00Z",
        "/api/pipelines/{id}/deployments/?start=2026-03-02T00:00:00Z&end=2026-03-03T00:00:00Z",
        "/api/pipelines/{id}/attributes/?start=2026-03-02T00:00:00Z&end=2026-03-03T00:00:00Z",
    ],
    ids=["page", "stage-breakdown", "deployments", "attributes"],
)
def test_another_teams_pipeline_does_not_exist(client, seeded, path):
    client.force_login(seeded["outsider"])

    response = client.get(path.format(id=seeded["fraud"][0].pk))

    assert response.status_code == 404
    assert b"fraud-scorer" not in response.content


@pytest.mark.django_db
def test_pipeline_page_needs_a_login(client, seeded):
    response = client.get(f"/pipelines/{seeded['fraud'][0].pk}/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [
        pytest.param("start=2026-03-02T00:00:00Z", "end", id="missing-end"),
        pytest.param(
            "start=2026-03-03T00:00:00Z&end=2026-03-02T00:00:00Z", "end", id="end-before-start"
        ),
        pytest.param(
            "start=2026-03-02T00:00:00Z&end=2026-03-03T00:00:00Z&step=420", "step", id="odd-step"
        ),
    ],
)
def test_breakdown_rejects_bad_parameters(client, seeded, query, field):
    client.force_login(seeded["member"])

    response = client.get(f"/api/pipelines/{seeded['fraud'][0].pk}/stage-breakdown/?{query}")

    assert response.status_code == 400
    assert field in response.json()


# ----- stage shares over time --------------------------------------------------------------------


@pytest.mark.django_db
def test_stage_breakdown_api_gives_the_window_and_the_shares_per_step(client, seeded):
    # given two stages over two 15-minute steps of minute rows, 2,000 requests in the first
    # and 500 in the second
    fraud = seeded["fraud"][0]
    model = Stage.objects.create(pipeline=fraud, name="model_forward")
    queue = Stage.objects.create(pipeline=fraud, name="queue_wait")
    minute = Resolution.MINUTE
    StageShare.objects.bulk_create(
        [
            make_stage_share(model, minute, T0, 1000, 600.0, 100.0),
            make_stage_share(queue, minute, T0, 1000, 400.0, 300.0),
            make_stage_share(model, minute, T0 + 5 * MINUTE, 1000, 800.0, 50.0),
            make_stage_share(queue, minute, T0 + 5 * MINUTE, 1000, 400.0, 350.0),
            make_stage_share(model, minute, T0 + 20 * MINUTE, 500, 100.0, 10.0),
            make_stage_share(queue, minute, T0 + 20 * MINUTE, 500, 300.0, 30.0),
        ]
    )
    client.force_login(seeded["member"])

    # when the page asks for the breakdown of 09:00-09:30 in 15-minute steps
    response = client.get(
        f"/api/pipelines/{fraud.pk}/stage-breakdown/",
        {"start": "2026-03-02T09:00:00Z", "end": "2026-03-02T09:30:00Z", "step": "900"},
    )

    # then the summary covers the whole window, its slowest 1% the 25 requests above its p99
    body = response.json()
    assert response.status_code == 200
    assert (body["requests"], body["tail_requests"], body["tail_shown"]) == (2500, 25, True)
    assert body["p99_ms"] == pytest.approx(100, rel=0.01)
    assert [
        (s["name"], s["mean_self_ms_all"], s["share_all"], s["mean_self_ms_tail"])
        for s in body["stages"]
    ] == [
        ("model_forward", 1500 / 2500, 1500 / 2600, 160 / 25),
        ("queue_wait", 1100 / 2500, 1100 / 2600, 680 / 25),
    ]
    # and the series each step, the second step's 5 slowest too few for a tail
    series = body["series"]
    assert series["step_seconds"] == 900
    assert series["buckets"] == ["2026-03-02T09:00:00Z", "2026-03-02T09:15:00Z"]
    assert {s["name"]: s["share_all"] for s in series["stages"]} == {
        "model_forward": [1400 / 2200, 100 / 400],
        "queue_wait": [800 / 2200, 300 / 400],
    }
    assert {s["name"]: s["share_tail"] for s in series["stages"]} == {
        "model_forward": [150 / 800, None],
        "queue_wait": [650 / 800, None],
    }


@pytest.mark.django_db
def test_shares_read_hours_where_minutes_are_gone(seeded):
    fraud = seeded["fraud"][0]
    model = Stage.objects.create(pipeline=fraud, name="model_forward")
    StageShare.objects.bulk_create(
        [
            make_stage_share(model, Resolution.HOUR, T0, 60, 600.0, 10.0),
            make_stage_share(model, Resolution.MINUTE, T0 + HOUR, 10, 60.0, 1.0),
        ]
    )

    series = queries.share_series(fraud, T0, T0 + 2 * HOUR, HOUR)

    assert series.bucket_starts == (T0, T0 + HOUR)
    assert series.stages[0].share_all == (1.0, 1.0)


# ----- version scan and deployment markers --------------------------------------------------------


db_committed = pytest.mark.django_db(transaction=True)


@pytest.fixture
def writer(django_db_setup: None) -> Iterator[SpanWriter]:
    span_writer = SpanWriter(conninfo(), max_connections=2)
    yield span_writer
    span_writer.close()


def request_spans(
    start: dt.datetime,
    root_ms: float,
    stages: dict[str, float],
    attributes: dict[str, object],
    service: str = "fraud-scorer",
) -> list[DecodedSpan]:
    """One request: a root span and one child per stage, all carrying ``attributes``."""
    trace_id = next(_ids).to_bytes(16, "big")
    root_id = next(_ids)
    base = int(start.timestamp() * 1e6) * 1000
    spans = [
        DecodedSpan(
            trace_id=trace_id,
            span_id=root_id.to_bytes(8, "big"),
            parent_span_id=None,
            name="POST /v1/score",
            kind=2,
            start_ns=base,
            end_ns=base + round(root_ms * MS),
            status_code=0,
            status_message="",
            service_name=service,
            environment="",
            stage=None,
            attributes=attributes,
            dropped_attributes=0,
        )
    ]
    for name, duration in stages.items():
        spans.append(
            DecodedSpan(
                trace_id=trace_id,
                span_id=next(_ids).to_bytes(8, "big"),
                parent_span_id=root_id.to_bytes(8, "big"),
                name=name,
                kind=1,
                start_ns=base,
                end_ns=base + round(duration * MS),
                status_code=2 if duration > 1000 else 0,
                status_message="",
                service_name=service,
                environment="",
                stage=name,
                attributes=attributes,
                dropped_attributes=0,
            )
        )
    return spans


def store(writer: SpanWriter, team: Team, spans: list[DecodedSpan]) -> None:
    writer.write(team.pk, spans, rejected=0, protocol="test", received_at=timezone.now())


@db_committed
def test_deployment_markers_come_from_the_cohort_rollups(client, writer):
    # given an hour of v7, then a canary of v8 from minute 20, v7 gone after minute 40,
    # folded into the rollups
    team = make_team("ours")
    start = timezone.now().replace(second=0, microsecond=0) - 3 * HOUR
    spans = []
    for minute in range(60):
        versions = ["v7"] * (minute < 40) + ["v8"] * (minute >= 20)
        for version in versions:
            attributes: dict[str, object] = {"service.version": "3.4.1", "model.version": version}
            spans += request_spans(
                start + minute * MINUTE, 10.0, {"model_forward": 6.0}, attributes
            )
    store(writer, team, spans)
    services.fold_until_idle(lambda: start + 2 * HOUR, seconds=60)
    pipeline = Pipeline.objects.get(team=team)

    # when the page asks for the deployments of the window
    client.force_login(make_user(team))
    response = client.get(
        f"/api/pipelines/{pipeline.pk}/deployments/",
        {"start": (start - HOUR).isoformat(), "end": (start + 2 * HOUR).isoformat()},
    )

    # then the canary is marked at v8's first minute and v7's end at its last
    markers = [(m["kind"], m["value"], m["previous"], m["at"]) for m in response.json()["markers"]]
    assert markers == [
        ("appeared", "v8", "v7", (start + 20 * MINUTE).isoformat().replace("+00:00", "Z")),
        ("gone", "v7", None, (start + 39 * MINUTE).isoformat().replace("+00:00", "Z")),
    ]


@db_committed
def test_a_version_seen_before_the_window_is_no_new_deployment(client, writer):
    # given v7 before the window and again in it, after a pause
    team = make_team("ours")
    start = timezone.now().replace(second=0, microsecond=0) - 3 * HOUR
    for minute in (0, 90):
        store(
            writer, team, request_spans(start + minute * MINUTE, 10.0, {}, {"model.version": "v7"})
        )
    services.fold_until_idle(lambda: start + 2 * HOUR, seconds=60)
    pipeline = Pipeline.objects.get(team=team)

    markers = queries.deployment_markers(pipeline, start + HOUR, start + 2 * HOUR)

    assert markers == ()


# ----- breakdown by attribute ---------------------------------------------------------------------

"""The Prometheus-compatible API, asked as Grafana and scripts ask it: over HTTP from the real
web process, with a read-only API token, by a real Prometheus client library; its figures
equal the percentiles and attainment APIs' for the same windows."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import numpy as np
import pytest
import requests
import yaml
from django.contrib.auth.models import User
from django.test import Client
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from latencyboard.apitokens.models import Scope
from latencyboard.apitokens.services import issue_api_token
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.prometheus import evaluation, promql
from latencyboard.prometheus import series as catalogue
from latencyboard.rollups.models import Resolution
from latencyboard.sla import services
from latencyboard.sla.models import Objective, SlaMinute, Window
from latencyboard.teams.models import Role
from latencyboard.windows import MAX_SERIES_WINDOW
from tests.browser.conftest import LiveWeb, serve_web
from tests.factories import make_team, make_user
from tests.latencyboard.test_percentiles_api import add_rows
from tests.support import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

DASHBOARD = ROOT / "docs" / "grafana" / "latencyboard-dashboard.json"
HOURS = 3


@pytest.fixture(scope="module")
def web(child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveWeb]:
    yield from serve_web(child_env, tmp_path_factory.mktemp("web") / "web.log")


@dataclass(frozen=True)
class Scene:
    member: User
    token: str  # read-only
    outsider_token: str
    pipeline: Pipeline
    stages: list[Stage]
    objective: Objective
    first: dt.datetime  # the first minute with rows; three whole hours follow

    @property
    def last(self) -> dt.datetime:
        return self.first + dt.timedelta(hours=HOURS)


@pytest.fixture
def scene() -> Scene:
    team = make_team("ours")
    member = cast(User, make_user(team, Role.ADMIN))
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer", environment="prod")
    stages = [Stage.objects.create(pipeline=pipeline, name=n) for n in ("preprocess", "model")]
    first = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    first -= dt.timedelta(hours=HOURS + 2)
    rng = np.random.default_rng(2029)
    for stage in (*stages, None):
        add_rows(pipeline, stage, Resolution.MINUTE, first, HOURS * 60, rng)
    objective = services.create_objective(
        team=team,
        pipeline=pipeline,
        stage=None,
        name="fast-enough",
        threshold_ms=15.0,
        target_percent=Decimal("99"),
        window=Window.ROLLING_28D,
        created_by=member,
    )
    # exact SLA counters of the same minutes, as the rollup worker counts them
    SlaMinute.objects.bulk_create(
        SlaMinute(
            objective=objective,
            minute=first + dt.timedelta(minutes=m),
            good=int(rng.integers(0, 40)),
            total=40,
        )
        for m in range(HOURS * 60)
    )
    theirs = make_team("theirs")
    outsider = cast(User, make_user(theirs, Role.ADMIN))
    Pipeline.objects.create(team=theirs, service_name="beta-ranker")
    return Scene(
        member,
        issue_api_token(member, "grafana", Scope.READ).plaintext,
        issue_api_token(outsider, "beta", Scope.READ).plaintext,
        pipeline,
        stages,
        objective,
        first,
    )


def prometheus(web: LiveWeb, token: str) -> PrometheusConnect:
    return PrometheusConnect(
        url=f"{web.url}/prometheus", headers={"Authorization": f"Bearer {token}"}, disable_ssl=True
    )


def percentiles(scene: Scene, start: dt.datetime, end: dt.datetime, step: str) -> dict[str, Any]:
    """The percentiles API's answer for the window, every stage, keyed by stage name."""
    client = Client()
    client.force_login(scene.member)
    body = client.get(
        f"/api/pipelines/{scene.pipeline.pk}/percentiles/",
        {
            "start": start.isoformat(),
            "end": end.isoformat(),
            "step": step,
            "q": "0.5,0.9,0.95,0.99,0.999",
        },
    ).json()
    return {series["stage"]["name"]: series for series in body["series"]}


def attainment(scene: Scene, start: dt.datetime, end: dt.datetime, step: str) -> dict[str, Any]:
    client = Client()
    client.force_login(scene.member)
    return client.get(
        f"/api/slas/{scene.objective.pk}/attainment/",
        {"start": start.isoformat(), "end": end.isoformat(), "step": step},
    ).json()


def expected_value(
    metric: dict[str, str], bucket_start: str, step_seconds: int, figures: dict, budget: dict
) -> float | None:
    """What the percentiles (or attainment) API says of the bucket a sample describes."""
    name = metric["__name__"]
    if name == "latencyboard_sla_attainment_ratio":
        bucket = next(b for b in budget["buckets"] if b["start"] == bucket_start)
        return bucket["good"] / bucket["total"] if bucket["total"] else None
    point = next(p for p in figures[metric["stage"]]["points"] if p["t"] == bucket_start)
    if name == "latencyboard_latency_seconds":
        key = "p" + format(Decimal(metric["quantile"]) * 100, "f").rstrip("0").rstrip(".")
        return None if point[key] is None else point[key] / 1000
    if name == "latencyboard_requests_per_second":
        return point["n"] / step_seconds
    if name == "latencyboard_requests":
        return float(point["n"])
    assert name == "latencyboard_error_ratio"
    return point["error_rate"]


def iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def assert_range_equals_the_apis(scene: Scene, result: list[dict], step_seconds: int) -> int:
    """Every sample of ``result`` equals the APIs' figure of the bucket before it; returns
    how many samples were compared."""
    # A sample at t describes [t - step, t): the first one, at the range's start, the step before.
    start = scene.first - dt.timedelta(seconds=step_seconds)
    figures = percentiles(scene, start, scene.last, f"{step_seconds}s")
    budget = attainment(scene, start, scene.last, f"{step_seconds}s")
    compared = 0
    for series in result:
        for t, value in series["values"]:
            bucket = iso(t - step_seconds)
            expected = expected_value(series["metric"], bucket, step_seconds, figures, budget)
            assert (series["metric"], bucket, float(value)) == (
                series["metric"],
                bucket,
                expected,
            )
            compared += 1
    return compared


MATCHERS = {
    "equal": (
        'latencyboard_latency_seconds{pipeline="fraud-scorer", stage="model", quantile="0.99"}',
        {("model", "0.99")},
    ),
    "not-equal": (
        'latencyboard_latency_seconds{quantile="0.5", stage!="end-to-end"}',
        {("preprocess", "0.5"), ("model", "0.5")},
    ),
    "regex": (
        'latencyboard_latency_seconds{pipeline=~"fraud.*", stage=~"pre.+|end-to-end", '
        'quantile="0.9"}',
        {("preprocess", "0.9"), ("end-to-end", "0.9")},
    ),
    "not-regex": (
        'latencyboard_latency_seconds{stage!~"pre.*|end-to-end", quantile=~"0.9.*"}',
        {("model", "0.9"), ("model", "0.95"), ("model", "0.99"), ("model", "0.999")},
    ),
}


@pytest.mark.parametrize("kind", MATCHERS)
def test_a_prometheus_client_reads_range_vectors_with_each_matcher_kind(web, scene, kind):
    query, series = MATCHERS[kind]
    client = prometheus(web, scene.token)

    result = client.custom_query_range(query, scene.first, scene.last, "1h")

    assert {(s["metric"]["stage"], s["metric"]["quantile"]) for s in result} == series
    assert [len(s["values"]) for s in result] == [HOURS] * len(series)
    assert assert_range_equals_the_apis(scene, result, 3600) == HOURS * len(series)


@pytest.mark.parametrize("kind", MATCHERS)
def test_a_prometheus_client_reads_instant_vectors_with_each_matcher_kind(web, scene, kind):
    query, series = MATCHERS[kind]
    client = prometheus(web, scene.token)
    at = scene.first + dt.timedelta(hours=1, minutes=7)

    result = client.custom_query(query, params={"time": at.timestamp()})

    # then each describes the last whole five minutes before the time: 1:00 to 1:05
    five = scene.first + dt.timedelta(hours=1)
    figures = percentiles(scene, five, five + dt.timedelta(minutes=5), "5m")
    assert {(s["metric"]["stage"], s["metric"]["quantile"]) for s in result} == series
    for found in result:
        t, value = found["value"]
        expected = expected_value(found["metric"], iso(five.timestamp()), 300, figures, {})
        assert (found["metric"], t, float(value)) == (found["metric"], at.timestamp(), expected)


def test_requests_and_attainment_equal_the_apis(web, scene):
    client = prometheus(web, scene.token)

    result = client.custom_query_range(
        '{__name__=~"latencyboard_(requests.*|error_ratio|sla_attainment_ratio)", '
        'stage="end-to-end"}',
        scene.first,
        scene.last,
        "30m",
    )

    assert sorted(s["metric"]["__name__"] for s in result) == [
        "latencyboard_error_ratio",
        "latencyboard_requests",
        "latencyboard_requests_per_second",
        "latencyboard_sla_attainment_ratio",
    ]
    # counts have a sample (0) for the empty half hour before the first, ratios none
    assert assert_range_equals_the_apis(scene, result, 1800) == 2 * (2 * HOURS + 1) + 2 * (
        2 * HOURS
    )


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]


def test_the_dashboard_s_queries_answer_the_percentiles_api_s_figures(web, scene):
    # given the dashboard's variables as Grafana fills them from the API
    client = prometheus(web, scene.token)
    values = {
        "pipeline": client.get_label_values("pipeline"),
        "environment": client.get_label_values("environment"),
        "stage": client.get_label_values("stage"),
    }
    assert values == {
        "pipeline": ["fraud-scorer"],
        "environment": ["prod"],
        "stage": ["end-to-end", "model", "preprocess"],
    }
    fill = {"pipeline": "fraud-scorer", "environment": "prod", "stage": "model|preprocess"}
    queries = dashboard_queries()
    assert len(queries) >= 7

    # when each of its queries is run over the window at hourly steps
    compared = 0
    for title, expr in queries:
        filled = re.sub(r"\$(\w+)", lambda m: fill[m[1]], expr)
        result = client.custom_query_range(filled, scene.first, scene.last, "1h")
        # then it has series, and each sample equals the APIs' figure of its hour
        assert (title, len(result) > 0) == (title, True)
        compared += assert_range_equals_the_apis(scene, result, 3600)
    assert compared >= len(queries) * HOURS


def test_an_outsider_token_sees_no_series_of_another_team(web, scene):
    client = prometheus(web, scene.outsider_token)

    latency = client.custom_query_range(
        'latencyboard_latency_seconds{pipeline="fraud-scorer"}', scene.first, scene.last, "1h"
    )
    everything = client.custom_query('{__name__=~".+"}')
    pipelines = client.get_label_values("pipeline")
    series = client.get_series(
        scene.first, scene.last, params={"match[]": '{__name__=~"latencyboard_.+"}'}
    )

    assert latency == []
    assert {s["metric"]["pipeline"] for s in everything} == {"beta-ranker"}
    assert pipelines == ["beta-ranker"]
    assert {s["pipeline"] for s in series} == {"beta-ranker"}


@pytest.mark.parametrize(
    "query",
    [
        "rate(latencyboard_requests[5m])",
        "histogram_quantile(0.99, latencyboard_latency_seconds)",
        "sum by (stage) (latencyboard_requests)",
        "latencyboard_requests[5m]",
        "latencyboard_requests offset 1h",
        "latencyboard_requests / latencyboard_requests",
        "latencyboard_requests{",
    ],
)
def test_what_the_api_does_not_answer_is_prometheus_error_shape_400(web, scene, query):
    response = requests.get(
        f"{web.url}/prometheus/api/v1/query",
        params={"query": query},
        headers={"Authorization": f"Bearer {scene.token}"},
        timeout=30,
    )

    assert response.status_code == 400
    body = response.json()
    assert (body["status"], body["errorType"]) == ("error", "bad_data")
    assert body["error"]


def test_a_regex_over_every_pipeline_is_bounded(web, scene):
    Pipeline.objects.bulk_create(
        Pipeline(team=scene.pipeline.team, service_name=f"svc-{n}") for n in range(30)
    )
    client = prometheus(web, scene.token)

    with pytest.raises(PrometheusApiClientException, match="at most 25"):
        client.custom_query_range(
            'latencyboard_requests{pipeline=~".*"}', scene.first, scene.last, "1h"
        )
    # and naming pipelines answers
    named = client.custom_query_range(
        'latencyboard_requests{pipeline=~"fraud-.*", stage="end-to-end"}',
        scene.first,
        scene.last,
        "1h",
    )
    assert [s["metric"]["pipeline"] for s in named] == ["fraud-scorer"]


def test_grafana_s_health_check_and_build_info(web, scene):
    headers = {"Authorization": f"Bearer {scene.token}"}

    check = requests.post(
        f"{web.url}/prometheus/api/v1/query", data={"query": "1+1"}, headers=headers, timeout=30
    )
    info = requests.get(
        f"{web.url}/prometheus/api/v1/status/buildinfo", headers=headers, timeout=30
    )
    anonymous = requests.get(
        f"{web.url}/prometheus/api/v1/query", params={"query": "1"}, timeout=30
    )

    assert check.status_code == 200
    assert check.json()["data"]["resultType"] == "scalar"
    assert check.json()["data"]["result"][1] == "2.0"
    assert info.json()["status"] == "success"
    assert (anonymous.status_code, anonymous.json()["status"]) == (401, "error")


def test_a_fine_step_over_a_long_range_is_coarsened_to_the_grid(web, scene):
    client = prometheus(web, scene.token)
    start = scene.last - dt.timedelta(days=30)

    result = client.custom_query_range(
        'latencyboard_requests{stage="end-to-end"}', start, scene.last, "15s"
    )

    # then the samples fall on a grid step of at least 30 days / 5000 points
    times = [t for t, _ in result[0]["values"]]
    steps = {b - a for a, b in itertools.pairwise(times)}
    assert min(steps) >= 30 * 86400 / 5000
    assert all(t % min(steps) == 0 for t in times)


def test_the_collector_config_batches_and_exports_over_otlphttp_with_the_token():
    config = yaml.safe_load((ROOT / "docs" / "otel-collector.yaml").read_text())

    traces = config["service"]["pipelines"]["traces"]
    exporter = config["exporters"][traces["exporters"][0]]
    assert traces["exporters"][0].split("/")[0] == "otlphttp"
    assert "batch" in traces["processors"]
    assert exporter["headers"]["authorization"] == "Bearer ${env:LATENCYBOARD_INGEST_TOKEN}"


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("query", {"query": "latencyboard_requests", "time": "1e30"}),
        ("query", {"query": "latencyboard_requests", "time": "-5"}),
        ("query", {}),
        ("query_range", {"query": "latencyboard_requests", "start": "0", "end": "1"}),
        ("query_range", {"query": "latencyboard_requests", "start": "0", "end": "1", "step": "0"}),
        (
            "query_range",
            {"query": "latencyboard_requests", "start": "0", "end": "9999999999", "step": "1"},
        ),
        (
            "query_range",
            {"query": "latencyboard_requests", "start": "10", "end": "5", "step": "1d"},
        ),
        (
            "query_range",
            {"query": "latencyboard_requests", "start": "0", "end": "1", "step": "9" * 30},
        ),
        *(
            (
                "query_range",
                {"query": "latencyboard_requests", "start": "0", "end": "1", "step": step},
            )
            for step in ("P999999999DT24H", "PT999999999H", "401d")
        ),
        ("series", {}),
        ("series", {"match[]": "1+1"}),
        ("labels", {"match[]": 'x{a=~"' + "a" * 300 + '"}'}),
    ],
)
def test_bad_parameters_are_a_400_in_prometheus_shape(scene, path, params):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {scene.token}")

    response = client.get(f"/prometheus/api/v1/{path}", params)

    assert response.status_code == 400, response.content
    assert response.json()["errorType"] == "bad_data"


def test_a_range_whose_first_sample_reads_past_the_longest_window_is_a_400(scene):
    # given a day-aligned range of exactly the longest window at daily steps: its first sample,
    # at start, describes the day before start, so the range reads one day more
    client = Client(HTTP_AUTHORIZATION=f"Bearer {scene.token}")
    end = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    params = {"query": "latencyboard_requests", "end": end.isoformat(), "step": "1d"}

    longest = client.get(
        "/prometheus/api/v1/query_range", {**params, "start": (end - MAX_SERIES_WINDOW).isoformat()}
    )
    a_day_less = client.get(
        "/prometheus/api/v1/query_range",
        {**params, "start": (end - MAX_SERIES_WINDOW + dt.timedelta(days=1)).isoformat()},
    )

    assert longest.status_code == 400, longest.content
    assert longest.json()["errorType"] == "bad_data"
    assert "400 days" in longest.json()["error"]
    assert a_day_less.status_code == 200, a_day_less.content


def test_a_stage_deleted_while_a_query_runs_has_no_samples_and_the_others_theirs(scene):
    # given the series a query chose, and then one of their stages deleted
    now = dt.datetime.now(dt.UTC)
    chosen = catalogue.select(scene.member, promql.parse_selector("latencyboard_requests"))
    grid = evaluation.range_grid(scene.first, scene.last, dt.timedelta(hours=1), 3, now)
    gone = scene.stages[0]
    Stage.objects.filter(pk=gone.pk).delete()

    samples = evaluation.values(scene.member, chosen, grid, now)

    # (the first sample, at the range's start, counts the hour before it: none)
    found = zip(chosen, samples, strict=True)
    counts = {entry.labels["stage"]: len(values) for entry, values in found}
    assert counts == {"end-to-end": HOURS + 1, gone.name: 0, scene.stages[1].name: HOURS + 1}


def test_an_instant_query_at_the_epoch_answers_nothing(scene):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {scene.token}")

    response = client.get(
        "/prometheus/api/v1/query", {"query": "latencyboard_requests", "time": "0"}
    )

    assert response.json() == {"status": "success", "data": {"resultType": "vector", "result": []}}

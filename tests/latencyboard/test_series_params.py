"""Contract of every series endpoint's parameters: stage names, epoch times, one step syntax,
``window=``, an end never after now, ``format=long`` and the point budget."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import cast

import numpy as np
import pytest
from django.contrib.auth.models import User

from latencyboard import series_syntax
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import Resolution
from latencyboard.sla import services
from latencyboard.sla.models import Window
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user
from tests.latencyboard.test_percentiles_api import add_rows

pytestmark = pytest.mark.django_db

ENDPOINTS = {
    "percentiles": "/api/pipelines/{pipeline}/percentiles/",
    "stage-breakdown": "/api/pipelines/{pipeline}/stage-breakdown/",
    "bottleneck": "/api/pipelines/{pipeline}/bottleneck/",
    "deployments": "/api/pipelines/{pipeline}/deployments/",
    "attributes": "/api/pipelines/{pipeline}/attributes/",
    "attainment": "/api/slas/{objective}/attainment/",
}
WITH_STEP = ("percentiles", "stage-breakdown", "bottleneck", "attainment")


@pytest.fixture
def scene(client):
    """A pipeline with two stages and three hours of minute rows ending two hours ago (whole
    hours), an objective on it, and its member signed in."""
    team = make_team("ours")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer", environment="prod")
    stages = [Stage.objects.create(pipeline=pipeline, name=n) for n in ("preprocess", "model")]
    first = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    first -= dt.timedelta(hours=5)
    rng = np.random.default_rng(29)
    for stage in (*stages, None):
        add_rows(pipeline, stage, Resolution.MINUTE, first, 180, rng)
    member = cast(User, make_user(team, Role.ADMIN))
    objective = services.create_objective(
        team=team,
        pipeline=pipeline,
        stage=None,
        name="fast",
        threshold_ms=20.0,
        target_percent=Decimal("99"),
        window=Window.ROLLING_28D,
        created_by=member,
    )
    client.force_login(member)
    return {"pipeline": pipeline, "stages": stages, "objective": objective, "first": first}


def url(scene, endpoint: str) -> str:
    return ENDPOINTS[endpoint].format(
        pipeline=scene["pipeline"].pk, objective=scene["objective"].pk
    )


def get(client, scene, endpoint: str, **params: str):
    response = client.get(url(scene, endpoint), params)
    assert response.status_code == 200, response.content
    return response.json()


def window_params(first: dt.datetime, spelling: str) -> dict[str, str]:
    start, end = first, first + dt.timedelta(hours=3)
    spell = {
        "iso": lambda m: m.isoformat(),
        "epoch-seconds": lambda m: str(int(m.timestamp())),
        "epoch-milliseconds": lambda m: str(int(m.timestamp() * 1000)),
    }[spelling]
    return {"start": spell(start), "end": spell(end)}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("spelling", ["epoch-seconds", "epoch-milliseconds"])
def test_epoch_seconds_and_milliseconds_answer_as_iso_8601(client, scene, endpoint, spelling):
    iso = get(client, scene, endpoint, **window_params(scene["first"], "iso"))

    epoch = get(client, scene, endpoint, **window_params(scene["first"], spelling))

    assert epoch == iso


@pytest.mark.parametrize("endpoint", WITH_STEP)
@pytest.mark.parametrize("step", ["3600", "60m", "PT1H"])
def test_one_step_syntax_everywhere(client, scene, endpoint, step):
    params = window_params(scene["first"], "iso")
    hourly = get(client, scene, endpoint, **params, step="1h")

    spelt = get(client, scene, endpoint, **params, step=step)

    assert spelt == hourly


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_window_ends_now_and_is_refused_with_start(client, scene, endpoint):
    before = dt.datetime.now(dt.UTC)
    body = get(client, scene, endpoint, window="6h")
    after = dt.datetime.now(dt.UTC)

    end = dt.datetime.fromisoformat(body["end"])
    assert before - dt.timedelta(minutes=1) <= end <= after
    mixed = client.get(url(scene, endpoint), {"window": "6h", "start": "2026-01-01T00:00:00Z"})
    assert (mixed.status_code, list(mixed.json())) == (400, ["window"])


def ends_in(body: dict) -> list[str]:
    """Every end a series answer states: its own, its share series', its buckets'."""
    ends = [body["end"]]
    ends += [body["series"]["end"]] if isinstance(body.get("series"), dict) else []
    ends += [bucket["end"] for bucket in body.get("buckets", [])]
    return ends


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_end_in_the_future_is_read_as_now(client, scene, endpoint):
    start = scene["first"]
    future = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)

    body = get(client, scene, endpoint, start=start.isoformat(), end=future.isoformat())

    after = dt.datetime.now(dt.UTC)
    assert [dt.datetime.fromisoformat(end) <= after for end in ends_in(body)] == [True] * len(
        ends_in(body)
    )


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_window_wholly_in_the_future_is_a_400(client, scene, endpoint):
    start = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)

    response = client.get(
        url(scene, endpoint),
        {"start": start.isoformat(), "end": (start + dt.timedelta(hours=1)).isoformat()},
    )

    assert response.status_code == 400
    assert "start before now" in response.json()["end"][0]


@pytest.mark.parametrize("endpoint", ["percentiles", "stage-breakdown", "bottleneck"])
def test_400_days_at_one_minute_steps_is_refused_before_any_query(
    client, scene, endpoint, django_assert_max_num_queries
):
    # Only the session, the user and the pipeline (with its stages) are read, besides the
    # team's heavy-read slot (the user's teams, the slot's lock taken and given back).
    with django_assert_max_num_queries(7):
        response = client.get(url(scene, endpoint), {"window": "400d", "step": "1m"})

    assert response.status_code == 400
    assert "at most 5000" in response.json()["step"][0]
    assert "use a step of at least" in response.json()["step"][0]


def test_attainment_caps_its_buckets(client, scene):
    response = client.get(url(scene, "attainment"), {"window": "28d", "step": "1m"})

    assert response.status_code == 400
    assert "at most 10000" in response.json()["step"][0]


def test_stages_by_name_answer_as_by_id(client, scene):
    params = window_params(scene["first"], "iso")
    model = scene["stages"][1]

    by_id = get(client, scene, "percentiles", **params, stages=f"end-to-end,{model.pk}")
    by_name = get(client, scene, "percentiles", **params, stages="end-to-end,model")

    assert by_name == by_id
    assert [s["stage"]["name"] for s in by_name["series"]] == ["end-to-end", "model"]


def test_format_long_is_one_row_per_bucket_and_stage(client, scene):
    params = window_params(scene["first"], "iso")
    series = get(client, scene, "percentiles", **params, stages="end-to-end,model", q="0.5,0.99")

    rows = get(
        client,
        scene,
        "percentiles",
        **params,
        stages="end-to-end,model",
        q="0.5,0.99",
        format="long",
    )

    assert len(rows) == 3 * 2
    assert set(rows[0]) == {"t", "stage", "stage_id", "n", "error_rate", "mean_ms", "p50", "p99"}
    assert [(row["t"], row["stage"]) for row in rows[:2]] == [
        (series["series"][0]["points"][0]["t"], "end-to-end"),
        (series["series"][0]["points"][0]["t"], "model"),
    ]
    expected = {
        (point["t"], entry["stage"]["name"]): point
        for entry in series["series"]
        for point in entry["points"]
    }
    assert {
        (row["t"], row["stage"]): {k: v for k, v in row.items() if k not in ("stage", "stage_id")}
        for row in rows
    } == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300", 300),
        ("0.5", 0.5),
        ("30s", 30),
        ("5m", 300),
        ("1h30m", 5400),
        ("1d", 86400),
        ("2w", 14 * 86400),
        ("PT1H", 3600),
        ("P7D", 7 * 86400),
    ],
)
def test_duration_syntax(text, seconds):
    assert series_syntax.duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "fast", "5 m", "1x", "P", "PT", "m5", "-"])
def test_durations_that_are_not(text):
    with pytest.raises(series_syntax.SyntaxRefused):
        series_syntax.duration(text)


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("1764150000", dt.datetime(2025, 11, 26, 9, 40, tzinfo=dt.UTC)),
        ("1764150000000", dt.datetime(2025, 11, 26, 9, 40, tzinfo=dt.UTC)),
        ("1764150000.25", dt.datetime(2025, 11, 26, 9, 40, 0, 250000, tzinfo=dt.UTC)),
        ("2025-11-26T09:40:00Z", None),
    ],
)
def test_epoch_numbers_are_seconds_below_1e11_and_milliseconds_above(text, moment):
    assert series_syntax.epoch_moment(text) == moment


@pytest.mark.parametrize(
    ("seconds", "step"),
    [(1, 60), (60, 60), (61, 120), (7 * 60, 600), (5000, 7200), (90000, 172800)],
)
def test_fitting_step_is_the_smallest_grid_step_at_least(seconds, step):
    assert series_syntax.fitting_step(seconds) == step


@pytest.mark.parametrize("step", ["900", "PT15M", "15m"])
def test_trace_exemplars_and_search_read_durations_in_the_same_syntax(client, scene, step):
    minute = scene["first"].isoformat()
    pipeline = scene["pipeline"].pk

    exemplars = client.get(
        "/api/traces/exemplars/", {"pipeline": pipeline, "minute": minute, "step": step}
    )
    search = client.get("/api/traces/", {"pipeline": pipeline, "window": step})

    assert (exemplars.status_code, search.status_code) == (200, 200)
    assert exemplars.json()["end"] == (scene["first"] + dt.timedelta(minutes=15)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def test_trace_search_and_exemplars_take_a_stage_by_name(client, scene):
    minute = scene["first"].isoformat()
    pipeline = scene["pipeline"].pk
    model = scene["stages"][1]

    by_name = client.get(
        "/api/traces/exemplars/", {"pipeline": pipeline, "minute": minute, "stage": "model"}
    )
    by_id = client.get(
        "/api/traces/exemplars/", {"pipeline": pipeline, "minute": minute, "stage": model.pk}
    )
    unknown = client.get("/api/traces/", {"pipeline": pipeline, "stage": "no_such_stage"})
    no_pipeline = client.get("/api/traces/", {"stage": "model"})

    assert (by_name.status_code, by_name.json()) == (200, by_id.json())
    assert by_name.json()["stage"] == {"id": model.pk, "name": "model"}
    assert (unknown.status_code, unknown.json()) == (
        400,
        {"stage": ["No stage no_such_stage in this pipeline."]},
    )
    assert no_pipeline.status_code == 400


@pytest.mark.parametrize("huge", ["P999999999DT24H", "PT999999999H", "P99999D"])
def test_a_huge_iso_8601_duration_is_a_400_everywhere(client, scene, huge):
    pipeline = scene["pipeline"].pk
    asked = [(url(scene, endpoint), {"step": huge}) for endpoint in WITH_STEP]
    asked += [(url(scene, endpoint), {"window": huge}) for endpoint in ENDPOINTS]
    asked += [
        ("/api/traces/", {"pipeline": pipeline, "window": huge}),
        ("/api/traces/exemplars/", {"pipeline": pipeline, "minute": "0", "step": huge}),
    ]

    answers = {path + str(params): client.get(path, params) for path, params in asked}

    assert {key: a.status_code for key, a in answers.items()} == dict.fromkeys(answers, 400)

"""The compare API and page on real spans folded into rollups: exact counts and sketch
quantiles on known data, both modes, scoping to the user's teams, validation and schema."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import services
from latencyboard.spans.models import IngestBatch
from latencyboard.spans.partitions import DayPartition
from latencyboard.teams.models import Team
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db

DAY_A = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
DAY_B = DAY_A + dt.timedelta(days=1)
URL = "/api/compare/"


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def write_spans(
    stage: Stage,
    durations_ms: Sequence[float] | np.ndarray,
    start: dt.datetime,
    step: dt.timedelta,
    *,
    is_root: bool = False,
    attributes: dict[str, Any] | None = None,
    seed: int = 0,
) -> None:
    """One span of ``stage`` per duration, starting at ``start`` and every ``step`` after, in
    one ingest batch, folded into the rollups."""
    durations = np.rint(np.asarray(durations_ms, dtype=np.float64) * 1e6).astype(np.int64)
    last = start + step * max(len(durations) - 1, 0)
    span_ids = np.random.default_rng(seed).integers(-(2**63), 2**63 - 1, len(durations))
    pipeline = stage.pipeline
    batch = IngestBatch.objects.create(
        team_id=pipeline.team_id, received_at=start, protocol="test", stored_spans=len(durations)
    )
    with connection.cursor() as cursor:
        for day in {start.date(), last.date()}:
            cursor.execute(DayPartition(day).create_sql())
        cursor.execute(
            """
            INSERT INTO spans_span (team_id, pipeline_id, stage_id, batch_id, trace_id, span_id,
                                    name, kind, status_code, start_time, duration_ns, is_root,
                                    attributes)
            SELECT %s, %s, %s, %s, gen_random_uuid(), s.span_id, %s, %s, 0,
                   %s::timestamptz + (s.n - 1) * %s * interval '1 second', s.duration_ns, %s,
                   %s::jsonb
            FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS s(span_id, duration_ns, n)
            """,
            [
                pipeline.team_id,
                pipeline.pk,
                stage.pk,
                batch.pk,
                stage.name,
                2 if is_root else 1,
                start,
                step.total_seconds(),
                is_root,
                json.dumps(attributes or {}),
                span_ids.tolist(),
                durations.tolist(),
            ],
        )
    services.fold_pending_batches(start)


@dataclass
class Demo:
    """A pipeline with a root stage and two child stages, and its team's member."""

    team: Team
    pipeline: Pipeline
    root: Stage
    preprocess: Stage
    forward: Stage
    member: AbstractBaseUser


@pytest.fixture
def demo() -> Demo:
    team = make_team("ours")
    pipeline = Pipeline.objects.create(
        team=team, service_name="fraud-scorer", environment="production"
    )
    root, preprocess, forward = (
        Stage.objects.create(pipeline=pipeline, name=name)
        for name in ("POST /v1/score", "preprocess", "model_forward")
    )
    return Demo(team, pipeline, root, preprocess, forward, make_user(team))


def windows_query(demo: Demo, **overrides: str) -> dict[str, str]:
    return {
        "pipeline": str(demo.pipeline.pk),
        "a_start": iso(DAY_A),
        "a_end": iso(DAY_A + dt.timedelta(hours=1)),
        "b_start": iso(DAY_B),
        "b_end": iso(DAY_B + dt.timedelta(hours=1)),
        **overrides,
    }


def get(client, user: AbstractBaseUser, params: dict[str, str]) -> Any:
    client.force_login(user)
    return client.get(URL, params)


def stage_of(body: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = (stage for stage in body["stages"] if stage["stage"]["name"] == name)
    return found


def quantile(stage: dict[str, Any], key: str) -> dict[str, Any]:
    (found,) = (q for q in stage["quantiles"] if q["key"] == key)
    return found


SECOND = dt.timedelta(seconds=1)


def test_two_windows_give_exact_counts_and_quantiles_of_known_spans(client, demo):
    # given model_forward at 1..100 ms in the first hour of day A and 2..200 ms on day B, and
    # spans just outside both windows
    write_spans(demo.forward, np.arange(1, 101), DAY_A, SECOND)
    write_spans(demo.forward, np.arange(2, 201, 2), DAY_B, SECOND, seed=1)
    write_spans(demo.forward, [5_000.0], DAY_A - SECOND, SECOND, seed=2)
    write_spans(demo.forward, [5_000.0], DAY_A + dt.timedelta(hours=1), SECOND, seed=3)

    # when the member compares the two hours
    response = get(client, demo.member, windows_query(demo))

    # then every span in the windows and none outside is counted, and each quantile is the
    # order statistic of rank floor(q * (n - 1)) within the sketch's 1%: 50, 95 and 99 ms
    # against 100, 190, 198 ms
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["mode"] == "windows"
    assert body["pipeline"] == {"id": demo.pipeline.pk, "name": "fraud-scorer (production)"}
    assert (body["a"]["spans"], body["b"]["spans"]) == (100, 100)
    forward = stage_of(body, "model_forward")
    assert (forward["n_a"], forward["n_b"]) == (100, 100)
    assert [(q["key"], q["a_ms"], q["b_ms"]) for q in forward["quantiles"]] == [
        ("p50", pytest.approx(50.0, rel=0.01), pytest.approx(100.0, rel=0.01)),
        ("p95", pytest.approx(95.0, rel=0.01), pytest.approx(190.0, rel=0.01)),
        ("p99", pytest.approx(99.0, rel=0.01), pytest.approx(198.0, rel=0.01)),
    ]
    p50 = quantile(forward, "p50")
    assert p50["delta_ms"] == pytest.approx(50.0, abs=1.5)
    assert (p50["delta_pct"], p50["min_spans"]) == (pytest.approx(100.0, abs=3), 50)
    assert 0 < p50["ci_low_ms"] <= p50["delta_ms"] <= p50["ci_high_ms"]
    assert (p50["significant"], p50["change"]) == (True, "slower")
    # 100 spans are too few for p95 (200) and p99 (1,000): numbers, but no interval
    assert [(q["enough_data"], q["ci_low_ms"]) for q in forward["quantiles"][1:]] == [
        (False, None),
        (False, None),
    ]
    assert forward["significant"] is True
    assert forward["verdict"].startswith("model_forward p50 +")
    assert forward["verdict"].endswith(", significantly slower")
    assert body["headline"].startswith("Significantly slower in B: model_forward p50 +")


def test_end_to_end_is_the_root_spans_and_comes_first(client, demo):
    # given root spans and preprocess spans in both windows
    for day, seed in ((DAY_A, 10), (DAY_B, 20)):
        write_spans(demo.root, np.full(60, 30.0), day, SECOND, is_root=True, seed=seed)
        write_spans(demo.preprocess, np.full(60, 2.0), day, SECOND, seed=seed + 1)

    body = get(client, demo.member, windows_query(demo)).json()

    # then end to end is the roots' latency, the root's own stage is not repeated, and
    # identical latencies are no significant change
    assert [stage["stage"] for stage in body["stages"]] == [
        {"id": None, "name": "end-to-end"},
        {"id": demo.preprocess.pk, "name": "preprocess"},
    ]
    end_to_end = stage_of(body, "end-to-end")
    assert (end_to_end["n_a"], quantile(end_to_end, "p50")["a_ms"]) == (60, 30.0)  # min = max
    assert end_to_end["verdict"] == "no significant change (p95, p99: too few spans)"
    assert body["headline"] == "No significant change in any stage."


def test_two_values_of_an_attribute_compare_spans_carrying_them(client, demo):
    # given one hour of spans of model.version v7 and v8, v8 twice as slow, and preprocess
    # spans without the attribute
    rng = np.random.default_rng(1)
    v7, v8 = {"model.version": "v7"}, {"model.version": "v8"}
    write_spans(demo.forward, rng.lognormal(np.log(6), 0.3, 400), DAY_A, SECOND, attributes=v7)
    write_spans(
        demo.forward, 2 * rng.lognormal(np.log(6), 0.3, 300), DAY_A, SECOND, attributes=v8, seed=1
    )
    write_spans(demo.forward, [1.0] * 50, DAY_A, SECOND, attributes={"model.version": "v9"}, seed=2)
    write_spans(demo.preprocess, np.full(200, 1.0), DAY_A, SECOND, seed=3)

    # when v7 is compared with v8 over that hour
    response = get(
        client,
        demo.member,
        {
            "pipeline": str(demo.pipeline.pk),
            "start": iso(DAY_A),
            "end": iso(DAY_A + dt.timedelta(hours=1)),
            "attr": "model.version",
            "a": "v7",
            "b": "v8",
        },
    )

    # then only spans with those values count, and the stage without the attribute is absent
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["mode"], body["attribute"]) == ("attribute", "model.version")
    assert (body["a"]["value"], body["a"]["spans"], body["b"]["value"], body["b"]["spans"]) == (
        "v7",
        400,
        "v8",
        300,
    )
    assert [stage["stage"]["name"] for stage in body["stages"]] == ["model_forward"]
    forward = stage_of(body, "model_forward")
    assert forward["change"] == "slower"
    assert body["headline"].startswith(
        "Significantly slower in B (model.version = v8): model_forward p"
    )


def test_values_can_be_compared_over_two_windows(client, demo):
    # given v7 on day A and v8, twice as slow, on day B
    rng = np.random.default_rng(4)
    write_spans(
        demo.forward,
        rng.lognormal(np.log(6), 0.3, 300),
        DAY_A,
        SECOND,
        attributes={"model.version": "v7"},
    )
    write_spans(
        demo.forward,
        2 * rng.lognormal(np.log(6), 0.3, 300),
        DAY_B,
        SECOND,
        attributes={"model.version": "v8"},
        seed=1,
    )

    # when v7 on day A is compared with v8 on day B
    body = get(
        client, demo.member, windows_query(demo, attr="model.version", a="v7", b="v8")
    ).json()

    # then each side is its value in its window
    assert (body["mode"], body["a"]["spans"], body["b"]["spans"]) == ("attribute", 300, 300)
    assert stage_of(body, "model_forward")["change"] == "slower"


def test_an_attribute_without_sketches_is_refused_with_how_to_add_it(client, demo):
    write_spans(demo.forward, np.full(100, 3.0), DAY_A, SECOND, attributes={"cache_hit": True})

    response = get(
        client,
        demo.member,
        {
            "pipeline": str(demo.pipeline.pk),
            "start": iso(DAY_A),
            "end": iso(DAY_B),
            "attr": "cache_hit",
            "a": "true",
            "b": "false",
        },
    )

    assert (response.status_code, response.json()) == (
        400,
        {
            "attr": [
                "cache_hit is not a cohort attribute of this pipeline, so its values have no "
                "sketches; an admin can add it to the pipeline's cohort attributes."
            ]
        },
    )


def test_an_outsider_gets_404_and_nothing_of_the_pipeline(client, demo):
    # given spans of our pipeline, and a member of another team
    write_spans(demo.forward, np.arange(1, 101), DAY_A, SECOND)
    outsider = make_user(make_team("theirs"))

    response = get(client, outsider, windows_query(demo))

    assert response.status_code == 404
    assert "fraud-scorer" not in response.content.decode()
    assert "model_forward" not in response.content.decode()


def test_an_anonymous_caller_is_refused(client, demo):
    response = client.get(URL, windows_query(demo))

    assert response.status_code == 401


def test_another_pipelines_spans_never_count(client, demo):
    # given a second pipeline of the same team with spans in the same windows
    other = Pipeline.objects.create(team=demo.team, service_name="recommender")
    other_stage = Stage.objects.create(pipeline=other, name="model_forward")
    write_spans(other_stage, np.arange(1, 101), DAY_A, SECOND)

    body = get(client, demo.member, windows_query(demo)).json()

    assert (body["a"]["spans"], body["b"]["spans"], body["stages"]) == (0, 0, [])
    assert (
        body["headline"] == "Not enough data to compare: no stage has enough spans on both sides."
    )


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        pytest.param(
            {"a_end": None},
            {"a_end": ["Required to compare two windows."]},
            id="window-missing-end",
        ),
        pytest.param(
            {"a_end": iso(DAY_A - SECOND)},
            {"a_end": ["Must be after the window's start."]},
            id="window-backwards",
        ),
        pytest.param(
            {"b_end": iso(DAY_B + dt.timedelta(days=40))},
            {"b_end": ["A window may span at most 31 days."]},
            id="window-too-long",
        ),
        pytest.param(
            {"start": iso(DAY_A)},
            {"start": ["Give one shared window (start, end) or two (a_start…b_end), not both."]},
            id="both-kinds-of-window",
        ),
        pytest.param(
            {"attr": "model.version"},
            {
                "a": ["Required to compare two values of an attribute."],
                "b": ["Required to compare two values of an attribute."],
            },
            id="attribute-without-values",
        ),
        pytest.param(
            {"a_end": iso(DAY_A + SECOND)},
            {"a_end": ["A window must hold a whole minute."]},
            id="window-under-a-minute",
        ),
        pytest.param(
            {"pipeline": "fraud-scorer"},
            {"pipeline": ["A valid integer is required."]},
            id="pipeline",
        ),
        pytest.param(
            {"a_start": "yesterday"},
            {
                "a_start": [
                    "Datetime has wrong format. Use one of these formats instead: "
                    "YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z]."
                ]
            },
            id="not-a-time",
        ),
    ],
)
def test_invalid_windows_get_400_with_an_error_per_field(client, demo, params, errors):
    query = {k: v for k, v in {**windows_query(demo), **params}.items() if v is not None}

    response = get(client, demo.member, query)

    assert response.status_code == 400
    assert response.json() == errors


def test_an_attribute_comparison_needs_two_different_values(client, demo):
    query = {
        "pipeline": str(demo.pipeline.pk),
        "start": iso(DAY_A),
        "end": iso(DAY_B),
        "attr": "model.version",
        "a": "v7",
        "b": "v7",
    }

    response = get(client, demo.member, query)

    assert (response.status_code, response.json()) == (400, {"b": ["Must differ from a."]})


def test_nothing_to_compare_lists_every_missing_field(client, demo):
    response = get(client, demo.member, {"pipeline": str(demo.pipeline.pk)})

    assert response.status_code == 400
    assert set(response.json()) == {"a_start", "a_end", "b_start", "b_end"}


def test_the_schema_documents_the_compare_endpoint(client, demo):
    client.force_login(demo.member)

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()

    operation = schema["paths"]["/api/compare/"]["get"]
    assert operation["operationId"] == "compare"
    assert {p["name"] for p in operation["parameters"]} == {
        "pipeline",
        "a_start",
        "a_end",
        "b_start",
        "b_end",
        "start",
        "end",
        "attr",
        "a",
        "b",
    }
    assert set(operation["responses"]) == {"200", "400", "404"}
    stage = schema["components"]["schemas"]["StageComparison"]["properties"]
    assert {"n_a", "n_b", "quantiles", "significant", "verdict"} <= set(stage)
    quantile_fields = schema["components"]["schemas"]["QuantileDelta"]["properties"]
    assert {"a_ms", "b_ms", "delta_ms", "delta_pct", "ci_low_ms", "ci_high_ms"} <= set(
        quantile_fields
    )


def test_the_page_lists_only_my_teams_pipelines(client, demo):
    Pipeline.objects.create(team=make_team("theirs"), service_name="their-secret-service")
    client.force_login(demo.member)

    response = client.get("/compare/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "fraud-scorer (production)" in page
    assert "their-secret-service" not in page


def test_the_page_sends_anonymous_visitors_to_log_in(client):
    response = client.get("/compare/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")

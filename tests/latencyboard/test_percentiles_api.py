"""Tests for the percentiles API: figures against numpy on known data, nulls, scoping, schema."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pytest
from django.contrib.auth.models import AbstractBaseUser
from rest_framework.renderers import JSONRenderer

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.renderers import OrjsonRenderer
from latencyboard.rollups.models import Resolution, Rollup
from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.sketches.sketch import Sketch, merge_many
from latencyboard.teams.models import Team
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
HOURS = 3
STAGE_NAMES = ("preprocess", "model_forward", "postprocess")
# A value on a bucket boundary can land in the neighbouring bucket through float rounding in
# log(), ~1e-15 relative beyond the bound (see test_sketch).
BOUND = RELATIVE_ERROR * (1 + 1e-9)


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def url(pipeline_id: int) -> str:
    return f"/api/pipelines/{pipeline_id}/percentiles/"


@dataclass
class Series:
    """What went into one stage's rollup rows, to compare the API against."""

    values: list[np.ndarray] = field(default_factory=list)  # one array per row
    errors: list[int] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list)

    def rows(self, first: int, last: int) -> tuple[np.ndarray, int, list[bytes]]:
        return (
            np.concatenate(self.values[first:last]),
            sum(self.errors[first:last]),
            self.blobs[first:last],
        )


@dataclass
class Dataset:
    team: Team
    pipeline: Pipeline
    stages: list[Stage]
    member: AbstractBaseUser
    series: dict[int | None, Series]  # by stage id, None = end-to-end


def add_rows(
    pipeline: Pipeline,
    stage: Stage | None,
    resolution: Resolution,
    first: dt.datetime,
    buckets: int,
    rng: np.random.Generator,
) -> Series:
    """Rollup rows of seeded log-normal latencies, as the rollup worker would store them."""
    length = dt.timedelta(minutes=1) if resolution == Resolution.MINUTE else dt.timedelta(hours=1)
    median = 5.0 + 20.0 * rng.random()
    series = Series()
    rows = []
    for index in range(buckets):
        values = rng.lognormal(np.log(median), 0.8, int(rng.integers(20, 120)))
        errors = int(rng.binomial(values.size, 0.03))
        series.values.append(values)
        series.errors.append(errors)
        series.blobs.append(Sketch.from_values(values).to_bytes())
        rows.append(
            Rollup(
                team=pipeline.team,
                pipeline=pipeline,
                stage=stage,
                resolution=resolution,
                bucket_start=first + index * length,
                count=values.size,
                error_count=errors,
                sum_ms=float(values.sum()),
                min_ms=float(values.min()),
                max_ms=float(values.max()),
                sketch=series.blobs[-1],
            )
        )
    Rollup.objects.bulk_create(rows)
    return series


@pytest.fixture
def dataset() -> Dataset:
    """Three hours of minute rows from T0 for three stages and end-to-end."""
    rng = np.random.default_rng(20260302)
    team = make_team("ours")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer", environment="prod")
    stages = [Stage.objects.create(pipeline=pipeline, name=name) for name in STAGE_NAMES]
    series: dict[int | None, Series] = {
        stage.id: add_rows(pipeline, stage, Resolution.MINUTE, T0, HOURS * 60, rng)
        for stage in stages
    }
    series[None] = add_rows(pipeline, None, Resolution.MINUTE, T0, HOURS * 60, rng)
    return Dataset(team, pipeline, stages, make_user(team), series)


def get_percentiles(client, dataset: Dataset, **params: str) -> dict:
    client.force_login(dataset.member)
    response = client.get(url(dataset.pipeline.pk), params)
    assert response.status_code == 200, response.content
    return response.json()


def test_hourly_p99_is_the_merge_of_the_minutes_and_within_1pct_of_numpy(client, dataset):
    # given three hours of minute rows; when asking for hourly p50 and p99 of three stages
    stage_ids = [stage.pk for stage in dataset.stages]
    body = get_percentiles(
        client,
        dataset,
        stages=",".join(map(str, stage_ids)),
        start=iso(T0),
        end=iso(T0 + dt.timedelta(hours=HOURS)),
        step="1h",
        q="0.5,0.99",
    )

    # then each point merges that hour's sixty minute sketches
    hours = [(60 * hour, 60 * (hour + 1)) for hour in range(HOURS)]
    expected = {
        stage_id: [dataset.series[stage_id].rows(*hour) for hour in hours] for stage_id in stage_ids
    }
    points = {series["stage"]["id"]: series["points"] for series in body["series"]}
    assert body["resolution"] == "minute"  # no hour rows were written
    assert body["step_seconds"] == 3600
    assert (body["method"], body["relative_error"]) == ("sketch", RELATIVE_ERROR)
    assert list(points) == stage_ids
    assert {sid: [p["t"] for p in points[sid]] for sid in stage_ids} == {
        sid: [iso(T0 + dt.timedelta(hours=hour)) for hour in range(HOURS)] for sid in stage_ids
    }
    assert {sid: [p["n"] for p in points[sid]] for sid in stage_ids} == {
        sid: [values.size for values, _, _ in expected[sid]] for sid in stage_ids
    }
    assert {sid: [p["p99"] for p in points[sid]] for sid in stage_ids} == {
        sid: [merge_many(blobs).quantile(0.99) for _, _, blobs in expected[sid]]
        for sid in stage_ids
    }
    assert {sid: [p["error_rate"] for p in points[sid]] for sid in stage_ids} == {
        sid: [errors / values.size for values, errors, _ in expected[sid]] for sid in stage_ids
    }
    # and is within the sketch's bound of numpy's exact lower-rank quantile of the samples
    api = np.array([[p[key] for p in points[sid]] for sid in stage_ids for key in ("p50", "p99")])
    exact = np.array(
        [
            [np.quantile(values, q, method="lower") for values, _, _ in expected[sid]]
            for sid in stage_ids
            for q in (0.5, 0.99)
        ]
    )
    assert np.max(np.abs(api - exact) / exact) <= BOUND
    means = np.array([[p["mean_ms"] for p in points[sid]] for sid in stage_ids])
    exact_means = np.array([[v.mean() for v, _, _ in expected[sid]] for sid in stage_ids])
    np.testing.assert_allclose(means, exact_means, rtol=1e-12)


def test_summary_covers_the_whole_window_per_stage(client, dataset):
    body = get_percentiles(
        client,
        dataset,
        stages="end-to-end",
        start=iso(T0),
        end=iso(T0 + dt.timedelta(hours=HOURS)),
        step="15m",
        q="0.95,0.999",
    )

    values, errors, blobs = dataset.series[None].rows(0, HOURS * 60)
    summary = body["series"][0]["summary"]
    assert body["series"][0]["stage"] == {"id": None, "name": "end-to-end"}
    assert len(body["series"][0]["points"]) == HOURS * 4
    assert summary["n"] == values.size
    assert summary["error_rate"] == errors / values.size
    assert summary["p99.9"] == merge_many(blobs).quantile(0.999)
    exact = np.quantile(values, [0.95, 0.999], method="lower")
    assert np.max(np.abs(np.array([summary["p95"], summary["p99.9"]]) - exact) / exact) <= BOUND


def test_default_is_end_to_end_then_every_stage_with_the_five_dashboard_quantiles(client, dataset):
    body = get_percentiles(client, dataset, start=iso(T0), end=iso(T0 + dt.timedelta(hours=1)))

    assert [series["stage"] for series in body["series"]] == [
        {"id": None, "name": "end-to-end"},
        *({"id": stage.pk, "name": stage.name} for stage in dataset.stages),
    ]
    assert body["quantiles"] == [0.5, 0.9, 0.95, 0.99, 0.999]
    assert list(body["series"][0]["points"][0]) == [
        "t", "n", "error_rate", "mean_ms", "p50", "p90", "p95", "p99", "p99.9"
    ]  # fmt: skip
    assert body["pipeline"] == {"id": dataset.pipeline.pk, "name": "fraud-scorer (prod)"}


def test_buckets_without_spans_are_null_not_zero(client, dataset):
    # given data only from T0; when the window starts two hours earlier
    body = get_percentiles(
        client,
        dataset,
        stages=str(dataset.stages[0].pk),
        start=iso(T0 - dt.timedelta(hours=2)),
        end=iso(T0 + dt.timedelta(hours=1)),
        step="1h",
    )

    empty = {
        "n": 0, "error_rate": None, "mean_ms": None,
        "p50": None, "p90": None, "p95": None, "p99": None, "p99.9": None,
    }  # fmt: skip
    points = body["series"][0]["points"]
    assert [{k: v for k, v in p.items() if k != "t"} for p in points[:2]] == [empty, empty]
    assert points[2]["n"] == dataset.series[dataset.stages[0].pk].rows(0, 60)[0].size
    assert body["series"][0]["summary"]["n"] == points[2]["n"]


def test_a_stage_without_any_rows_has_a_null_summary(client, dataset):
    idle = Stage.objects.create(pipeline=dataset.pipeline, name="network")

    body = get_percentiles(
        client, dataset, stages=str(idle.pk), start=iso(T0), end=iso(T0 + dt.timedelta(hours=1))
    )

    assert body["series"][0]["summary"] == {
        "n": 0, "error_rate": None, "mean_ms": None,
        "p50": None, "p90": None, "p95": None, "p99": None, "p99.9": None,
    }  # fmt: skip


def test_rows_of_stages_not_in_the_answer_are_left_out_of_every_figure(client, dataset):
    # Given, besides the dataset, rows of our pipeline under a stage it does not list (as a
    # stage created between reading the stages and reading the rows would have)
    other = Pipeline.objects.create(team=dataset.team, service_name="recommender")
    stray = Stage.objects.create(pipeline=other, name="ranker")
    add_rows(dataset.pipeline, stray, Resolution.MINUTE, T0, 60, np.random.default_rng(7))
    window = {"start": iso(T0), "end": iso(T0 + dt.timedelta(hours=1)), "step": "1h"}

    # When every stage is asked for, which reads every row of the pipeline
    every = get_percentiles(client, dataset, **window)
    some = get_percentiles(client, dataset, stages=f"end-to-end,{dataset.stages[0].pk}", **window)

    # Then the stray rows count nowhere: the figures are those of the listed stages' rows
    counts = {series["stage"]["id"]: series["summary"]["n"] for series in every["series"]}
    assert counts == {sid: dataset.series[sid].rows(0, 60)[0].size for sid in dataset.series}
    assert every["series"][:2] == some["series"]


def test_where_minutes_have_expired_the_hour_rows_answer(client, dataset):
    # given hour rows for the ten days before T0, and minute rows only from T0 on
    rng = np.random.default_rng(7)
    stage = dataset.stages[0]
    older = add_rows(dataset.pipeline, stage, Resolution.HOUR, T0 - dt.timedelta(days=10), 240, rng)

    # when asking for 5-minute steps over the last day before T0 and the first hour after
    body = get_percentiles(
        client,
        dataset,
        stages=str(stage.pk),
        start=iso(T0 - dt.timedelta(days=1)),
        end=iso(T0 + dt.timedelta(hours=1)),
        step="5m",
        q="0.99",
    )

    # then the step widens to an hour, and hour rows answer up to T0, minute rows after
    points = body["series"][0]["points"]
    assert (body["resolution"], body["step_seconds"]) == ("hour", 3600)
    assert body["segments"] == [
        {"resolution": "hour", "start": iso(T0 - dt.timedelta(days=1)), "end": iso(T0)},
        {"resolution": "minute", "start": iso(T0), "end": iso(T0 + dt.timedelta(hours=1))},
    ]
    assert len(points) == 25
    assert points[0]["p99"] == merge_many(older.blobs[216:217]).quantile(0.99)
    assert points[-1]["n"] == dataset.series[stage.pk].rows(0, 60)[0].size


def test_compacted_hours_and_the_uncompacted_hour_are_each_counted_once(client, dataset):
    # given the first two hours compacted into hour rows, as the rollup worker does, while
    # their minute rows are still kept; the third hour exists only as minutes
    stage = dataset.stages[1]
    minutes = dataset.series[stage.pk]
    hours = []
    for hour in range(2):
        _, errors, blobs = minutes.rows(60 * hour, 60 * (hour + 1))
        merged = merge_many(blobs)
        hours.append(
            Rollup(
                team=dataset.team,
                pipeline=dataset.pipeline,
                stage=stage,
                resolution=Resolution.HOUR,
                bucket_start=T0 + dt.timedelta(hours=hour),
                count=merged.count,
                error_count=errors,
                sum_ms=merged.sum,
                min_ms=merged.min,
                max_ms=merged.max,
                sketch=merged.to_bytes(),
            )
        )
    Rollup.objects.bulk_create(hours)

    # when asking for hourly figures over the three hours
    body = get_percentiles(
        client,
        dataset,
        stages=str(stage.pk),
        start=iso(T0),
        end=iso(T0 + dt.timedelta(hours=HOURS)),
        step="1h",
        q="0.99",
    )

    # then hours one and two come from hour rows, hour three from minutes, none twice
    points = body["series"][0]["points"]
    assert [segment["resolution"] for segment in body["segments"]] == ["hour", "minute"]
    assert [point["n"] for point in points] == [
        minutes.rows(60 * hour, 60 * (hour + 1))[0].size for hour in range(HOURS)
    ]
    assert [point["p99"] for point in points] == [
        merge_many(minutes.rows(60 * hour, 60 * (hour + 1))[2]).quantile(0.99)
        for hour in range(HOURS)
    ]
    assert body["series"][0]["summary"]["n"] == minutes.rows(0, 60 * HOURS)[0].size


def test_outsider_gets_404_for_the_pipeline_exactly_as_for_a_missing_one(client, dataset):
    # given a member of another team
    outsider = make_user(make_team("theirs"))
    client.force_login(outsider)
    params = {"start": iso(T0), "end": iso(T0 + dt.timedelta(hours=1))}

    # when they ask for our pipeline, and for one that does not exist
    ours = client.get(url(dataset.pipeline.pk), params)
    missing = client.get(url(dataset.pipeline.pk + 1000), params)

    # then both are the same 404, with nothing about the pipeline in it
    assert (ours.status_code, missing.status_code) == (404, 404)
    assert ours.json() == missing.json()
    assert b"fraud-scorer" not in ours.content


def test_outsider_does_not_see_our_pipelines_in_the_list(client, dataset):
    theirs = make_team("theirs")
    Pipeline.objects.create(team=theirs, service_name="recommender")
    client.force_login(make_user(theirs))

    body = client.get("/api/pipelines/").json()

    assert [pipeline["name"] for pipeline in body] == ["recommender"]
    assert "fraud-scorer" not in str(body)
    assert "model_forward" not in str(body)


def test_member_lists_their_pipelines_with_stages_and_team(client, dataset):
    client.force_login(dataset.member)

    response = client.get("/api/pipelines/")

    assert response.status_code == 200
    assert response.json() == [
        {
            "id": dataset.pipeline.pk,
            "name": "fraud-scorer (prod)",
            "service_name": "fraud-scorer",
            "environment": "prod",
            "team": {
                "id": dataset.team.pk,
                "name": dataset.team.name,
                "slug": dataset.team.slug,
            },
            "stages": [
                {"id": stage.pk, "name": stage.name, "kind": "span", "definition": ""}
                for stage in dataset.stages
            ],
        }
    ]


def test_anonymous_visitor_is_refused_the_list(client, dataset):
    response = client.get("/api/pipelines/")

    assert response.status_code == 401
    assert b"fraud-scorer" not in response.content


def test_anonymous_visitor_is_refused_the_percentiles(client, dataset):
    response = client.get(url(dataset.pipeline.pk), {"window": "1h"})

    assert response.status_code == 401
    assert b"fraud-scorer" not in response.content


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"window": "401d"}, "window", "at most 400 days"),
        ({"window": "7d", "start": iso(T0)}, "window", "either window or start and end"),
        ({"start": iso(T0)}, "end", "start and end together"),
        ({"start": iso(T0), "end": iso(T0 - dt.timedelta(hours=1))}, "end", "end after it starts"),
        ({"start": "yesterday", "end": iso(T0)}, "start", "wrong format"),
        ({"window": "1x"}, "window", "Use seconds (300)"),
        ({"step": "7m"}, "step", "must divide an hour"),
        ({"step": "90m"}, "step", "must divide an hour"),
        ({"step": "fast"}, "step", "Use seconds (300)"),
        ({"window": "30d", "step": "1m"}, "step", "at most 5000"),
        ({"window": "7d", "step": "5m"}, "step", "at most 5000"),
        ({"q": "1.5"}, "q", "strictly between 0 and 1"),
        ({"q": "0"}, "q", "strictly between 0 and 1"),
        ({"q": "0.5,nan"}, "q", "strictly between 0 and 1"),
        ({"q": "p99"}, "q", "not a number"),
        ({"q": ",".join(f"0.{n}" for n in range(1, 10)) + ",0.95,0.99"}, "q", "At most 10"),
        ({"stages": "no_such_stage"}, "stages", "No stage no_such_stage (by id or name)"),
        ({"stages": "99999999999999999999"}, "stages", "No stage 99999999999999999999"),
        ({"stages": "x" * 101}, "stages", "neither a stage id, a stage name nor end-to-end"),
    ],
    ids=[
        "window-over-400-days",
        "window-and-start",
        "start-without-end",
        "end-before-start",
        "start-not-iso",
        "window-unit-unknown",
        "step-7m-does-not-divide-an-hour",
        "step-90m-straddles-hours",
        "step-not-a-duration",
        "too-many-points-minutes-for-a-month",
        "too-many-points-4-series-of-5m-for-a-week",
        "q-above-1",
        "q-zero",
        "q-nan",
        "q-not-a-number",
        "q-too-many",
        "stage-name-unknown",
        "stage-id-overflows-bigint",
        "stage-name-too-long",
    ],
)
def test_invalid_parameters_are_400_with_a_message_for_the_field(
    client, dataset, params, field, message
):
    client.force_login(dataset.member)

    response = client.get(url(dataset.pipeline.pk), params)

    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert message in response.json()[field][0]


def test_a_stage_of_another_pipeline_is_400_and_not_named(client, dataset):
    other = Pipeline.objects.create(team=make_team("theirs"), service_name="recommender")
    foreign = Stage.objects.create(pipeline=other, name="secret_ranker")
    client.force_login(dataset.member)

    response = client.get(url(dataset.pipeline.pk), {"stages": f"end-to-end,{foreign.pk}"})

    assert response.status_code == 400
    assert response.json() == {
        "stages": [f"No stage {foreign.pk} (by id or name) in this pipeline."]
    }


def test_window_ends_now_not_at_the_next_whole_step(client, dataset):
    before = dt.datetime.now(dt.UTC)

    body = get_percentiles(client, dataset, window="2h", step="1h", stages="end-to-end")

    after = dt.datetime.now(dt.UTC)
    end = dt.datetime.fromisoformat(body["end"])
    assert before <= end <= after
    assert body["step_seconds"] == 3600
    # and the last bucket, still filling, starts within the last hour
    last = dt.datetime.fromisoformat(body["series"][0]["points"][-1]["t"])
    assert end - dt.timedelta(hours=1) < last <= end


def test_openapi_schema_publishes_the_percentiles_endpoint(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()

    operation = schema["paths"]["/api/pipelines/{pipeline_id}/percentiles/"]["get"]
    assert {(p["name"], p["in"]) for p in operation["parameters"]} == {
        ("pipeline_id", "path"),
        ("stages", "query"),
        ("start", "query"),
        ("end", "query"),
        ("window", "query"),
        ("step", "query"),
        ("q", "query"),
        ("format", "query"),
    }
    assert set(operation["responses"]) == {"200", "400", "404"}
    response = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert response == {"$ref": "#/components/schemas/PercentilesAnswer"}
    assert "/api/pipelines/" in schema["paths"]


def test_rendered_keys_are_the_ones_the_schema_documents(client, dataset):
    schema = client.get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    body = get_percentiles(client, dataset, start=iso(T0), end=iso(T0 + dt.timedelta(hours=1)))

    series = body["series"][0]
    assert set(body) == set(schema["PercentileSeries"]["properties"])
    assert set(series) == set(schema["StageSeries"]["properties"])
    assert set(series["stage"]) == set(schema["SeriesStage"]["properties"])
    assert set(series["points"][0]) == set(schema["PercentilePoint"]["properties"])
    assert set(series["summary"]) == set(schema["PercentileSummary"]["properties"])


def test_the_body_is_the_json_drf_would_write_line_separators_escaped(client, dataset):
    # Given a stage whose name holds the two characters JavaScript strings may not
    stage = dataset.stages[0]
    stage.name = "pre\u2028process\u2029"
    stage.save()
    client.force_login(dataset.member)

    # When its percentiles are asked for, as JSON and as indented JSON
    params = {"stages": str(stage.pk), "start": iso(T0), "end": iso(T0 + dt.timedelta(hours=1))}
    compact = client.get(url(dataset.pipeline.pk), params)
    indented = client.get(
        url(dataset.pipeline.pk), params, HTTP_ACCEPT="application/json; indent=2"
    )

    # Then the name comes back escaped, and the indented body is DRF's own
    body = compact.json()
    assert compact["Content-Type"] == "application/json"
    assert body["series"][0]["stage"]["name"] == "pre\u2028process\u2029"
    assert b'"pre\\u2028process\\u2029"' in compact.content
    assert indented.content == JSONRenderer().render(body, "application/json; indent=2")


def test_orjson_renderer_writes_the_bytes_of_drf_json_renderer():
    data = {
        "name": "fraud-scorer (prod) \u2028 caf\u00e9",
        "n": 1234,
        "figures": [0.5, 12.125, None, 1e300, 0.1, 3.0],
        "nested": [{"t": "2026-03-02T09:00:00Z", "p99.9": 41.98}],
        "empty": {},
    }

    assert OrjsonRenderer().render(data) == JSONRenderer().render(data)
    assert OrjsonRenderer().render(None) == b""

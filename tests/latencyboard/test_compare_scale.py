"""Compare for a pipeline that is about 1% of a span table of millions: every span of each
side counts (n equals an independent SQL count) and a verdict is reached."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from django.db import connection

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.spans.partitions import DayPartition
from tests.factories import make_team, make_user
from tests.latencyboard.test_compare import get, iso, stage_of, write_spans

pytestmark = pytest.mark.django_db

DAY = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
A = DAY + dt.timedelta(hours=6, minutes=20)
B = A + dt.timedelta(minutes=10)
C = B + dt.timedelta(minutes=10)
WINDOW = dt.timedelta(minutes=10)
OTHER_SPANS = 2_000_000
REQUESTS = 2_300  # per window: a root, preprocess and model_forward each, ~1% of the table


def fill_with_other_spans(stage: Stage) -> None:
    """``OTHER_SPANS`` spans of another pipeline over the same day, generated server-side."""
    with connection.cursor() as cursor:
        cursor.execute(DayPartition(DAY.date()).create_sql())
        cursor.execute(
            """
            INSERT INTO spans_span (team_id, pipeline_id, stage_id, batch_id, trace_id, span_id,
                                    name, kind, status_code, start_time, duration_ns, is_root,
                                    attributes)
            SELECT %s, %s, %s, 0, gen_random_uuid(), n, 'other', 1, 0,
                   %s::timestamptz + n * interval '40 milliseconds', 1000000 + n %% 7919, false,
                   '{}'::jsonb
            FROM generate_series(1, %s) AS n
            """,
            [stage.pipeline.team_id, stage.pipeline_id, stage.pk, DAY, OTHER_SPANS],
        )


def write_window(stages: dict[str, Stage], start: dt.datetime, forward_factor: float, seed: int):
    rng = np.random.default_rng(seed)
    step = WINDOW / REQUESTS
    forward = forward_factor * rng.lognormal(np.log(6.0), 0.3, REQUESTS)
    preprocess = rng.lognormal(np.log(1.5), 0.4, REQUESTS)
    write_spans(stages["predict"], forward + preprocess + 0.5, start, step, is_root=True, seed=seed)
    write_spans(stages["preprocess"], preprocess, start, step, seed=seed + 1)
    write_spans(stages["model_forward"], forward, start, step, seed=seed + 2)


def sql_counts(pipeline: Pipeline, start: dt.datetime) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT CASE WHEN is_root THEN 'end-to-end' ELSE name END, count(*) FROM spans_span
            WHERE pipeline_id = %s AND start_time >= %s AND start_time < %s GROUP BY 1
            """,
            [pipeline.pk, start, start + WINDOW],
        )
        return dict(cursor.fetchall())


@pytest.fixture
def small_pipeline():
    team = make_team("ours")
    other = Pipeline.objects.create(team=make_team("big"), service_name="firehose")
    fill_with_other_spans(Stage.objects.create(pipeline=other, name="other"))
    pipeline = Pipeline.objects.create(team=team, service_name="recommender")
    stages = {
        name: Stage.objects.create(pipeline=pipeline, name=name)
        for name in ("predict", "preprocess", "model_forward")
    }
    return pipeline, stages, make_user(team)


def windows(pipeline: Pipeline, b_start: dt.datetime) -> dict[str, str]:
    return {
        "pipeline": str(pipeline.pk),
        "a_start": iso(A),
        "a_end": iso(A + WINDOW),
        "b_start": iso(b_start),
        "b_end": iso(b_start + WINDOW),
    }


def test_a_one_percent_pipeline_counts_every_span_and_reaches_a_verdict(client, small_pipeline):
    # given a pipeline with ~1% of a table of millions of spans: window B like A, window C
    # with model_forward 30% slower (the table is filled once for both questions: it is
    # what takes the time)
    pipeline, stages, member = small_pipeline
    write_window(stages, A, 1.0, seed=1)
    write_window(stages, B, 1.0, seed=2)
    write_window(stages, C, 1.3, seed=3)

    # when A is compared with B
    body = get(client, member, windows(pipeline, B)).json()

    # then each side's n is the SQL count of its spans, stage by stage, every stage has
    # enough data for a verdict on every quantile, and there is no change
    for side, start in (("n_a", A), ("n_b", B)):
        counts = sql_counts(pipeline, start)
        for name in ("end-to-end", "preprocess", "model_forward"):
            assert stage_of(body, name)[side] == counts[name], (side, name)
    for stage in body["stages"]:
        assert all(q["enough_data"] for q in stage["quantiles"]), stage["stage"]["name"]
    assert body["headline"] == "No significant change in any stage."

    # and when A is compared with C, model_forward is significantly slower, and named
    body = get(client, member, windows(pipeline, C)).json()
    forward = stage_of(body, "model_forward")
    assert (forward["change"], forward["significant"]) == ("slower", True)
    assert forward["verdict"].startswith("model_forward p")
    assert body["headline"].startswith("Significantly slower in B: model_forward p")
    assert stage_of(body, "preprocess")["change"] == "none"

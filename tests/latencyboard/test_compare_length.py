"""Comparing two model versions of an LLM pipeline whose answers differ in length: the compare
API and page say how much of the change is length and how much per-token speed, from every
request's decode time and time per output token folded into rollups."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from latencyboard.pipelines.models import Pipeline, Stage
from tests.factories import make_team, make_user
from tests.latencyboard.test_compare import DAY_A, URL, iso, write_spans

pytestmark = pytest.mark.django_db

SECOND = dt.timedelta(seconds=1)


def requests(tokens_median: float, tpot_ms: float, n: int, seed: int):
    rng = np.random.default_rng(seed)
    tokens = np.clip(np.rint(tokens_median * np.exp(0.6 * rng.standard_normal(n))), 2, None)
    tpot = tpot_ms * np.exp(0.15 * rng.standard_normal(n))
    return (tokens - 1) * tpot, tpot, tokens


def test_a_model_with_longer_answers_and_slower_tokens_is_told_apart(client):
    # given an LLM pipeline's hour of requests: v2 answers ~60% longer, each token ~28% slower
    team = make_team("llm")
    pipeline = Pipeline.objects.create(team=team, service_name="vllm", environment="production")
    decode = Stage.objects.create(pipeline=pipeline, name="decode")
    tpot = Stage.objects.create(pipeline=pipeline, name="time_per_output_token")
    sides = {"v1": requests(160, 18.0, 600, 1), "v2": requests(260, 23.0, 600, 2)}
    for seed, (version, (decode_ms, tpot_ms, _)) in enumerate(sides.items()):
        attributes = {"model.version": version}
        write_spans(decode, decode_ms, DAY_A, SECOND, attributes=attributes, seed=2 * seed)
        write_spans(tpot, tpot_ms, DAY_A, SECOND, attributes=attributes, seed=2 * seed + 1)
    client.force_login(make_user(team))

    # when v1 is compared with v2
    body = client.get(
        URL,
        {
            "pipeline": str(pipeline.pk),
            "start": iso(DAY_A),
            "end": iso(DAY_A + dt.timedelta(hours=1)),
            "attr": "model.version",
            "a": "v1",
            "b": "v2",
        },
    ).json()

    # then decode is slower, and the answer says which part is length and which per-token speed
    split = body["length"]
    tokens_a, tokens_b = sides["v1"][2], sides["v2"][2]
    assert split["length_factor"] == pytest.approx(
        (tokens_b - 1).mean() / (tokens_a - 1).mean(), rel=0.03
    )
    assert split["speed_factor"] == pytest.approx(
        np.median(sides["v2"][1]) / np.median(sides["v1"][1]), rel=0.03
    )
    assert (split["n_a"], split["n_b"]) == (600, 600)
    assert "answers longer x1.6" in split["sentence"]
    assert "each token slower x1.3" in split["sentence"]

    # and the page shows it under the headline
    page = client.get(
        "/compare/",
        {"pipeline": str(pipeline.pk), "attr": "model.version", "a": "v1", "b": "v2"},
    )
    assert 'id="length-split"' in page.content.decode()


def test_a_pipeline_without_llm_figures_has_no_split(client):
    team = make_team("plain")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud", environment="production")
    forward = Stage.objects.create(pipeline=pipeline, name="model_forward")
    write_spans(forward, np.full(100, 5.0), DAY_A, SECOND)
    client.force_login(make_user(team))

    body = client.get(
        URL,
        {
            "pipeline": str(pipeline.pk),
            "a_start": iso(DAY_A),
            "a_end": iso(DAY_A + dt.timedelta(minutes=30)),
            "b_start": iso(DAY_A + dt.timedelta(minutes=30)),
            "b_end": iso(DAY_A + dt.timedelta(hours=1)),
        },
    ).json()

    assert body["length"] is None

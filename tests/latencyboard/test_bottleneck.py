"""The bottleneck class of a pipeline: the pure rule on given shares, then classes read from
stored stage-share rows (as the stage-share worker writes them) and the API."""

from __future__ import annotations

import datetime as dt

import pytest

from latencyboard.dashboards.bottleneck import (
    DOMINANT_SHARE,
    LEAD,
    MIN_REQUESTS,
    Bottleneck,
    Change,
    Classification,
    Share,
    classify,
    kind_of,
    last_change,
    parse_stage_kinds,
)
from latencyboard.dashboards.bottleneck_queries import bottlenecks
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import Resolution, StageShare
from tests.factories import make_stage_share, make_team, make_user

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
ENOUGH = 1000


def shares(**tail_and_all: tuple[float, float]) -> list[Share]:
    return [Share(stage, all_, tail) for stage, (tail, all_) in tail_and_all.items()]


@pytest.mark.parametrize(
    ("stages", "expected", "reason"),
    [
        pytest.param(
            shares(model_forward=(0.71, 0.58), feature_hydration=(0.2, 0.3), serialize=(0.09, 0.1)),
            Bottleneck.COMPUTE,
            "model_forward is 71% of the slowest 1% (58% of all requests)",
            id="model-forward-dominates-the-tail",
        ),
        pytest.param(
            shares(model_forward=(0.3, 0.6), feature_hydration=(0.6, 0.3), preprocess=(0.1, 0.1)),
            Bottleneck.FEATURE,
            "feature_hydration is 60% of the slowest 1% (30% of all requests)",
            id="the-tail-decides-over-all-requests",
        ),
        pytest.param(
            shares(queue_wait=(0.35, 0.55), model_forward=(0.35, 0.25), postprocess=(0.3, 0.2)),
            Bottleneck.QUEUE,
            "queue_wait is 55% of all requests (35% of the slowest 1%)",
            id="all-requests-decide-when-the-tail-is-split",
        ),
        pytest.param(
            shares(network=(0.3, 0.3), serialize=(0.25, 0.2), model_forward=(0.45, 0.5)),
            Bottleneck.NETWORK,
            "network and serialize are 55% of the slowest 1% (50% of all requests)",
            id="network-and-serialize-add-up",
        ),
        pytest.param(
            shares(model_forward=(0.5, 0.5), queue_wait=(0.4, 0.4), preprocess=(0.1, 0.1)),
            Bottleneck.COMPUTE,
            "model_forward is 50% of the slowest 1% (50% of all requests)",
            id="exactly-the-lead-dominates",
        ),
        pytest.param(
            shares(model_forward=(0.4, 0.4), queue_wait=(0.3, 0.3), preprocess=(0.3, 0.3)),
            Bottleneck.COMPUTE,
            "model_forward is 40% of the slowest 1% (40% of all requests)",
            id="exactly-the-dominant-share-dominates",
        ),
    ],
)
def test_a_dominant_kind_of_work_is_the_class(stages, expected, reason):
    result = classify(ENOUGH, stages)

    assert result.bottleneck == expected
    assert result.reason == reason


@pytest.mark.parametrize(
    "stages",
    [
        pytest.param(
            shares(model_forward=(0.45, 0.45), feature_hydration=(0.45, 0.45), network=(0.1, 0.1)),
            id="tie",
        ),
        pytest.param(
            shares(model_forward=(0.45, 0.45), queue_wait=(0.36, 0.36), serialize=(0.19, 0.19)),
            id="lead-below-ten-points",
        ),
        pytest.param(
            shares(
                model_forward=(0.35, 0.35),
                queue_wait=(0.2, 0.2),
                feature_hydration=(0.25, 0.25),
                network=(0.2, 0.2),
            ),
            id="leader-below-forty-percent",
        ),
    ],
)
def test_no_dominant_kind_is_balanced(stages):
    result = classify(ENOUGH, stages)

    assert result.bottleneck == Bottleneck.BALANCED
    assert result.label == "balanced"
    assert result.remedies == ()
    assert result.cohort is None


def test_balanced_names_the_largest_in_the_tail():
    result = classify(ENOUGH, shares(model_forward=(0.45, 0.45), queue_wait=(0.4, 0.4)))

    assert result.reason == (
        "no kind of work is 40% or more of the slowest 1% or of all requests and 10 points "
        "ahead of the next; the largest in the slowest 1% is model compute at 45%"
    )


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        pytest.param(0, Bottleneck.UNCLASSIFIED, id="no-requests"),
        pytest.param(MIN_REQUESTS - 1, Bottleneck.UNCLASSIFIED, id="one-below-the-minimum"),
        pytest.param(MIN_REQUESTS, Bottleneck.COMPUTE, id="the-minimum"),
    ],
)
def test_tiny_n_is_unclassified(requests, expected):
    result = classify(requests, shares(model_forward=(0.9, 0.9), queue_wait=(0.1, 0.1)))

    assert result.bottleneck == expected
    assert result.enough_data is (expected != Bottleneck.UNCLASSIFIED)


def test_tiny_n_says_so():
    result = classify(3, shares(model_forward=(1.0, 1.0)))

    assert result.reason == f"too little data: 3 requests, {MIN_REQUESTS} needed"
    assert result.share_tail is None


def test_no_stages_is_balanced_with_nothing_to_name():
    result = classify(ENOUGH, [])

    assert result.bottleneck == Bottleneck.BALANCED
    assert result.reason == (
        "no kind of work is 40% or more of the slowest 1% or of all requests and 10 points "
        "ahead of the next"
    )


def test_missing_stages_count_as_nothing():
    # given a pipeline with only a model stage and its root span's own time
    stages = shares(**{"model_forward": (0.92, 0.9), "POST /v1/score": (0.08, 0.1)})

    result = classify(ENOUGH, stages)

    assert result.bottleneck == Bottleneck.COMPUTE
    assert result.stages == ("model_forward",)
    assert (result.share_tail, result.share_all) == (0.92, 0.9)


def test_a_dominant_stage_of_no_known_kind_is_unclassified():
    result = classify(ENOUGH, shares(preprocess=(0.62, 0.5), model_forward=(0.38, 0.5)))

    assert result.bottleneck == Bottleneck.UNCLASSIFIED
    assert result.reason == (
        "preprocess is 62% of the slowest 1% and is not a model, feature, queue or network stage"
    )


def test_stages_of_no_known_kind_are_each_a_competitor_of_their_own():
    # preprocess (30%) and postprocess (25%) are no one kind: together they do not beat 45%
    stages = shares(model_forward=(0.45, 0.45), preprocess=(0.3, 0.3), postprocess=(0.25, 0.25))

    result = classify(ENOUGH, stages)

    assert result.bottleneck == Bottleneck.COMPUTE


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        pytest.param("model_forward", Bottleneck.COMPUTE, id="model_forward"),
        pytest.param("gpu-inference", Bottleneck.COMPUTE, id="gpu-inference"),
        pytest.param("feature_hydration", Bottleneck.FEATURE, id="feature_hydration"),
        pytest.param("FetchEmbeddings", None, id="camel-case-is-one-word"),
        pytest.param("queue_wait", Bottleneck.QUEUE, id="queue_wait"),
        pytest.param("serialize", Bottleneck.NETWORK, id="serialize"),
        pytest.param("grpc.call", Bottleneck.NETWORK, id="grpc-call"),
        pytest.param("preprocess", None, id="preprocess"),
        pytest.param("POST /v1/score", None, id="root-span"),
    ],
)
def test_kind_of_a_stage_from_the_words_of_its_name(stage, expected):
    assert kind_of(stage) == expected


def test_custom_stage_names_give_the_kind():
    # given stages whose names say nothing of their kind
    names = {"xgb_score": Bottleneck.COMPUTE, "profile_lookup": Bottleneck.FEATURE}
    stages = shares(xgb_score=(0.2, 0.3), profile_lookup=(0.7, 0.5), respond=(0.1, 0.2))

    result = classify(ENOUGH, stages, names)

    assert result.bottleneck == Bottleneck.FEATURE
    assert result.reason == "profile_lookup is 70% of the slowest 1% (50% of all requests)"
    assert result.label == "feature-bound"
    assert result.remedies == (
        "cache features close to the model",
        "prefetch features before the request needs them",
    )


def test_custom_names_win_over_the_words_of_the_name():
    assert kind_of("model_forward", {"model_forward": Bottleneck.NETWORK}) == Bottleneck.NETWORK


def test_thresholds_are_what_the_rule_says():
    assert (DOMINANT_SHARE, LEAD, MIN_REQUESTS) == (0.4, 0.1, 50)


# ----- when the class changed ---------------------------------------------------------------------


def hourly(*classes: tuple[Bottleneck, int]) -> list[tuple[dt.datetime, Classification]]:
    stage = {
        Bottleneck.COMPUTE: "model_forward",
        Bottleneck.FEATURE: "feature_hydration",
        Bottleneck.QUEUE: "queue_wait",
    }
    history = []
    for hour, (kind, requests) in enumerate(classes):
        result = classify(requests, shares(**{stage[kind]: (0.8, 0.8), "preprocess": (0.2, 0.2)}))
        history.append((T0 + hour * HOUR, result))
    return history


F, C, Q = Bottleneck.FEATURE, Bottleneck.COMPUTE, Bottleneck.QUEUE


@pytest.mark.parametrize(
    ("history", "current", "expected"),
    [
        pytest.param(
            hourly((F, 500), (F, 500), (C, 500), (C, 500)),
            C,
            Change(T0 + 2 * HOUR, F, C),
            id="a-change-held-two-hours",
        ),
        pytest.param(
            hourly((F, 500), (F, 500), (C, 500)),
            C,
            None,
            id="one-hour-of-a-new-class-is-no-change-yet",
        ),
        pytest.param(
            hourly((F, 500), (F, 500), (C, 500), (F, 500), (F, 500)),
            F,
            None,
            id="one-noisy-hour-is-no-change",
        ),
        pytest.param(
            hourly((Q, 500), (Q, 500), (C, 500), (C, 500), (F, 500), (F, 500)),
            F,
            Change(T0 + 4 * HOUR, C, F),
            id="the-latest-of-two-changes",
        ),
        pytest.param(
            hourly((F, 500), (F, 500), (C, 3), (F, 500)),
            F,
            None,
            id="a-quiet-hour-in-between-is-no-change",
        ),
        pytest.param(
            hourly((F, 500), (F, 500), (Q, 3), (C, 500), (C, 500)),
            C,
            Change(T0 + 3 * HOUR, F, C),
            id="change-across-a-quiet-hour",
        ),
        pytest.param(
            hourly((F, 500), (F, 500), (C, 500), (C, 500)),
            F,
            None,
            id="never-a-change-away-from-the-badges-class",
        ),
        pytest.param(
            hourly((F, 500), (C, 500), (C, 500)),
            C,
            None,
            id="no-change-from-a-class-that-never-held",
        ),
        pytest.param(hourly((C, 500)), C, None, id="one-bucket"),
        pytest.param([], C, None, id="no-history"),
    ],
)
def test_last_change(history, current, expected):
    assert last_change(history, current) == expected


# ----- from stored stage shares, and the API ------------------------------------------------------


def share_rows(
    pipeline: Pipeline, hour: dt.datetime, requests: int, **self_ms: tuple[float, float]
) -> list[StageShare]:
    """One hour row per stage, ``self_ms`` giving (all requests, slowest 1%) self time sums."""
    return [
        make_stage_share(
            Stage.objects.get_or_create(pipeline=pipeline, name=name)[0],
            Resolution.HOUR,
            hour,
            requests,
            own,
            tail_own,
        )
        for name, (own, tail_own) in self_ms.items()
    ]


@pytest.fixture
def stored() -> dict:
    """fraud-scorer: three hours feature-bound, then three compute-bound; recommender: one
    quiet hour; and another team's pipeline."""
    ours, theirs = make_team("ours"), make_team("theirs")
    fraud = Pipeline.objects.create(team=ours, service_name="fraud-scorer")
    quiet = Pipeline.objects.create(team=ours, service_name="recommender")
    rows = []
    for hour in range(3):
        rows += share_rows(
            fraud,
            T0 + hour * HOUR,
            600,
            feature_hydration=(3000.0, 90.0),
            model_forward=(2000.0, 10.0),
        )
    for hour in range(3, 6):
        rows += share_rows(
            fraud,
            T0 + hour * HOUR,
            600,
            feature_hydration=(1000.0, 10.0),
            model_forward=(5000.0, 90.0),
        )
    rows += share_rows(quiet, T0, 7, model_forward=(70.0, 10.0))
    StageShare.objects.bulk_create(rows)
    return {
        "fraud": fraud,
        "quiet": quiet,
        "member": make_user(ours),
        "outsider": make_user(theirs),
    }


@pytest.mark.django_db
def test_class_of_the_window_and_when_it_changed(stored):
    found = bottlenecks([stored["fraud"], stored["quiet"]], T0, T0 + 6 * HOUR, HOUR)

    fraud = found[stored["fraud"].pk]
    # the slowest 1% split evenly (300 ms each), so all requests decide: 21,000 of 33,000 ms
    assert fraud.classification.bottleneck == Bottleneck.COMPUTE
    assert fraud.classification.requests == 3600
    assert fraud.classification.reason == (
        "model_forward is 64% of all requests (50% of the slowest 1%)"
    )
    assert fraud.change == Change(T0 + 3 * HOUR, Bottleneck.FEATURE, Bottleneck.COMPUTE)
    quiet = found[stored["quiet"].pk]
    assert quiet.classification.bottleneck == Bottleneck.UNCLASSIFIED
    assert quiet.change is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("step", "change"),
    [
        pytest.param(
            HOUR,
            Change(T0 + 3 * HOUR, Bottleneck.FEATURE, Bottleneck.COMPUTE),
            id="three-hours-of-each",
        ),
        pytest.param(
            6 * HOUR,
            None,
            id="six-hours-anchored-at-midnight-one-bucket-of-each-is-no-change-yet",
        ),
        pytest.param(24 * HOUR, None, id="one-day-is-one-bucket"),
    ],
)
def test_longer_steps_sum_their_hours(stored, step, change):
    found = bottlenecks([stored["fraud"]], T0, T0 + 6 * HOUR, step)

    assert found[stored["fraud"].pk].change == change
    assert found[stored["fraud"].pk].classification.bottleneck == Bottleneck.COMPUTE


@pytest.mark.django_db
def test_a_window_before_the_change_has_the_old_class(stored):
    found = bottlenecks([stored["fraud"]], T0, T0 + 3 * HOUR, HOUR)

    assert found[stored["fraud"].pk].classification.bottleneck == Bottleneck.FEATURE
    assert found[stored["fraud"].pk].change is None


@pytest.mark.django_db
def test_bottleneck_api(client, stored):
    client.force_login(stored["member"])

    response = client.get(
        f"/api/pipelines/{stored['fraud'].pk}/bottleneck/",
        {"start": "2026-03-02T09:00:00Z", "end": "2026-03-02T15:00:00Z", "step": "3600"},
    )

    assert response.status_code == 200
    assert response.json() == {
        "start": "2026-03-02T09:00:00Z",
        "end": "2026-03-02T15:00:00Z",
        "step_seconds": 3600,
        "bottleneck": "compute",
        "label": "compute-bound",
        "requests": 3600,
        "stages": ["model_forward"],
        "share_tail": 0.5,
        "share_all": 21000 / 33000,
        "decided_by": "all",
        "reason": "model_forward is 64% of all requests (50% of the slowest 1%)",
        "remedies": ["batch requests on the accelerator", "quantize or distil the model"],
        "change": {
            "at": "2026-03-02T12:00:00Z",
            "before": "feature",
            "after": "compute",
            "before_label": "feature-bound",
            "after_label": "compute-bound",
        },
    }


@pytest.mark.django_db
def test_bottleneck_api_hides_another_teams_pipeline(client, stored):
    client.force_login(stored["outsider"])

    response = client.get(
        f"/api/pipelines/{stored['fraud'].pk}/bottleneck/",
        {"start": "2026-03-02T09:00:00Z", "end": "2026-03-02T15:00:00Z"},
    )

    assert response.status_code == 404
    assert b"fraud-scorer" not in response.content
    assert b"compute" not in response.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [
        pytest.param({"start": "2026-03-02T09:00:00Z"}, "end", id="missing-end"),
        pytest.param(
            {"start": "2026-03-01T00:00:00Z", "end": "2026-03-03T00:00:00Z", "step": "300"},
            "step",
            id="minute-step-over-more-than-a-day",
        ),
        pytest.param(
            {"start": "2025-03-01T00:00:00Z", "end": "2026-03-01T00:00:00Z", "step": "3600"},
            "step",
            id="too-many-steps",
        ),
        pytest.param(
            {"start": "2026-03-02T09:00:00Z", "end": "2026-03-02T15:00:00Z", "step": "420"},
            "step",
            id="odd-step",
        ),
    ],
)
def test_bottleneck_api_rejects_bad_parameters(client, stored, query, field):
    client.force_login(stored["member"])

    response = client.get(f"/api/pipelines/{stored['fraud'].pk}/bottleneck/", query)

    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.django_db
def test_bottleneck_api_is_in_the_schema(client, stored):
    client.force_login(stored["member"])

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()

    operation = schema["paths"]["/api/pipelines/{pipeline_id}/bottleneck/"]["get"]
    assert operation["operationId"] == "pipeline_bottleneck"
    assert {p["name"] for p in operation["parameters"]} >= {"start", "end", "step", "pipeline_id"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", {}, id="empty"),
        pytest.param(
            "xgb_score=compute, profile_lookup = feature,",
            {"xgb_score": Bottleneck.COMPUTE, "profile_lookup": Bottleneck.FEATURE},
            id="spaces-and-a-trailing-comma",
        ),
    ],
)
def test_parse_stage_kinds(text, expected):
    assert parse_stage_kinds(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("xgb_score", id="no-kind"),
        pytest.param("=compute", id="no-stage"),
        pytest.param("xgb_score=balanced", id="not-a-kind-of-work"),
    ],
)
def test_parse_stage_kinds_rejects_what_is_not_stage_and_kind(text):
    with pytest.raises(ValueError, match="is not stage=kind"):
        parse_stage_kinds(text)


@pytest.mark.django_db
def test_stage_kinds_of_the_settings_classify_custom_names(stored, settings):
    # given a pipeline whose feature stage's name does not say so
    custom = Pipeline.objects.create(team=stored["fraud"].team, service_name="scorer")
    StageShare.objects.bulk_create(
        share_rows(custom, T0, 600, profile_lookup=(800.0, 90.0), xgb_score=(200.0, 10.0))
    )
    settings.BOTTLENECK_STAGE_KINDS = {"profile_lookup": Bottleneck.FEATURE}

    found = bottlenecks([custom], T0, T0 + HOUR, HOUR)

    assert found[custom.pk].classification.bottleneck == Bottleneck.FEATURE

"""The pipeline's stage rules page: members read it, team admins change it, all audited."""

from __future__ import annotations

import os
import time

import pytest
from django.utils import timezone

from audits.models import AuditEvent
from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.pipelines.models import DerivedStageRule, Pipeline, Stage
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def pipeline() -> Pipeline:
    return Pipeline.objects.create(team=make_team("ours"), service_name="vllm")


def url(pipeline: Pipeline) -> str:
    return f"/pipelines/{pipeline.pk}/stages/"


def test_members_see_the_presets_and_where_each_stage_comes_from(client, pipeline):
    client.force_login(make_user(pipeline.team))

    response = client.get(url(pipeline))

    page = response.content.decode()
    assert response.status_code == 200
    assert "attribute gen_ai.latency.time_in_model_prefill (s)" in page
    assert "events QUEUE_START → COMPUTE_START" in page
    assert 'id="toggle-presets"' not in page  # not an admin


def test_an_admin_adds_a_rule_that_replaces_the_presets_one_and_it_is_audited(client, pipeline):
    admin = make_user(pipeline.team, role=Role.ADMIN)
    client.force_login(admin)

    response = client.post(
        url(pipeline),
        {"action": "add", "stage": "queue", "attribute": "my.queue_ms", "unit": "ms"},
    )

    assert response.status_code == 302
    rule = DerivedStageRule.objects.get(pipeline=pipeline)
    assert rule.as_rule().source == "attribute my.queue_ms (ms)"
    event = AuditEvent.objects.get(action="pipeline.stage_rule_added")
    assert (event.subject_type, event.subject_id) == ("pipeline", str(pipeline.pk))
    assert (
        "replaced by this pipeline\N{RIGHT SINGLE QUOTATION MARK}s rule"
        in client.get(url(pipeline)).content.decode()
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"stage": "queue", "attribute": "a", "start_event": "E1", "end_event": "E2"},
        {"stage": "queue", "start_event": "E1"},
        {"stage": "queue"},
        {"stage": "time_to_first_token", "attribute": "a"},
    ],
    ids=["both-kinds", "one-event", "no-source", "a-measure"],
)
def test_a_rule_that_reads_nothing_sound_is_refused(client, pipeline, fields):
    client.force_login(make_user(pipeline.team, role=Role.ADMIN))

    response = client.post(url(pipeline), {"action": "add", "unit": "s", **fields})

    assert response.status_code == 400
    assert not DerivedStageRule.objects.exists()


@pytest.mark.parametrize("rule", ["\N{SUPERSCRIPT TWO}", "9" * 30, "", "x"])
def test_deleting_a_rule_by_no_rule_id_deletes_nothing(client, pipeline, rule):
    client.force_login(make_user(pipeline.team, role=Role.ADMIN))
    client.post(url(pipeline), {"action": "add", "stage": "queue", "attribute": "q", "unit": "ms"})

    response = client.post(url(pipeline), {"action": "delete", "rule": rule})

    assert response.status_code == 302
    assert DerivedStageRule.objects.filter(pipeline=pipeline).count() == 1


def test_a_member_who_is_no_admin_changes_nothing(client, pipeline):
    client.force_login(make_user(pipeline.team, role=Role.VIEWER))

    response = client.post(url(pipeline), {"action": "presets", "presets": "off"})

    assert response.status_code == 403
    pipeline.refresh_from_db()
    assert pipeline.stage_presets is True
    assert not AuditEvent.objects.filter(action__startswith="pipeline.").exists()


def test_an_outsider_finds_no_such_pipeline(client, pipeline):
    client.force_login(make_user(make_team("theirs"), role=Role.ADMIN))

    assert client.get(url(pipeline)).status_code == 404
    assert client.post(url(pipeline), {"action": "presets", "presets": "off"}).status_code == 404


def _vllm_span() -> DecodedSpan:
    start = time.time_ns() - 10**9
    return DecodedSpan(
        trace_id=os.urandom(16),
        span_id=os.urandom(8),
        parent_span_id=None,
        name="llm_request",
        kind=2,
        start_ns=start,
        end_ns=start + 10**8,
        status_code=0,
        status_message="",
        service_name="vllm",
        environment="",
        stage=None,
        attributes={"gen_ai.latency.time_in_queue": 0.01, "gen_ai.usage.completion_tokens": 9},
        dropped_attributes=0,
    )


@pytest.mark.django_db(transaction=True)
def test_with_presets_off_a_vllm_span_is_one_stage_again(client, pipeline):
    # given an admin who turns the presets off
    client.force_login(make_user(pipeline.team, role=Role.ADMIN))
    client.post(url(pipeline), {"action": "presets", "presets": "off"})

    # when a vLLM span arrives
    writer = SpanWriter(conninfo(), max_connections=1)
    try:
        writer.write(
            pipeline.team_id,
            [_vllm_span()],
            rejected=0,
            protocol="grpc",
            received_at=timezone.now(),
        )
    finally:
        writer.close()

    # then it is its own only stage, and the change was audited
    assert list(Stage.objects.filter(pipeline=pipeline).values_list("name", flat=True)) == [
        "llm_request"
    ]
    assert AuditEvent.objects.get(action="pipeline.presets_set").detail == {"presets": False}

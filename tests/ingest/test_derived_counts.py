"""What the writer counts and stores of spans with derived stages."""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest

from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter, WriteResult
from latencyboard.db import conninfo
from latencyboard.pipelines.models import DerivedStageRule, Pipeline
from latencyboard.spans.models import IngestBatch, Span
from tests.factories import make_team

pytestmark = pytest.mark.django_db(transaction=True)


def _llm_span(attributes: dict[str, object]) -> DecodedSpan:
    start = time.time_ns() - 10**9
    return DecodedSpan(
        trace_id=os.urandom(16),
        span_id=os.urandom(8),
        parent_span_id=None,
        name="llm_request",
        kind=2,
        start_ns=start,
        end_ns=start + 500_000_000,
        status_code=0,
        status_message="",
        service_name="vllm",
        environment="production",
        stage=None,
        attributes=attributes,
        dropped_attributes=0,
    )


def _write(team_id: int, spans: list[DecodedSpan]) -> WriteResult:
    writer = SpanWriter(conninfo(), max_connections=1)
    try:
        return writer.write(
            team_id, spans, rejected=0, protocol="test", received_at=dt.datetime.now(dt.UTC)
        )
    finally:
        writer.close()


def test_derived_rows_are_not_counted_as_stored_or_duplicate_spans():
    # given one vLLM span with three stage durations and a TTFT
    team = make_team()
    span = _llm_span(
        {
            "gen_ai.latency.time_in_queue": 0.01,
            "gen_ai.latency.time_in_model_prefill": 0.02,
            "gen_ai.latency.time_in_model_decode": 0.3,
            "gen_ai.latency.time_to_first_token": 0.03,
        }
    )

    # when it is written, and written again (a retry)
    first = _write(team.id, [span])
    again = _write(team.id, [span])

    # then one span was stored, then one duplicate, as the ingest batches say too; the
    # derived rows are stored once beside it
    assert (first.stored, first.duplicates) == (1, 0)
    assert (again.stored, again.duplicates) == (0, 1)
    batches = IngestBatch.objects.filter(team_id=team.id).order_by("id")
    assert [(b.stored_spans, b.duplicate_spans) for b in batches] == [(1, 0), (0, 1)]
    assert Span.objects.filter(team_id=team.id).count() == 1 + 4


def test_of_two_rules_for_one_stage_the_first_that_finds_it_wins():
    # given a pipeline with two rules for stage queue, and a span that has both attributes
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="vllm", environment="production")
    for position, attribute in enumerate(("my.queue_ms", "other.queue_ms")):
        DerivedStageRule.objects.create(
            pipeline=pipeline, position=position, stage="queue", attribute=attribute, unit="ms"
        )
    span = _llm_span({"my.queue_ms": 12, "other.queue_ms": 40})

    # when it is written
    result = _write(team.id, [span])

    # then it was new (no duplicate), and its queue is the first rule's, stored once
    assert (result.stored, result.duplicates) == (1, 0)
    (queue,) = Span.objects.filter(team_id=team.id, name="queue")
    assert queue.duration_ns == 12_000_000


def test_a_pipeline_refused_at_the_cap_is_remembered_for_the_directory_ttl():
    # given a team at its cap of one pipeline, and a writer that refused a second one
    team = make_team()
    writer = SpanWriter(conninfo(), max_connections=1, max_pipelines=1)
    now = dt.datetime.now(dt.UTC)
    first = _llm_span({})
    second = first._replace(span_id=os.urandom(8), service_name="other")
    try:
        assert writer.write(team.id, [first], rejected=0, protocol="test", received_at=now).stored
        assert writer.write(team.id, [second], rejected=0, protocol="test", received_at=now).refused

        # when the team makes room, and the refused pipeline's spans come again at once
        Pipeline.objects.filter(team=team).delete()
        again = writer.write(team.id, [second], rejected=0, protocol="test", received_at=now)
    finally:
        writer.close()

    # then they are refused from the writer's memory, without asking the database again
    assert (again.stored, again.refused) == (0, 1)


def test_a_derived_stage_after_midnight_of_a_late_span_is_stored():
    # given a vLLM span of ten days ago that crosses midnight, its prefill starting after it
    team = make_team()
    midnight = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = int((midnight - dt.timedelta(days=10)).timestamp()) * 10**9 - 200_000_000
    span = _llm_span(
        {"gen_ai.latency.time_in_queue": 0.3, "gen_ai.latency.time_in_model_prefill": 0.1}
    )._replace(start_ns=start, end_ns=start + 500_000_000)

    # when it is written (late: no partition of those days yet)
    result = _write(team.id, [span])

    # then the span and both stages are stored
    assert result.stored == 1
    names = Span.objects.filter(team_id=team.id).values_list("name", flat=True)
    assert sorted(names) == ["llm_request", "prefill", "queue"]


def test_a_span_of_days_whose_stage_starts_on_a_middle_day_is_stored():
    # given a late span of three days whose prefill starts on the day between its first and
    # last (after a queue of 18 hours)
    team = make_team()
    midnight = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = int((midnight - dt.timedelta(days=20, hours=-12)).timestamp()) * 10**9
    span = _llm_span(
        {"gen_ai.latency.time_in_queue": 64_800.0, "gen_ai.latency.time_in_model_prefill": 0.1}
    )._replace(start_ns=start, end_ns=start + 3 * 86_400 * 10**9)

    # when it is written
    result = _write(team.id, [span])

    # then the span is stored
    assert result.stored == 1
    assert Span.objects.filter(team_id=team.id, name="llm_request").count() == 1

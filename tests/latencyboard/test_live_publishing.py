"""What a fold publishes to the live pages: real spans, a real fold, the real Redis layer."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection

from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.live.groups import pipeline_group, team_group
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import services, stage_share_services
from tests.factories import REQUEST_STAGES, make_requests, make_team

pytestmark = pytest.mark.django_db(transaction=True)

T0 = dt.datetime.combine(
    dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1), dt.time(10), tzinfo=dt.UTC
)
MINUTE = dt.timedelta(minutes=1)


@pytest.fixture
def writer(django_db_setup: None) -> Iterator[SpanWriter]:
    span_writer = SpanWriter(conninfo(), max_connections=2)
    yield span_writer
    span_writer.close()


def listen(*groups: str) -> str:
    layer = get_channel_layer()
    assert layer is not None
    channel = async_to_sync(layer.new_channel)()
    for group in groups:
        async_to_sync(layer.group_add)(group, channel)
    return channel


def heard(channel: str) -> list[dict[str, Any]]:
    """Every event sent to ``channel`` until none comes for a second."""
    layer = get_channel_layer()
    assert layer is not None

    async def drain() -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel), timeout=1)
            except TimeoutError:
                return events
            events.append(message["event"])

    return async_to_sync(drain)()


def raw_counts(pipeline: Pipeline) -> dict[tuple[str, str], int]:
    """Spans per (stage name, minute) from the raw rows; root spans count end to end too."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT name, to_char(minute, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), count(*) FROM (
                SELECT st.name, date_trunc('minute', s.start_time, 'UTC') AS minute
                FROM spans_span s JOIN pipelines_stage st ON st.id = s.stage_id
                WHERE s.pipeline_id = %(pipeline)s
                UNION ALL
                SELECT 'end-to-end', date_trunc('minute', start_time, 'UTC')
                FROM spans_span WHERE pipeline_id = %(pipeline)s AND is_root
            ) AS named GROUP BY 1, 2
            """,
            {"pipeline": pipeline.pk},
        )
        return {(stage, minute): n for stage, minute, n in cursor.fetchall()}


def test_a_fold_publishes_one_points_event_per_pipeline_and_one_rollup_event_per_team(writer):
    # given three committed ingest batches of two pipelines over two minutes, and a live page
    # of each pipeline and the team's overview listening
    team = make_team()
    for batch in (
        make_requests("recommender", 30, T0),
        make_requests("recommender", 20, T0 + MINUTE),
    ):
        writer.write(team.pk, batch, rejected=0, protocol="test", received_at=T0)
    writer.write(
        team.pk,
        make_requests("ranker", 10, T0 + MINUTE),
        rejected=0,
        protocol="test",
        received_at=T0,
    )
    recommender = Pipeline.objects.get(team=team, service_name="recommender")
    ranker = Pipeline.objects.get(team=team, service_name="ranker")
    pages = {p.pk: listen(pipeline_group(p.pk)) for p in (recommender, ranker)}
    overview = listen(team_group(team.pk))

    # when one fold runs
    services.fold_until_idle(lambda: T0 + dt.timedelta(minutes=5), seconds=60)

    # then each pipeline's page hears exactly one points event with every folded minute
    for pipeline, minutes in ((recommender, 2), (ranker, 1)):
        events = heard(pages[pipeline.pk])
        assert [e["type"] for e in events] == ["points"]
        event = events[0]
        assert event["pipeline"] == {"id": pipeline.pk, "name": str(pipeline)}
        assert event["step_seconds"] == 60
        assert event["quantiles"] == [0.5, 0.9, 0.95, 0.99, 0.999]
        assert [s["stage"]["name"] for s in event["series"]] == [
            "end-to-end",
            "predict",
            *REQUEST_STAGES,
        ]
        counts = {
            (s["stage"]["name"], p["t"]): p["n"]
            for s in event["series"]
            for p in s["points"]
            if p["n"]  # a stage without spans in a minute is a gap in its line
        }
        assert counts == raw_counts(pipeline)
        assert len(event["series"][0]["points"]) == minutes
        assert set(event["series"][0]["points"][0]) == {
            "t", "n", "error_rate", "mean_ms", "p50", "p90", "p95", "p99", "p99.9"
        }  # fmt: skip
    # and the overview hears one rollup event naming both
    assert heard(overview) == [{"type": "rollup", "pipelines": sorted([recommender.pk, ranker.pk])}]


def test_new_stage_shares_tell_the_pipeline_s_pages(writer):
    # given requests of a pipeline in a minute long past, the second version of its model
    team = make_team()
    spans = [
        span._replace(attributes={"model.version": "v2"})
        for span in make_requests("recommender", 10, T0)
    ]
    writer.write(team.pk, spans, rejected=0, protocol="test", received_at=T0)
    pipeline = Pipeline.objects.get(team=team)
    page = listen(pipeline_group(pipeline.pk))

    # when the stage shares of that minute are computed
    later = T0 + dt.timedelta(minutes=10)
    stage_share_services.compute_stage_shares(later, seconds=30)

    # then the page hears one event, and nothing when nothing is new
    assert heard(page) == [{"type": "stage_shares", "pipeline": pipeline.pk}]
    # (a new listener: a layer's channel is bound to the event loop it was first read in)
    again = listen(pipeline_group(pipeline.pk))
    stage_share_services.compute_stage_shares(later, seconds=30)
    assert heard(again) == []

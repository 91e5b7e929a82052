"""The span writer under concurrency: dictionary rows and spans stay consistent."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.storage import span_reads
from tests.factories import make_team

pytestmark = pytest.mark.django_db(transaction=True)


def _span(service: str, stage: str) -> DecodedSpan:
    start = time.time_ns() - 10**9
    return DecodedSpan(
        trace_id=os.urandom(16),
        span_id=os.urandom(8),
        parent_span_id=os.urandom(8),
        name=stage,
        kind=1,
        start_ns=start,
        end_ns=start + 5_000_000,
        status_code=0,
        status_message="",
        service_name=service,
        environment="production",
        stage=stage,
        attributes={"inference.stage": stage},
        dropped_attributes=0,
    )


def test_concurrent_first_sightings_of_pipelines_leave_no_dangling_ids():
    # given one writer shared by 8 threads, and 40 requests each naming pipelines and
    # stages nobody has seen yet, overlapping between requests
    team = make_team()
    writer = SpanWriter(conninfo(), max_connections=8)
    requests = [
        [_span(f"svc-{(i + j) % 10}", f"stage-{j % 4}") for j in range(20)] for i in range(40)
    ]

    # when they are written at the same time
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(
                pool.map(
                    lambda spans: writer.write(
                        team.id,
                        spans,
                        rejected=0,
                        protocol="test",
                        received_at=dt.datetime.now(dt.UTC),
                    ),
                    requests,
                )
            )
    finally:
        writer.close()

    # then every request was stored and every span points at a pipeline and stage that exist
    assert sum(r.stored for r in results) == 800
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*) FILTER (WHERE p.id IS NULL), count(*) FILTER (WHERE st.id IS NULL)
            FROM spans_span s
            LEFT JOIN pipelines_pipeline p ON p.id = s.pipeline_id
            LEFT JOIN pipelines_stage st ON st.id = s.stage_id AND st.pipeline_id = s.pipeline_id
            WHERE s.team_id = %s
            """,
            [team.id],
        )
        assert cursor.fetchone() == (0, 0)
        cursor.execute("SELECT count(*) FROM pipelines_pipeline WHERE team_id = %s", [team.id])
        assert cursor.fetchone() == (10,)


def test_partly_seen_request_stores_only_the_new_spans():
    # given a request already stored, and a retry carrying it plus two new spans
    team = make_team()
    writer = SpanWriter(conninfo(), max_connections=2)
    first = [_span("svc", "model_forward") for _ in range(3)]
    retry = [*first, _span("svc", "model_forward"), _span("svc", "serialize")]
    now = dt.datetime.now(dt.UTC)

    # when both are written
    try:
        original = writer.write(team.id, first, rejected=0, protocol="test", received_at=now)
        again = writer.write(team.id, retry, rejected=0, protocol="test", received_at=now)
    finally:
        writer.close()

    # then the retry stored exactly the two new spans
    assert (original.stored, original.duplicates) == (3, 0)
    assert (again.stored, again.duplicates) == (2, 3)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM spans_span WHERE team_id = %s", [team.id])
        assert cursor.fetchone() == (5,)


def test_pipeline_and_stage_ids_are_committed_before_other_threads_can_use_them():
    # given a writer's connection resolving a new pipeline and stage for the first time
    team = make_team()
    writer = SpanWriter(conninfo(), max_connections=1)
    try:
        with writer.pool.connection() as conn:
            pipeline_id = writer.directory.pipeline(conn, team.id, "svc-new", "")
            assert pipeline_id is not None
            stage_id = writer.directory.stage(conn, pipeline_id, "model_forward", cap=32)

            # then, while that connection is still held, another connection already sees both
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pipelines_stage s JOIN pipelines_pipeline p "
                    "ON p.id = s.pipeline_id WHERE p.id = %s AND s.id = %s",
                    [pipeline_id, stage_id],
                )
                assert cursor.fetchone() == (1,)
    finally:
        writer.close()


def test_a_span_reads_back_whole_from_its_template_resource_and_row():
    # given a span whose resource is shared with another and whose attribute overrides one
    team = make_team()
    resource = {"service.instance.id": str(uuid.uuid4()), "host.name": "gpu-7", "region": "eu"}
    span = _span("svc", "model_forward")._replace(
        attributes={"inference.stage": "model_forward", "region": "us", "tags": ["a"]},
        resource=resource,
    )
    sibling = _span("svc", "serialize")._replace(resource=resource)
    writer = SpanWriter(conninfo(), max_connections=1)

    # when it is written and read back as the waterfall reads spans
    try:
        writer.write(
            team.id,
            [span, sibling],
            rejected=0,
            protocol="test",
            received_at=dt.datetime.now(dt.UTC),
        )
    finally:
        writer.close()
    [row] = [
        row
        for row in span_reads.trace_spans([team.id], uuid.UUID(bytes=span.trace_id), 10)
        if row[2] == "model_forward"
    ]

    # then its name and whole attribute set come back, its own value winning, and the
    # resource is stored once
    assert json.loads(row[11]) == {
        "service.instance.id": resource["service.instance.id"],
        "host.name": "gpu-7",
        "region": "us",
        "inference.stage": "model_forward",
        "tags": ["a"],
    }
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM spans_resource WHERE attributes ->> 'service.instance.id' = %s",
            [resource["service.instance.id"]],
        )
        assert cursor.fetchone() == (1,)

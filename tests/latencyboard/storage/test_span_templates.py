"""Resources and span templates: stored once under a content hash, collisions refused."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from latencyboard.db import conninfo
from latencyboard.storage import span_templates

pytestmark = pytest.mark.django_db(transaction=True)


def _count(conn: psycopg.Connection, table: str, row_id: int) -> int:
    query = f"SELECT count(*) FROM {table} WHERE id = %s"  # noqa: S608 - test tables
    row = conn.execute(query, [row_id]).fetchone()
    assert row is not None
    return int(row[0])


def test_the_id_is_the_content_whatever_the_key_order():
    first = span_templates.Resource.of({"service.version": "2.1", "host.name": "gpu-7"})
    second = span_templates.Resource.of({"host.name": "gpu-7", "service.version": "2.1"})
    other = span_templates.Resource.of({"host.name": "gpu-8", "service.version": "2.1"})

    assert first.id == second.id != other.id
    assert span_templates.Template.of(first.id, "predict", {"a": 1}).id != (
        span_templates.Template.of(first.id, "predict", {"a": True}).id
    )


def test_storing_twice_stores_once():
    # given a resource seen nowhere else (the tables are shared by every test) and a template
    resource = span_templates.Resource.of({"service.instance.id": str(uuid.uuid4())})
    template = span_templates.Template.of(resource.id, "predict", {"model.version": "v8"})

    # when both are stored twice (two ingest processes seeing them first)
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        for _ in range(2):
            span_templates.ensure_resources(conn, [resource])
            span_templates.ensure_templates(conn, [template])

        # then each is stored once
        assert _count(conn, "spans_resource", resource.id) == 1
        assert _count(conn, "spans_spantemplate", template.id) == 1


def test_an_id_holding_other_content_is_refused():
    # given a resource stored under the id another content hashes to (content seen nowhere
    # else: a planted row stays for the tests after this one)
    resource = span_templates.Resource.of({"service.instance.id": str(uuid.uuid4())})
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO spans_resource (id, attributes) VALUES (%s, '{\"x\": 1}')",
            [resource.id],
        )

        # when that content is stored, then the collision is refused
        with pytest.raises(span_templates.TemplateCollision):
            span_templates.ensure_resources(conn, [resource])

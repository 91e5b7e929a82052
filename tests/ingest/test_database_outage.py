"""The database goes away under a running ingest server, then comes back."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from google.rpc.status_pb2 import Status

from latencyboard.local.embedded import EmbeddedPostgres, free_port
from tests.ingest.otlp import SpanSpec, export_request, post
from tests.support import PYTHON, ROOT, RunningProcess, start_process, stop_process, wait_until

PROTOBUF = "application/x-protobuf"


@dataclass
class OwnStack:
    postgres: EmbeddedPostgres
    ingest: RunningProcess
    url: str
    token: str


@pytest.fixture
def own_stack(services, scratch_dir: Path) -> Iterator[OwnStack]:
    """A PostgreSQL of this test's own (the suite's must stay up) with an ingest server on it."""
    data = scratch_dir
    postgres = EmbeddedPostgres(data / "pg", free_port(), log_path=data / "pg.log")
    postgres.start()
    env = {"DATABASE_URL": postgres.url, "REDIS_URL": services.redis_url, "PATH": "/usr/bin:/bin"}
    ingest = None
    try:
        subprocess.run(
            [PYTHON, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        token = subprocess.run(
            [
                PYTHON,
                "manage.py",
                "shell",
                "-c",
                "from latencyboard.teams.models import Team\n"
                "from latencyboard.teams.services import issue_ingest_token\n"
                "t = Team.objects.create(name='outage', slug='outage')\n"
                "print(issue_ingest_token(t, 'tests').plaintext)",
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()[-1]
        port = free_port()
        ingest = start_process(
            [PYTHON, "-m", "ingest", "--http-port", str(port), "--grpc-port", str(free_port())],
            env,
            data / "ingest.log",
            ready_port=port,
        )
        yield OwnStack(postgres, ingest, f"http://127.0.0.1:{port}/v1/traces", token)
    finally:
        if ingest is not None:
            stop_process(ingest)
        postgres.stop()


def _span_count(postgres: EmbeddedPostgres) -> int:
    with psycopg.connect(postgres.url) as conn:
        row = conn.execute("SELECT count(*) FROM spans_span").fetchone()
        assert row is not None
        return int(row[0])


def test_database_stopped_is_503_and_the_retried_batch_is_stored_once(own_stack: OwnStack):
    headers = {"content-type": PROTOBUF, "authorization": f"Bearer {own_stack.token}"}
    before = export_request(SpanSpec(), SpanSpec()).SerializeToString()
    during = export_request(SpanSpec(), SpanSpec(), SpanSpec()).SerializeToString()
    # given a server that has stored a first batch
    assert post(own_stack.url, before, headers).status == 200

    # when the database stops and a batch arrives
    own_stack.postgres.stop()
    refused = post(own_stack.url, during, headers)

    # then the client is told to retry later, in OTLP's terms
    assert refused.status == 503
    assert int(refused.headers["retry-after"]) >= 1
    assert Status.FromString(refused.body).code == 14  # UNAVAILABLE

    # when the database is back and the exporter retries (as it does on 503, after a pause)
    # until accepted
    own_stack.postgres.start()
    statuses: list[int] = []

    def accepted() -> bool:
        statuses.append(post(own_stack.url, during, headers).status)
        return statuses[-1] == 200

    wait_until(accepted, timeout=10, interval=0.5, message=lambda: f"answered {statuses}")

    # then the retried batch is stored exactly once, next to the first
    assert statuses[-1] == 200
    assert set(statuses) <= {200, 503}
    assert _span_count(own_stack.postgres) == 5
    assert "Traceback" not in own_stack.ingest.log()

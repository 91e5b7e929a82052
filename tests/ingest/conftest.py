from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from latencyboard.local.embedded import free_port
from tests.support import PYTHON, start_process, stop_process


@dataclass(frozen=True)
class IngestServer:
    http_port: int
    grpc_port: int

    @property
    def traces_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"


@pytest.fixture(scope="session")
def ingest_server(
    child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IngestServer]:
    """The real ingest process (HTTP + gRPC listeners) on the test database."""
    # A small body cap keeps the 413 tests cheap; a long retention admits the 2018 example;
    # a short body timeout, small in-flight and JSON caps and a short wait for room keep
    # test_http_listener.py quick.
    env = dict(
        child_env,
        INGEST_MAX_BODY_BYTES=str(4 * 1024 * 1024),
        RETENTION_DAYS="4000",
        INGEST_BODY_TIMEOUT_SECONDS="2",
        INGEST_MAX_INFLIGHT_BYTES=str(6 * 1024 * 1024),
        INGEST_MAX_JSON_BODY_BYTES=str(1024 * 1024),
        INGEST_ROOM_WAIT_SECONDS="1",
    )
    with running_ingest(env, tmp_path_factory.mktemp("ingest") / "ingest.log") as server:
        yield server


@contextmanager
def running_ingest(env: dict[str, str], log: Path) -> Iterator[IngestServer]:
    """A real ingest process with ``env``, on free ports, stopped at the end."""
    http_port, grpc_port = free_port(), free_port()
    running = start_process(
        [PYTHON, "-m", "ingest", "--http-port", str(http_port), "--grpc-port", str(grpc_port)],
        env,
        log,
        ready_port=http_port,
    )
    try:
        yield IngestServer(http_port, grpc_port)
    finally:
        stop_process(running)


@pytest.fixture(scope="session", autouse=True)
def _close_web_ingest_pool(django_db_setup: None) -> Iterator[None]:
    """The web app's /v1/traces keeps a connection pool; close it before the test DB is dropped."""
    yield
    from ingest.views import _service

    if _service.cache_info().currsize:
        _service().writer.close()
        _service.cache_clear()

"""The embedded PostgreSQL of ``make run`` and of every test process, started as a fresh
machine starts it."""

from __future__ import annotations

import os
import pwd
import secrets
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import psycopg
import pytest

from latencyboard.local.embedded import EmbeddedPostgres, free_port

only_as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="PostgreSQL runs as another system user only under root"
)


@pytest.fixture
def new_system_user() -> Iterator[str]:
    """A system user name that does not exist yet; deleted afterwards if it was created."""
    name = f"lbpg{secrets.token_hex(4)}"
    with pytest.raises(KeyError):
        pwd.getpwnam(name)
    yield name
    subprocess.run(["userdel", name], check=False, capture_output=True)


@only_as_root
def test_servers_started_at_once_as_root_share_one_new_system_user(
    scratch_dir: Path, new_system_user: str
) -> None:
    # given three servers, as three test processes of `make test` start them on a fresh
    # machine: under root, as a system user that does not exist yet
    servers = [
        EmbeddedPostgres(scratch_dir / f"pg{i}", free_port(), system_user=new_system_user)
        for i in range(3)
    ]
    together = threading.Barrier(len(servers))

    def start_ask_and_stop(server: EmbeddedPostgres) -> tuple[str, object]:
        # All in one thread: a server dies with the thread that started it.
        together.wait()
        server.start()
        try:
            assert server.process is not None
            user = psutil.Process(server.process.pid).username()
            with psycopg.connect(server.url) as conn:
                return user, conn.execute("SELECT 1").fetchone()
        finally:
            server.stop()

    # when they all start at the same moment
    with ThreadPoolExecutor(len(servers)) as pool:
        answers = list(pool.map(start_ask_and_stop, servers))

    # then each ran as that one user and answered queries
    assert answers == [(new_system_user, (1,))] * len(servers)

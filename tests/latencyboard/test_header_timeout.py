"""The web app as `make run` and compose serve it: a client trickling its request headers is
cut off at the header deadline (uvicorn alone keeps such a connection for ever)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from latencyboard.local.embedded import free_port
from latencyboard.local.runner import HEADER_TIMEOUT_PROTOCOL
from tests.support import PYTHON, start_process, stop_process

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def web_port(child_env: dict[str, str], tmp_path) -> Iterator[int]:
    port = free_port()
    argv = [PYTHON, "-m", "uvicorn", "latencyboard.asgi:application", "--port", str(port)]
    argv += ["--lifespan", "off", "--http", HEADER_TIMEOUT_PROTOCOL]
    running = start_process(argv, child_env, tmp_path / "web.log", ready_port=port)
    yield port
    stop_process(running)


def test_headers_trickling_in_are_cut_at_the_header_deadline(web_port: int) -> None:
    # given a connection that sends its request line, then a header byte every 0.5 s
    sock = socket.create_connection(("127.0.0.1", web_port), timeout=30)
    sock.sendall(b"GET /healthz HTTP/1.1\r\n")
    closed = False
    deadline = time.monotonic() + 60
    with sock:
        # when it keeps going
        while not closed and time.monotonic() < deadline:
            sock.settimeout(0.5)
            try:
                closed = sock.recv(1) == b""
            except TimeoutError:
                try:
                    sock.sendall(b"x")
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
            except ConnectionResetError:
                closed = True

    # then the web app closes it (10 s header deadline) rather than waiting for ever
    assert closed

"""A real HTTP receiver on loopback for notification tests: records every request and
answers as the test scripts it (e.g. 503 three times, then 200; or hang).

Use the ``receiver`` fixture of this folder's conftest, or ``running_receiver()`` elsewhere
with ``allow_loopback_receivers(settings)``: notifications refuse loopback by default.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from latencyboard.notifications.transport import parse_networks

# The allow-list setting a process that delivers to these receivers needs (and its env value).
LOOPBACK_NETWORK = "127.0.0.1/32"


def allow_loopback_receivers(settings: Any) -> None:
    """Let notifications reach loopback, in a test that delivers to a receiver here."""
    settings.NOTIFICATION_ALLOWED_NETWORKS = parse_networks([LOOPBACK_NETWORK])


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay_s: float = 0.0  # wait this long before answering (released early on close)


class Receiver:
    """Answers scripted answers in order, then ``default``; ``requests`` lists what came."""

    def __init__(self) -> None:
        self.requests: list[ReceivedRequest] = []
        self.default = Answer()
        self._script: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    def answer(
        self,
        status: int,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        delay_s: float = 0.0,
    ) -> None:
        """Answer the next ``times`` requests so (after any answers scripted before)."""
        with self._lock:
            self._script.extend([Answer(status, headers or {}, body, delay_s)] * times)

    def fail_then_succeed(self, failures: int, status: int = 503) -> None:
        self.answer(status, times=failures)

    def hang(self, seconds: float = 60.0) -> None:
        """Accept the next request and say nothing for ``seconds``."""
        self.answer(200, delay_s=seconds)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[ReceivedRequest]:
        """The first ``count`` requests, waiting for them (for deliveries from a worker)."""
        with self._arrived:
            arrived = self._arrived.wait_for(lambda: len(self.requests) >= count, timeout_s)
            if not arrived:
                raise AssertionError(f"{len(self.requests)} requests arrived, not {count}")
            return self.requests[:count]

    def start(self) -> None:
        self._thread.start()  # the socket listens already: requests queue until served

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def _next_answer(self, request: ReceivedRequest) -> Answer:
        with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()
            return self._script.popleft() if self._script else self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = ReceivedRequest(
                    method=self.command,
                    path=self.path,
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=self.rfile.read(length),
                )
                answer = receiver._next_answer(request)
                if answer.delay_s and receiver._closing.wait(answer.delay_s):
                    return
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests assert on ``requests``, not on a log."""

        return Handler


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.close()


TRICKLED_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Slow: trickled\r\n\r\n"


@contextmanager
def trickling_receiver(byte_every_s: float) -> Iterator[str]:
    """A receiver that reads a request, then sends its 200 answer one byte every
    ``byte_every_s`` seconds (well inside any per-read timeout); yields its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    closing = threading.Event()

    def serve() -> None:
        while not closing.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                for byte in TRICKLED_ANSWER:
                    if closing.wait(byte_every_s):
                        return
                    try:
                        connection.sendall(bytes([byte]))
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        closing.set()
        listener.close()
        thread.join(5)

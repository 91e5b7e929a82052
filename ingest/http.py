"""The OTLP/HTTP listener (default port 4318): a bare ASGI app, no framework on the hot path."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess

from ingest.balance import ConnectionCounts
from ingest.service import HttpReply, IngestService
from latencyboard.fairness.ingest_capacity import (
    CapacityShares,
    CapacityTaken,
    Claim,
    ShareTaken,
    share_of,
)
from latencyboard.header_timeout import HeaderTimeoutProtocol

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

TRACES_PATH = "/v1/traces"
# A body's first seconds are free of the minimum rate (a client's TCP window opening up).
MIN_RATE_GRACE_SECONDS = 5.0
# How often a body waiting for room in the bytes in flight asks again.
ROOM_POLL_SECONDS = 0.02


def _metrics() -> bytes:
    """This process's metrics, or all workers' summed when ``python -m ingest`` runs several."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        return generate_latest()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)


class BodyTooLargeWhileReading(Exception):
    pass


class BodyTooSlow(Exception):
    """The body did not arrive in time; the message says which bound it missed."""


@dataclass(frozen=True, slots=True)
class Pace:
    """How fast a body must arrive: whole within ``timeout_s``, and after ``grace_s`` at
    ``min_rate`` bytes a second on average (0: no minimum rate)."""

    timeout_s: float
    min_rate: int
    grace_s: float = MIN_RATE_GRACE_SECONDS

    def wait_s(self, received: int, elapsed: float) -> tuple[float, str]:
        """How long the next bytes may still take, and what is missed when they do not come."""
        left = self.timeout_s - elapsed
        reason = f"body did not arrive within {self.timeout_s:g} seconds"
        if self.min_rate:
            below = self.grace_s + (received + 1) / self.min_rate - elapsed
            if below < left:
                left, reason = below, f"body arrived slower than {self.min_rate} bytes a second"
        return left, reason


class _Body:
    """One request's body, its bytes held in its team's share of the bytes in flight as they
    arrive (never from the declared ``Content-Length``: a client that declares 64 MiB and
    sends nothing holds nothing), until released.

    A chunk that finds no room while its team is within its share waits up to
    ``room_wait_s`` for room (the team counts as waiting meanwhile, so others are held to
    their shares) before the body is refused with 503."""

    def __init__(
        self, shares: CapacityShares, team: int, max_bytes: int, room_wait_s: float
    ) -> None:
        self.shares = shares
        self.team = team
        self.max_bytes = max_bytes
        self.room_wait_s = room_wait_s
        self.chunks: list[bytes] = []
        self.held = 0
        self.claim: Claim | None = None

    async def read(self, receive: Receive, pace: Pace) -> bytes:
        loop = asyncio.get_running_loop()
        started = loop.time()
        more = True
        while more:
            wait, reason = pace.wait_s(self.held, loop.time() - started)
            try:
                message = await asyncio.wait_for(receive(), max(0.0, wait))
            except TimeoutError:
                raise BodyTooSlow(reason) from None
            if message["type"] == "http.disconnect":
                raise ConnectionResetError("client went away")
            chunk = message.get("body", b"")
            if self.held + len(chunk) > self.max_bytes:
                raise BodyTooLargeWhileReading
            # No longer than the body may still take: a 503 then, rather than a later 408.
            room_wait = min(self.room_wait_s, pace.wait_s(self.held, loop.time() - started)[0])
            await self._hold(len(chunk), loop.time() + room_wait)
            self.held += len(chunk)
            self.chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(self.chunks)

    async def _hold(self, size: int, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                if self.claim is None:
                    self.claim = self.shares.take(self.team, size)
                else:
                    self.shares.grow(self.claim, size)
                return
            except CapacityTaken as exc:
                if not exc.may_wait or loop.time() >= deadline:
                    raise
            await asyncio.sleep(ROOM_POLL_SECONDS)

    def release(self) -> None:
        self.chunks.clear()
        if self.claim is not None:
            self.shares.release(self.claim)
            self.claim = None
        self.held = 0


async def _send(
    send: Send, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
) -> None:
    raw_headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    raw_headers += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def counted(protocol: type[HeaderTimeoutProtocol], counts: ConnectionCounts) -> type[Any]:
    """``protocol`` counting its open connections in ``counts``."""

    class Counted(protocol):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            counts.opened()

        def connection_lost(self, exc: Exception | None) -> None:
            counts.closed()
            super().connection_lost(exc)

    return Counted


class OtlpHttpApp:
    """``POST /v1/traces``, ``GET /metrics`` and ``GET /healthz``."""

    def __init__(
        self,
        service: IngestService,
        executor: ThreadPoolExecutor,
        counts: ConnectionCounts | None = None,
    ) -> None:
        self.service = service
        self.executor = executor
        self.counts = counts or ConnectionCounts()
        capacity = service.max_inflight_bytes
        # A team's share always admits one body of the largest size a request may have, or a
        # small in-flight budget would hold to less than one body a team whose export another
        # team's waiting makes keep to its share.
        share = max(share_of(capacity, service.team_share_percent), service.max_body_bytes)
        self.in_flight = CapacityShares(capacity, min(share, capacity))
        self.pace = Pace(service.body_timeout_seconds, service.min_body_bytes_per_second)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == TRACES_PATH:
            if method != "POST":
                await _send(send, 405, b"use POST\n", "text/plain", {"allow": "POST"})
                return
            await self._export(scope, receive, send)
        elif path == "/metrics" and method == "GET":
            await _send(send, 200, _metrics(), CONTENT_TYPE_LATEST)
        elif path == "/healthz" and method == "GET":
            await _send(send, 200, b'{"status":"ok"}', "application/json")
        else:
            await _send(send, 404, b"not found: OTLP traces go to POST /v1/traces\n", "text/plain")

    async def _export(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        loop = asyncio.get_running_loop()
        service = self.service
        admission = await loop.run_in_executor(self.executor, service.admit_http, headers)
        if isinstance(admission, HttpReply):
            # Answered from the headers alone. uvicorn discards (never buffers) whatever body
            # still arrives once the response is complete, and the client can read the answer.
            await self._answer(send, admission)
            return
        body = _Body(
            self.in_flight, admission.grant.team_id, admission.max_bytes, service.room_wait_seconds
        )
        try:
            try:
                raw = await body.read(receive, self.pace)
            except BodyTooLargeWhileReading:
                reply, close = service.too_large_reply(admission), False
            except ShareTaken:
                reply, close = service.busy_reply(admission, team_share=True), False
            except CapacityTaken:
                reply, close = service.busy_reply(admission), False
            except BodyTooSlow as exc:
                # A stalled client would hold the connection: end it with the answer.
                reply, close = service.timeout_reply(admission, str(exc)), True
            except ConnectionResetError:
                return
            else:
                reply = await loop.run_in_executor(
                    self.executor, service.export_http, admission, raw, headers
                )
                # A worker holding more than its share of the host's connections sheds this
                # one: the client's next is handed to a worker afresh.
                close = self.counts.over_share()
                del raw
        finally:
            body.release()
        await self._answer(send, reply, close=close)

    @staticmethod
    async def _answer(send: Send, reply: HttpReply, *, close: bool = False) -> None:
        headers = {**reply.headers, "connection": "close"} if close else reply.headers
        await _send(send, reply.status, reply.body, reply.content_type, headers)

"""The OTLP/HTTP listener (default port 4318): a bare ASGI app, no framework on the hot path."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess

from ingest.service import HttpReply, IngestService

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

TRACES_PATH = "/v1/traces"


def _metrics() -> bytes:
    """This process's metrics, or all workers' summed when ``python -m ingest`` runs several."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        return generate_latest()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)


class BodyTooLargeWhileReading(Exception):
    pass


class TooManyBytesInFlight(Exception):
    pass


class InFlightBytes:
    """Request body bytes this process holds, summed over requests, against a cap.

    Only the event loop's thread touches it, so a plain counter is enough.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held = 0

    def take(self, size: int) -> None:
        if self.held + size > self.cap:
            raise TooManyBytesInFlight
        self.held += size

    def release(self, size: int) -> None:
        self.held -= size


class _Body:
    """One request's body as it arrives, its bytes held in flight until released.

    A declared ``Content-Length`` is held whole before the first byte is read: with many
    large uploads at once, some go through and the others are refused straight away, rather
    than all of them stalling halfway on the shared budget.
    """

    def __init__(self, in_flight: InFlightBytes, max_bytes: int, declared: int) -> None:
        self.in_flight = in_flight
        self.max_bytes = max_bytes
        self.declared = declared
        self.chunks: list[bytes] = []
        self.held = 0

    def _hold(self, size: int) -> None:
        if size > self.held:
            self.in_flight.take(size - self.held)
            self.held = size

    async def read(self, receive: Receive) -> bytes:
        self._hold(self.declared)
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ConnectionResetError("client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise BodyTooLargeWhileReading
            self._hold(size)
            self.chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(self.chunks)

    def release(self) -> None:
        self.chunks.clear()
        self.in_flight.release(self.held)
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


class OtlpHttpApp:
    """``POST /v1/traces``, ``GET /metrics`` and ``GET /healthz``."""

    def __init__(self, service: IngestService, executor: ThreadPoolExecutor) -> None:
        self.service = service
        self.executor = executor
        self.in_flight = InFlightBytes(service.max_inflight_bytes)

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
        declared = headers.get("content-length", "")
        body = _Body(
            self.in_flight, admission.max_bytes, int(declared) if declared.isdigit() else 0
        )
        try:
            try:
                raw = await asyncio.wait_for(body.read(receive), service.body_timeout_seconds)
            except BodyTooLargeWhileReading:
                reply, close = service.too_large_reply(admission), False
            except TooManyBytesInFlight:
                reply, close = service.busy_reply(admission), False
            except TimeoutError:
                # A stalled client would hold the connection: end it with the answer.
                reply, close = service.timeout_reply(admission), True
            except ConnectionResetError:
                return
            else:
                reply = await loop.run_in_executor(
                    self.executor, service.export_http, admission, raw, headers
                )
                close = False
                del raw
        finally:
            body.release()
        await self._answer(send, reply, close=close)

    @staticmethod
    async def _answer(send: Send, reply: HttpReply, *, close: bool = False) -> None:
        headers = {**reply.headers, "connection": "close"} if close else reply.headers
        await _send(send, reply.status, reply.body, reply.content_type, headers)

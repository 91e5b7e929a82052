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


async def _read_body(receive: Receive, max_bytes: int) -> bytes:
    chunks = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError("client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLargeWhileReading
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


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
        try:
            body = await _read_body(receive, self.service.max_body_bytes)
        except BodyTooLargeWhileReading:
            reply = self.service.too_large_reply(headers)
        except ConnectionResetError:
            return
        else:
            loop = asyncio.get_running_loop()
            reply = await loop.run_in_executor(
                self.executor, self.service.export_http, body, headers
            )
        await self._answer(send, reply)

    @staticmethod
    async def _answer(send: Send, reply: HttpReply) -> None:
        await _send(send, reply.status, reply.body, reply.content_type, reply.headers)

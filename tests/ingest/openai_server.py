"""A small OpenAI-compatible chat completions server on loopback, for the GenAI
instrumentation tests: the answers are fixed words, their usage exact, streamed as server-sent
events (with the usage chunk that ``stream_options.include_usage`` asks for) or not."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "tiny-llm-1"
PROMPT_TOKENS = 12
ANSWER = ("Latency", " is", " where", " the", " time", " goes", ".")
CHUNK_PAUSE_S = 0.002  # between streamed tokens, so that the first one comes before the last


@dataclass(frozen=True)
class Server:
    url: str  # the base URL an OpenAI client takes, ending in /v1


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", MODEL),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(ANSWER)},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(),
    }


def _usage() -> dict[str, int]:
    return {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": len(ANSWER),
        "total_tokens": PROMPT_TOKENS + len(ANSWER),
    }


def _chunks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    base = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", MODEL),
    }
    for number, token in enumerate(ANSWER):
        delta = {"role": "assistant", "content": token} if number == 0 else {"content": token}
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    if body.get("stream_options", {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage()}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
        elif body.get("stream"):
            self._stream(body)
        else:
            self._json(200, _completion(body))

    def _json(self, status: int, document: dict[str, Any]) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for chunk in _chunks(body):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            time.sleep(CHUNK_PAUSE_S)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read spans, not access logs."""


@contextmanager
def openai_server() -> Iterator[Server]:
    """The server on a free loopback port, stopped on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Server(f"http://127.0.0.1:{server.server_address[1]}/v1")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

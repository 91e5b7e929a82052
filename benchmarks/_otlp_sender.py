"""A sender process of the ingest benchmark: distinct OTLP/HTTP exports over one keep-alive
connection, refused exports sent again the way an OTLP exporter does.

An export the server refuses with 429 or 503 is the same body sent again after its
``Retry-After`` (exponential backoff when there is none), so a server that tells clients to come
back under contention is measured on what it finally takes, not on what it refused once. A span
counts as accepted once, when a 200 comes back.
"""

from __future__ import annotations

import datetime as dt
import http.client
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from _children import child_process, sleep_until
from _otlp_bodies import SPANS_PER_REQUEST, BodyTemplate

from latencyboard.notifications.transport import retry_after_s

TEMPLATES_PER_SENDER = 8
RETRYABLE = frozenset({"429", "503"})
FIRST_BACKOFF_SECONDS = 1.0
# One refusal must not idle a sender for a large part of a measured window.
MAX_RETRY_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class Timeline:
    """Wall-clock bounds shared by every process: warm-up from ``start``, measured [w0, w1)."""

    start: float
    w0: float
    w1: float

    def phase(self, moment: float) -> str:
        if moment < self.w0:
            return "warmup"
        return "measured" if moment < self.w1 else "tail"


def retry_wait(retry_after: str | None, attempt: int, now: dt.datetime) -> float:
    """Seconds to wait before sending a refused export again (``attempt`` 0 for the first).

    The server's ``Retry-After`` (delta-seconds or an HTTP date) when it gives a readable one,
    else exponential backoff from 1 s; never above ``MAX_RETRY_WAIT_SECONDS``.
    """
    wait = retry_after_s(retry_after, now)
    if wait is None:
        wait = FIRST_BACKOFF_SECONDS * 2**attempt
    return min(wait, MAX_RETRY_WAIT_SECONDS)


class Connection:
    """One keep-alive connection that reconnects on the next request after a transport error."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.conn.connect()
        self.headers = {
            "content-type": "application/x-protobuf",
            "authorization": f"Bearer {token}",
        }

    def post(self, body: bytes) -> tuple[str, str | None]:
        """The status (or the transport error's name) and the ``Retry-After`` header."""
        try:
            self.conn.request("POST", "/v1/traces", body, self.headers)
            response = self.conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            return type(exc).__name__, None
        return str(response.status), response.getheader("retry-after")

    def close(self) -> None:
        self.conn.close()


@dataclass
class Tally:
    """What one sender saw: answers by ``phase:status``, spans acknowledged by phase, timings."""

    statuses: Counter[str] = field(default_factory=Counter)
    accepted: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    export_latencies: list[float] = field(default_factory=list)
    retries: int = 0
    abandoned: int = 0


def export(conn: Connection, body: bytes, timeline: Timeline, tally: Tally) -> None:
    """Send ``body`` until it is acknowledged, refused for good, or its next try would fall
    past the window: then it is given up at the window's end, never acknowledged, so never
    counted as accepted."""
    first_try = time.perf_counter()
    attempt = 0
    while True:
        began = time.perf_counter()
        status, retry_after = conn.post(body)
        done = time.perf_counter()
        phase = timeline.phase(time.time())
        tally.statuses[f"{phase}:{status}"] += 1
        if phase == "measured":
            tally.latencies.append(done - began)
        if status == "200":
            tally.accepted[phase] += SPANS_PER_REQUEST
            if phase == "measured":
                tally.export_latencies.append(done - first_try)
            return
        if status not in RETRYABLE:
            return
        wait = retry_wait(retry_after, attempt, dt.datetime.now(dt.UTC))
        if time.time() + wait >= timeline.w1:
            # Still told to wait: sending the next export at once would hammer the server.
            sleep_until(timeline.w1)
            tally.abandoned += 1
            return
        tally.retries += 1
        attempt += 1
        time.sleep(wait)


def sender(
    index: int,
    port: int,
    token: str,
    start_at: Any,
    warmup: float,
    seconds: float,
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    """One client process: its own templates and connection, then export until the window ends."""
    child_process()
    seed = 1_000 + index
    now_ns = time.time_ns()
    templates = [
        BodyTemplate(random.Random(seed * 100 + i), now_ns)  # noqa: S311 (test data, not secrets)
        for i in range(TEMPLATES_PER_SENDER)
    ]
    rng = np.random.default_rng(seed)
    conn = Connection(port, token)
    ready.release()
    go.wait()
    timeline = Timeline(start_at.value, start_at.value + warmup, start_at.value + warmup + seconds)
    tally = Tally()
    render_seconds = 0.0
    sent = 0
    while time.time() < timeline.start:
        time.sleep(0.001)
    while time.time() < timeline.w1:
        before = time.perf_counter()
        body = templates[sent % len(templates)].render(rng)
        render_seconds += time.perf_counter() - before
        sent += 1
        export(conn, body, timeline, tally)
    conn.close()
    results.put(
        {
            "index": index,
            "statuses": dict(tally.statuses),
            "accepted": dict(tally.accepted),
            "latencies": tally.latencies,
            "export_latencies": tally.export_latencies,
            "retries": tally.retries,
            "abandoned": tally.abandoned,
            "requests": sent,
            "render_seconds": render_seconds,
        }
    )

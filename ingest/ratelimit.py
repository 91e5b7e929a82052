"""Per-token span rate limits: token buckets with an injectable clock (pure)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    level: float
    updated: float


class SpanRateLimiter:
    """Allows ``rate`` spans per second per key, with bursts up to ``burst_seconds`` worth.

    Limits are per process: with N ingest processes behind a load balancer a token may send
    up to N times its rate. That is the usual trade for keeping ingest stateless.
    """

    def __init__(
        self, burst_seconds: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._burst_seconds = burst_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def retry_after(self, key: str, rate: float, spans: int) -> float:
        """0 when ``spans`` may pass now (and takes them), else seconds until they could."""
        capacity = max(rate * self._burst_seconds, float(spans))
        now = self._clock()
        with self._lock:
            bucket = self._buckets.setdefault(key, _Bucket(level=capacity, updated=now))
            bucket.level = min(capacity, bucket.level + (now - bucket.updated) * rate)
            bucket.updated = now
            if bucket.level >= spans:
                bucket.level -= spans
                return 0.0
            return (spans - bucket.level) / rate

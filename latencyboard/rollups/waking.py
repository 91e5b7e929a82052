"""Waking the fold soon after ingest commits spans, instead of at the next 5 s beat.

Best effort and never in the way of ingest: ``wake`` only sets a flag; a background thread
sends the fold task, at most once per ``interval``, and logs when the broker is unreachable.
Folding more often keeps every span counted once: each fold claims its batches with
``SKIP LOCKED`` (:func:`~latencyboard.rollups.services.fold_pending_batches`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from kombu.exceptions import OperationalError

from latencyboard.celery import app

logger = logging.getLogger(__name__)

WAKE_INTERVAL_SECONDS: Final = 0.5
# A wake queued behind busy workers is stale once the beat's own fold would have run.
WAKE_EXPIRES_SECONDS: Final = 4


def send_fold() -> None:
    """Queue one fold task, failing at once rather than retrying when the broker is down."""
    app.send_task("rollups.fold", expires=WAKE_EXPIRES_SECONDS, retry=False)


class FoldWaker:
    """Sends the fold task after ``wake`` calls: at once after a quiet spell, then at most once
    per ``interval`` however many commits come (one more at the end of a busy interval)."""

    def __init__(
        self, send: Callable[[], None] = send_fold, interval: float = WAKE_INTERVAL_SECONDS
    ) -> None:
        self.send = send
        self.interval = interval
        self.wanted = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fold-waker", daemon=True)
        self.thread.start()

    def wake(self) -> None:
        """Ask for a fold soon; returns at once."""
        self.wanted.set()

    def _run(self) -> None:
        while True:
            self.wanted.wait()
            self.wanted.clear()
            try:
                self.send()
            except (OperationalError, OSError) as exc:
                logger.warning("rollup.wake_failed", extra={"error": str(exc)})
            time.sleep(self.interval)

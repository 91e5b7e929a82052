"""When a team whose report queue is full should ask again (pure)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

MIN_WAIT_SECONDS = 5
"""An overdue report may be done any moment: still no sooner than this, or a script spins."""


def retry_after_seconds(took_s: Sequence[float], oldest_waited_s: float, fallback_s: int) -> int:
    """Seconds until the team's oldest waiting report should be done: the median of how long
    its recent reports took from request to done (``took_s``), less how long the oldest has
    waited; ``fallback_s`` for a team with no report done yet."""
    if not took_s:
        return fallback_s
    return max(MIN_WAIT_SECONDS, math.ceil(statistics.median(took_s) - oldest_waited_s))

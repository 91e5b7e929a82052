"""When to try a notification again (pure: no Django).

Exponential backoff from ``base_s``, doubled per failed attempt up to ``cap_s``; a receiver's
``Retry-After`` pushes the next attempt later, never earlier. After ``max_attempts`` failed
tries the delivery is given up.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    base_s: float = 10.0
    cap_s: float = 3600.0
    max_attempts: int = 8


def next_delay(attempts: int, retry_after_s: float | None, schedule: Schedule) -> float | None:
    """Seconds to wait after ``attempts`` failed tries (``>= 1``), or ``None`` to give up."""
    if attempts >= schedule.max_attempts:
        return None
    delay = min(schedule.cap_s, schedule.base_s * 2 ** (attempts - 1))
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, schedule.cap_s))
    return delay

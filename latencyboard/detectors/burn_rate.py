"""SLO burn-rate alerts from exact per-minute good/total counters (multi-window, multi-burn-rate).

The burn rate over a window is its error rate divided by the error budget ``1 - target``:
1x spends exactly the budget over the SLO period, 14.4x spends a 30-day budget in 50 hours.
Each alert condition needs both a long window (significance: enough budget spent) and a
short one (the burn is still going on, so the alert resets soon after it stops) at or above
its factor. The defaults are the SRE Workbook's table (chapter 5, "Alerting on SLOs"):

========  ======  ===========  ============  ===============================
severity  factor  long window  short window  30-day budget spent at trigger
========  ======  ===========  ============  ===============================
page      14.4x   1 h          5 min         2%
page      6x      6 h          30 min        5%
ticket    3x      1 day        2 h           10%
ticket    1x      3 days       6 h           10%
========  ======  ===========  ============  ===============================

The comparison is exact: counts, target and factor are compared as fractions
(``bad * 1 >= factor * (1 - target) * total``), so 14.4x fires and 14.39x does not, with no
float rounding at the edge. Burn rates are kept as exact fractions (``float()`` them to show).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from latencyboard.windows import MINUTE

__all__ = [
    "SRE_WORKBOOK",
    "BurnCondition",
    "BurnEvaluation",
    "ConditionResult",
    "Severity",
    "WindowBurn",
    "burn_rate",
    "evaluate",
]


class Severity(StrEnum):
    PAGE = "page"
    TICKET = "ticket"


@dataclass(frozen=True)
class BurnCondition:
    """Fire when the burn rate is at least ``factor`` over both windows (whole minutes)."""

    severity: Severity
    factor: Fraction
    long_minutes: int
    short_minutes: int


SRE_WORKBOOK: Final = (
    BurnCondition(Severity.PAGE, Fraction("14.4"), 60, 5),
    BurnCondition(Severity.PAGE, Fraction(6), 360, 30),
    BurnCondition(Severity.TICKET, Fraction(3), 1440, 120),
    BurnCondition(Severity.TICKET, Fraction(1), 4320, 360),
)


@dataclass(frozen=True)
class WindowBurn:
    """Counts and burn rate over the last ``minutes`` complete minutes before ``now``."""

    minutes: int
    good: int
    total: int
    burn_rate: Fraction
    """``0`` when the window has no traffic."""


@dataclass(frozen=True)
class ConditionResult:
    condition: BurnCondition
    long: WindowBurn
    short: WindowBurn
    firing: bool


@dataclass(frozen=True)
class BurnEvaluation:
    target: Fraction
    now: datetime
    conditions: tuple[ConditionResult, ...]

    @property
    def severity(self) -> Severity | None:
        """The most urgent severity firing (page over ticket), ``None`` when none."""
        firing = {result.condition.severity for result in self.conditions if result.firing}
        for severity in (Severity.PAGE, Severity.TICKET):
            if severity in firing:
                return severity
        return None


def burn_rate(good: int, total: int, target: Fraction) -> Fraction | None:
    """The burn rate of ``good`` out of ``total`` requests against ``target`` (the share of good
    requests promised, in [0, 1]): the share of bad requests over the share the target allows,
    exact. None without requests, or for a target of 1 (no budget to burn). The SLA page and
    the burn-rate alert both compute it here."""
    allowed = 1 - target
    if not total or not allowed:
        return None
    return Fraction(total - good, total) / allowed


def _exact(value: Fraction | Decimal | str | float) -> Fraction:
    """A target as an exact fraction; a float is read as the decimal it prints as (0.999)."""
    return Fraction(str(value)) if isinstance(value, float) else Fraction(value)


def _window(
    good: npt.NDArray[np.int64],
    total: npt.NDArray[np.int64],
    end: int,
    minutes: int,
    target: Fraction,
) -> WindowBurn:
    first = max(0, end - minutes)
    window_good, window_total = int(good[first:end].sum()), int(total[first:end].sum())
    rate = burn_rate(window_good, window_total, target)
    return WindowBurn(minutes, window_good, window_total, Fraction(0) if rate is None else rate)


def evaluate(
    good: npt.ArrayLike,
    total: npt.ArrayLike,
    start: datetime,
    now: datetime,
    target: Fraction | Decimal | str | float,
    conditions: tuple[BurnCondition, ...] = SRE_WORKBOOK,
) -> BurnEvaluation:
    """Evaluate burn-rate conditions at ``now``.

    ``good[i]`` and ``total[i]`` count the requests of the minute starting at
    ``start + i minutes`` (aware datetimes). Windows cover the complete minutes ending at or
    before ``now``; minutes before ``start`` count as no traffic. ``target`` is the SLO's
    objective as a fraction of good requests (``"0.999"``), in (0, 1). Raises ValueError for
    mismatched or negative counts, ``good > total``, or a target outside (0, 1).
    """
    good_counts = np.asarray(good, dtype=np.int64)
    total_counts = np.asarray(total, dtype=np.int64)
    if good_counts.shape != total_counts.shape or good_counts.ndim != 1:
        raise ValueError("good and total must be 1-D arrays of the same length")
    if np.any(good_counts < 0) or np.any(good_counts > total_counts):
        raise ValueError("counts must satisfy 0 <= good <= total")
    objective = _exact(target)
    if not 0 < objective < 1:
        raise ValueError(f"target must lie in (0, 1), got {target!r}")
    end = min(good_counts.size, max(0, (now - start) // MINUTE))
    results = []
    for condition in conditions:
        long = _window(good_counts, total_counts, end, condition.long_minutes, objective)
        short = _window(good_counts, total_counts, end, condition.short_minutes, objective)
        firing = long.burn_rate >= condition.factor and short.burn_rate >= condition.factor
        results.append(ConditionResult(condition, long, short, firing))
    return BurnEvaluation(objective, now, tuple(results))

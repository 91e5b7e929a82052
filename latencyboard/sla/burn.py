"""How fast an objective spends its error budget now, and when it runs out at that pace
(pure: no Django).

The burn rate over a window is its share of requests over the threshold divided by the share
the target allows (``1 - target``): 1x spends exactly the budget over the objective's period,
14.4x a 30-day budget in about two days. It is the burn-rate detector's figure
(:func:`latencyboard.detectors.burn_rate.burn_rate`), so the page and the alert agree. The
SLA page shows it over the last hour, six hours and three days, with the days until the
window's remaining budget is spent if requests keep failing as often as over that window.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Final

from latencyboard.detectors.burn_rate import burn_rate
from latencyboard.windows import DAY, MINUTE

BURN_WINDOWS: Final = (("1 h", 60), ("6 h", 6 * 60), ("3 d", 3 * 24 * 60))
"""(label, minutes) of the windows the burn rate is shown over."""

_MINUTES_PER_DAY: Final = DAY // MINUTE


@dataclass(frozen=True, slots=True)
class Burn:
    """The burn over the last ``minutes`` complete minutes.

    ``rate`` is None without requests (or for a 100% target, which has no budget to burn).
    ``exhausted_in_days`` is the days until the remaining budget is spent at this window's
    pace of bad requests: 0 when it is spent already, None when nothing is being spent.
    """

    label: str
    minutes: int
    good: int
    total: int
    rate: float | None
    exhausted_in_days: float | None

    @property
    def bad(self) -> int:
        return self.total - self.good


def burn(
    label: str, minutes: int, good: int, total: int, target_percent: Decimal, remaining_bad: Decimal
) -> Burn:
    """The burn of ``good`` out of ``total`` requests over ``minutes``, against
    ``target_percent``, with ``remaining_bad`` requests of budget left in the window."""
    bad = total - good
    exact = burn_rate(good, total, Fraction(target_percent) / 100)
    rate = None if exact is None else float(exact)
    if remaining_bad <= 0:
        days: float | None = 0.0
    elif bad:
        days = float(remaining_bad / (Decimal(bad) * _MINUTES_PER_DAY / minutes))
    else:
        days = None
    return Burn(label, minutes, good, total, rate, days)

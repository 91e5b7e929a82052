"""Template filters for SLA figures.

Attainment and budget are rounded *down* for display: an objective that misses 99.9% by a
hair must not read "99.9%" next to "not met".
"""

from __future__ import annotations

import math
from decimal import ROUND_FLOOR, Decimal

from django import template

from latencyboard.sla.attainment import Bucket, Budget

register = template.Library()

NO_VALUE = "\N{EN DASH}"
# Below this share of the budget left, the page marks it as running low.
LOW_BUDGET_PERCENT = 25


@register.filter
def attainment(counts: Budget | Bucket) -> str:
    """Exact good / total as a percentage with three decimals, rounded down: 99.956%."""
    if counts.total == 0:
        return NO_VALUE
    thousandths = 100_000 * counts.good // counts.total
    return f"{thousandths // 1000}.{thousandths % 1000:03d}%"


@register.filter
def budget_percent(value: float | None) -> str:
    """Error budget left with one decimal, rounded down: 56.1%, -0.1% once overspent."""
    if value is None:
        return NO_VALUE
    return f"{math.floor(value * 10) / 10:.1f}%"


@register.filter
def budget_state(value: float | None) -> str:
    """A CSS class for the budget left: ``none``, ``spent``, ``low`` or ``ok``."""
    if value is None:
        return "none"
    if value < 0:
        return "spent"
    return "low" if value < LOW_BUDGET_PERCENT else "ok"


@register.filter
def count(value: int | Decimal) -> str:
    """A count of requests with thousands separators, in whole requests: the exact decimals
    of allowed bad requests (99.9% of 1,001 allows 1.001) are rounded down, as no fraction of
    a request can go bad: 2,001, 1, -1."""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{int(value.to_integral_value(rounding=ROUND_FLOOR)):,}"


@register.filter
def plain(value: Decimal | float) -> str:
    """A number without exponent or trailing zeros: 99.9 for 99.900, 250 for 250.0."""
    # repr: the shortest decimal that reads back as the same float (250.5, not 250.50000…01).
    text = format(Decimal(repr(value)) if isinstance(value, float) else value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@register.filter
def allowed_share(target_percent: Decimal) -> str:
    """The share of requests a target lets fail: 0.1% for 99.9."""
    return f"{plain(100 - target_percent)}%"

"""Template filters for latency figures, formatted as ``static/js/charts.js`` formats them."""

from __future__ import annotations

from decimal import Decimal

from django import template

register = template.Library()

NO_VALUE = "\N{EN DASH}"


@register.filter
def ms(value: float | None) -> str:
    """A latency given in milliseconds, in the unit that reads best, with three significant
    digits or so: 423 µs, 2.50 ms, 12.3 ms, 212 ms, 37.75 s, 2.5 min; an en dash for no value."""
    if value is None:
        return NO_VALUE
    if value >= 60_000:
        return f"{value / 60_000:.1f} min"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    if value >= 1 or value == 0:
        return f"{value:.2f} ms"
    return f"{value * 1000:.0f} \N{MICRO SIGN}s"


@register.filter
def percent(value: float | Decimal | None, digits: int = 2) -> str:
    """A percentage to ``digits`` decimals without trailing zeros: 99.95%, 99.9%, 100%; a
    value below 100 never shows as 100% (99.9996 is 99.999%)."""
    if value is None:
        return NO_VALUE
    number = float(value)
    text = f"{number:.{digits}f}"
    if number < 100 and float(text) >= 100:
        text = "99." + "9" * digits
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}%"


@register.filter
def fraction_percent(value: float | None, digits: int = 2) -> str:
    """A fraction (0.0123) as a percentage (1.23%), as :func:`percent` writes it."""
    return percent(None if value is None else value * 100, digits)


@register.filter
def quantile_label(quantile: float) -> str:
    """p99 for 0.99, p99.9 for 0.999."""
    return "p" + f"{quantile * 100:.3f}".rstrip("0").rstrip(".")

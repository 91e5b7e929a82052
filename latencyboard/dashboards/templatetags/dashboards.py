"""Template filters for latency figures, formatted as ``static/js/charts.js`` formats them,
and the overview's p99 sparklines."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from django import template
from django.utils.html import format_html

from latencyboard.stats.labels import quantile_label

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


register.filter("quantile_label", quantile_label)


SPARK_WIDTH = 120
SPARK_HEIGHT = 28
_SPARK_PAD = 2


@register.filter
def sparkline(values: Sequence[float | None]) -> str:
    """An inline SVG line of ``values`` (None: a gap), scaled between their minimum and
    maximum, with the last value marked, and beside it the latest value and the scale (lowest
    to highest): a line without them says "went up" but not from what to what. Labelled with
    those figures for screen readers. Attributes only, no inline style, so a strict
    Content-Security-Policy allows it."""
    known = [value for value in values if value is not None]
    if not known:
        return format_html(
            '<span class="muted small">no requests in the last {} hours</span>', len(values)
        )
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    step = (SPARK_WIDTH - 2 * _SPARK_PAD) / max(len(values) - 1, 1)
    inner = SPARK_HEIGHT - 2 * _SPARK_PAD

    def point(index: int, value: float) -> tuple[float, float]:
        return (
            round(_SPARK_PAD + index * step, 1),
            round(_SPARK_PAD + inner - (value - low) / span * inner, 1),
        )

    path, pen_down = [], False
    for index, value in enumerate(values):
        if value is None:
            pen_down = False
            continue
        x, y = point(index, value)
        path.append(f"{'L' if pen_down else 'M'}{x} {y}")
        pen_down = True
    last_index = max(index for index, value in enumerate(values) if value is not None)
    last_x, last_y = point(last_index, known[-1])
    return format_html(
        '<span class="spark"><svg class="sparkline" width="{}" height="{}" viewBox="0 0 {} {}" '
        'role="img" aria-label="p99 hour by hour, last {} hours: lowest {}, highest {}, latest {}">'
        '<path d="{}" fill="none"/><circle cx="{}" cy="{}" r="2"/></svg>'
        '<span class="spark-figures small" aria-hidden="true"><span class="spark-latest">{}</span>'
        '<span class="muted">{}\u2013{}</span></span></span>',
        SPARK_WIDTH,
        SPARK_HEIGHT,
        SPARK_WIDTH,
        SPARK_HEIGHT,
        len(values),
        ms(low),
        ms(high),
        ms(known[-1]),
        " ".join(path),
        last_x,
        last_y,
        ms(known[-1]),
        ms(low),
        ms(high),
    )

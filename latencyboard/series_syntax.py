"""How a series request spells moments and durations (pure: no Django).

One syntax for every series endpoint and the Prometheus-compatible API, so that a dashboard
moves between them unchanged:

- a moment is ISO 8601 (parsed by the caller) or a Unix epoch number: below ``10**11`` it is
  seconds, from there milliseconds (``10**11`` seconds is the year 5138, far past any moment
  accepted, and ``10**11`` milliseconds is March 1973, before any span), so Grafana's
  ``$__from`` (milliseconds) and a script's ``time.time()`` (seconds) both read right;
- a duration (a step, a window) is a number of seconds (``300``, ``0.5``), one or more
  ``<count><unit>`` with units ``ms s m h d w y`` (``30s``, ``5m``, ``1h30m``, ``7d``), as
  Prometheus writes them, or ISO 8601 (``PT1H``, ``P7D``) as the API took before.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Final

from latencyboard.windows import DAY, EPOCH, HOUR, MINUTE, SECOND

MILLISECONDS_FROM: Final = 10**11
"""Epoch numbers from this on are milliseconds, below it seconds."""

_NUMBER = re.compile(r"[+-]?(\d{1,20}(\.\d{0,9})?|\.\d{1,9})")
_UNIT_PART = re.compile(r"(\d{1,9})(ms|[smhdwy])")
_UNITS: Final = {
    "ms": dt.timedelta(milliseconds=1),
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
    "d": DAY,
    "w": dt.timedelta(weeks=1),
    "y": dt.timedelta(days=365),
}
_ISO_DURATION = re.compile(
    r"P(?:(?P<days>\d{1,9})D)?(?:T(?:(?P<hours>\d{1,9})H)?(?:(?P<minutes>\d{1,9})M)?"
    r"(?:(?P<seconds>\d{1,9}(?:\.\d{1,6})?)S)?)?"
)
# Far beyond any accepted moment or duration, so arithmetic on them cannot overflow.
_LARGEST_SECONDS: Final = 10**10


class SyntaxRefused(ValueError):
    """The text is not a moment or duration in the accepted syntax; the message says why."""


class TooLarge(SyntaxRefused):
    """The text is a number or duration far beyond any that could be accepted."""


def epoch_moment(text: str) -> dt.datetime | None:
    """The moment an epoch number ``text`` names (see the module doc), or None when ``text``
    is not a plain number (then it may be ISO 8601)."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    seconds = value / 1000 if abs(value) >= MILLISECONDS_FROM else value
    if abs(seconds) > _LARGEST_SECONDS:
        raise TooLarge("The epoch number is too large.")
    # Whole microseconds from the decimal text, not a float's binary approximation.
    return EPOCH + dt.timedelta(microseconds=round(seconds * 1_000_000))


def duration(text: str) -> dt.timedelta:
    """The duration ``text`` spells (see the module doc); raises :class:`SyntaxRefused`."""
    text = text.strip()
    if _NUMBER.fullmatch(text):
        seconds = float(text)
        if not math.isfinite(seconds) or abs(seconds) > _LARGEST_SECONDS:
            raise TooLarge("The duration is too large.")
        return dt.timedelta(seconds=seconds)
    if text and "".join(m[0] for m in _UNIT_PART.finditer(text)) == text:
        total = dt.timedelta(0)
        for part in _UNIT_PART.finditer(text):
            total += int(part[1]) * _UNITS[part[2]]
            if total.total_seconds() > _LARGEST_SECONDS:
                raise TooLarge("The duration is too large.")
        return total
    iso = _ISO_DURATION.fullmatch(text)
    if iso and text != "P" and not text.endswith("T"):
        parts = {unit: float(value) for unit, value in iso.groupdict().items() if value}
        seconds = sum(value * _UNITS[unit[0]].total_seconds() for unit, value in parts.items())
        if seconds > _LARGEST_SECONDS:
            raise TooLarge("The duration is too large.")
        return dt.timedelta(**parts)
    raise SyntaxRefused(
        "Use seconds (300), a count and a unit s, m, h, d or w (30s, 5m, 1h, 1d), or ISO 8601 "
        "(PT1H)."
    )


def fitting_step(at_least_seconds: float) -> int:
    """The smallest step of the rollup grid (see ``windows.check_step``) of at least
    ``at_least_seconds``: a step that divides an hour, whole hours dividing a day, or whole
    days. What a query coarsens a step it cannot serve to."""
    for seconds in _GRID_STEPS:
        if seconds >= at_least_seconds:
            return seconds
    return math.ceil(at_least_seconds / 86400) * 86400


_GRID_STEPS: Final = tuple(
    [60 * m for m in (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)]
    + [3600 * h for h in (1, 2, 3, 4, 6, 8, 12)]
    + [86400]
)

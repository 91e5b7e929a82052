"""The moments and durations a request may name: one rule for every API, page and form.

Every moment (a window's start or end, an exemplar minute, a maintenance window) lies in
``[EARLIEST, LATEST)``, every duration (a window length, a step) in ``(0, LONGEST]`` and every
duration filter in milliseconds in ``[0, LONGEST]``, so that whatever a query adds or
subtracts (``end - window``, ``minute + step``, a bucket grid widened by a step) stays far
inside Python's years 1-9999 and PostgreSQL's timestamps, and a moment in nanoseconds since
the epoch (up to 2262) or a duration in nanoseconds still fits a signed 64-bit integer.
Outside them a request is refused with a 400 naming the parameter, never a 500.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from latencyboard import series_syntax
from latencyboard.windows import EPOCH, MAX_SERIES_WINDOW

EARLIEST: Final = EPOCH
"""The Unix epoch: OpenTelemetry stamps spans in unsigned nanoseconds since then."""

LATEST: Final = dt.datetime(2200, 1, 1, tzinfo=dt.UTC)
"""Exclusive; over 60 years below the signed 64-bit nanosecond limit (2262-04-11)."""

LONGEST: Final = MAX_SERIES_WINDOW
"""The longest window or step: as long as day rollups are kept by default."""


def validate_moment(moment: dt.datetime) -> None:
    """Refuse an aware ``moment`` outside ``[EARLIEST, LATEST)``."""
    if not EARLIEST <= moment < LATEST:
        raise ValidationError(
            "Must be from %(earliest)s to before %(latest)s (UTC).",
            code="out_of_range",
            params={"earliest": EARLIEST.date(), "latest": LATEST.date()},
        )


def validate_duration(duration: dt.timedelta) -> None:
    """Refuse a ``duration`` that is not positive or is longer than ``LONGEST``."""
    if not dt.timedelta(0) < duration <= LONGEST:
        raise ValidationError(
            "Must be positive and at most %(days)s days.",
            code="out_of_range",
            params={"days": LONGEST.days},
        )


def given_window(attrs: dict[str, Any], *, window: bool) -> tuple[dt.datetime, dt.datetime] | None:
    """The ``start`` and ``end`` of a query's validated ``attrs``, in UTC, or None when
    neither is given; ``window`` says whether the query named a window instead, which may not
    be combined with them. One rule for every API that takes either: a 400 naming the
    parameter at fault for a window with start or end, or one of start and end alone."""
    start, end = attrs.get("start"), attrs.get("end")
    if window and (start is not None or end is not None):
        raise serializers.ValidationError(
            {"window": ["Give either window or start and end, not both."]}
        )
    if (start is None) != (end is None):
        missing = "end" if end is None else "start"
        raise serializers.ValidationError({missing: ["Give start and end together."]})
    if start is None or end is None:
        return None
    return start.astimezone(dt.UTC), end.astimezone(dt.UTC)


@extend_schema_field(
    {
        "type": "string",
        "description": "ISO 8601 (UTC unless an offset is given), or Unix epoch seconds or "
        "milliseconds (numbers from 10^11 on are milliseconds).",
        "example": "2026-11-24T10:41:00Z",
    }
)
class MomentField(serializers.DateTimeField):
    """A moment inside the bounds: ISO 8601 (UTC unless an offset is given) or a Unix epoch
    number in seconds or milliseconds (:func:`series_syntax.epoch_moment`)."""

    default_validators = [validate_moment]

    def to_internal_value(self, value: Any) -> dt.datetime:
        if isinstance(value, str):
            try:
                moment = series_syntax.epoch_moment(value)
            except series_syntax.SyntaxRefused as exc:
                raise serializers.ValidationError(str(exc)) from None
            if moment is not None:
                return moment
        return super().to_internal_value(value)


@extend_schema_field(
    {
        "type": "string",
        "description": "Seconds (300), a count and a unit s, m, h, d or w (30s, 5m, 1h, 1d), "
        "or ISO 8601 (PT1H).",
        "example": "5m",
    }
)
class DurationTextField(serializers.Field):
    """A duration inside the bounds in the series syntax (:func:`series_syntax.duration`):
    the one way every series endpoint reads a step and a window."""

    default_error_messages = {"invalid": "Not a duration."}

    def to_internal_value(self, data: Any) -> dt.timedelta:
        if not isinstance(data, str | int | float) or isinstance(data, bool):
            self.fail("invalid")
        try:
            found = series_syntax.duration(str(data))
        except series_syntax.TooLarge:
            found = LONGEST * 2  # refused below with the message of every duration bound
        except series_syntax.SyntaxRefused as exc:
            raise serializers.ValidationError(str(exc)) from None
        try:
            validate_duration(found)
        except ValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None
        return found

    def to_representation(self, value: dt.timedelta) -> str:
        return f"{int(value.total_seconds())}s"


class MillisecondsField(serializers.FloatField):
    """A duration in milliseconds, from 0 to ``LONGEST``: a span duration filter."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=0, max_value=LONGEST / dt.timedelta(milliseconds=1), **kwargs)

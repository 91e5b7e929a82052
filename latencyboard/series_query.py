"""The one place series endpoints read their window and step, and refuse what costs too much.

Every series endpoint (percentiles, stage breakdown, bottleneck, deployments, attribute
breakdown, SLA attainment) takes ``start``/``end`` (ISO 8601 or epoch seconds or
milliseconds) or ``window`` (a duration ending now), and ``step`` in one syntax
(:mod:`latencyboard.series_syntax`). The window's end is never after now: a later ``end`` is
read as now. Before any query, the number of points (step buckets times the series asked for)
is checked against :data:`MAX_POINTS`: beyond it the request is refused with a 400 naming the
step and the smallest step that fits, so a 400-day window at one-minute steps costs a few
microseconds, not seconds and megabytes.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, ClassVar

from django.utils import timezone
from rest_framework import serializers

from latencyboard import bounds, series_syntax, windows

MAX_POINTS = windows.MAX_POINTS
"""Most step buckets times series one answer may hold."""


def step_help(rule: str) -> str:
    return (
        f"Bucket length: seconds (300), 30s, 5m, 1h, 1d or ISO 8601 (PT1H). {rule} At most "
        f"{MAX_POINTS} buckets times series per request; beyond, a 400 names the smallest "
        "step that fits."
    )


class SeriesQuerySerializer(serializers.Serializer[Any]):
    """``start`` and ``end``, or ``window``, and ``step``; validated data hold aware UTC
    ``start`` and ``end`` (end at most ``now``, which they hold too) and a timedelta ``step``.

    Context: ``now`` (default: the clock) and ``series`` (how many series each bucket holds,
    default 1) for the point budget. Subclasses set :attr:`default_window` (None: start/end
    or window required) and check their step's own rule in :meth:`check_step`.
    """

    start = bounds.MomentField(required=False, help_text="Window start, with end.")
    end = bounds.MomentField(
        required=False,
        help_text="Window end (exclusive), with start; a moment after now is read as now.",
    )
    window = bounds.DurationTextField(
        required=False,
        help_text="Instead of start and end: the window ending now, like 24h or 7d (same "
        f"syntax as step). At most {windows.MAX_SERIES_WINDOW.days}d.",
    )
    step = bounds.DurationTextField(
        default=dt.timedelta(hours=1), help_text=step_help("Default 1h.")
    )

    default_window: ClassVar[dt.timedelta | None] = dt.timedelta(days=1)
    max_points: ClassVar[int] = MAX_POINTS
    longest: ClassVar[dt.timedelta | None] = windows.MAX_SERIES_WINDOW
    on_grid: ClassVar[bool] = True
    """Whether buckets lie on the epoch-anchored step grid (else they start at ``start``)."""
    """The longest window; None for an endpoint whose cost does not grow with it."""

    def check_step(self, step: dt.timedelta) -> None:
        """Raise ValueError when this endpoint cannot serve ``step``."""
        seconds = step.total_seconds()
        if not seconds.is_integer():
            raise ValueError("The step must be a whole number of minutes.")
        windows.check_step(int(seconds))

    def validate_step(self, step: dt.timedelta) -> dt.timedelta:
        try:
            self.check_step(step)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from exc
        return step

    def now(self) -> dt.datetime:
        now: dt.datetime | None = self.context.get("now")
        return now if now is not None else timezone.now()

    def window_of(self, attrs: dict[str, Any], now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        """``[start, end)`` as asked: start and end, or the window (or the default) to now."""
        window = attrs.pop("window", None)
        given = bounds.given_window(attrs, window=window is not None)
        if given is not None:
            return given
        length = window or self.default_window
        if length is None:
            raise serializers.ValidationError({"start": ["Give start and end, or window."]})
        return now - length, now

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        field = "window" if "window" in attrs else "end"
        start, end = self.window_of(attrs, now)
        end = min(end, now)
        if start >= end:
            raise serializers.ValidationError(
                {field: ["The window must end after it starts, and start before now."]}
            )
        if self.longest is not None and end - start > self.longest:
            raise serializers.ValidationError(
                {field: [f"The window may span at most {self.longest.days} days."]}
            )
        attrs["start"], attrs["end"], attrs["now"] = start, end, now
        if "step" in self.fields:
            self._check_points(start, end, attrs["step"], self.context.get("series", 1))
        return attrs

    def _check_points(
        self, start: dt.datetime, end: dt.datetime, step: dt.timedelta, series: int
    ) -> None:
        if self.on_grid:
            buckets = windows.point_count(start, end, int(step.total_seconds()), 1)
        else:
            buckets = math.ceil((end - start) / step)
        if buckets * max(series, 1) <= self.max_points:
            return
        per_series = max(self.max_points // max(series, 1) - 1, 1)
        fits = series_syntax.fitting_step((end - start) / windows.SECOND / per_series)
        raise serializers.ValidationError(
            {
                "step": [
                    f"{buckets * series} points (buckets times series) asked for, at most "
                    f"{self.max_points}: use a step of at least {fits}s, a shorter window or "
                    "fewer series."
                ]
            }
        )

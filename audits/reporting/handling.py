"""How each alert of a quarter was handled: when and by whom it was acknowledged and resolved,
and how long that took (pure: no Django).

Times are whole seconds between the moments as the report prints them (to the second, UTC),
so an auditor can recompute every duration from ``alerts.csv`` alone.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

ACKNOWLEDGED: Final = "acknowledged"
RESOLVED: Final = "resolved"
AUTOMATIC: Final = "automatic"
"""Who made a transition the evaluator made (an alert closed after enough clean windows)."""


@dataclass(frozen=True, slots=True)
class Transition:
    """A change of an alert's status; ``who`` is None for the evaluator."""

    to_status: str
    at: dt.datetime
    who: str | None


@dataclass(frozen=True, slots=True)
class Step:
    at: dt.datetime
    by: str


@dataclass(frozen=True, slots=True)
class HandledAlert:
    alert_id: int
    pipeline: str
    stage: str
    rule: str
    severity: str
    started_at: dt.datetime
    acknowledged: Step | None
    resolved: Step | None
    summary: str

    @property
    def seconds_to_acknowledge(self) -> int | None:
        return None if self.acknowledged is None else seconds(self.started_at, self.acknowledged.at)

    @property
    def seconds_to_resolve(self) -> int | None:
        return None if self.resolved is None else seconds(self.started_at, self.resolved.at)


@dataclass(frozen=True, slots=True)
class Durations:
    """Of the alerts that reached a status: how many, the median and the longest time."""

    count: int
    median_s: float | None
    max_s: int | None


@dataclass(frozen=True, slots=True)
class PipelineHandling:
    pipeline: str
    alerts: int
    acknowledge: Durations
    resolve: Durations


def _second(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(microsecond=0)


def seconds(start: dt.datetime, end: dt.datetime) -> int:
    """Whole seconds from ``start`` to ``end``, both cut to the second as printed."""
    return int((_second(end) - _second(start)).total_seconds())


def first_step(transitions: Iterable[Transition], status: str) -> Step | None:
    """The first transition into ``status`` (transitions oldest first), with who made it."""
    for t in transitions:
        if t.to_status == status:
            return Step(t.at, AUTOMATIC if t.who is None else t.who)
    return None


def _durations(values: Sequence[int]) -> Durations:
    if not values:
        return Durations(0, None, None)
    return Durations(len(values), float(statistics.median(values)), max(values))


def per_pipeline(
    pipelines: Sequence[str], alerts: Sequence[HandledAlert]
) -> tuple[PipelineHandling, ...]:
    """One row per pipeline of the report, in its order, those without alerts included."""
    rows = []
    for pipeline in pipelines:
        mine = [a for a in alerts if a.pipeline == pipeline]
        acknowledge = [a.seconds_to_acknowledge for a in mine]
        resolve = [a.seconds_to_resolve for a in mine]
        rows.append(
            PipelineHandling(
                pipeline,
                len(mine),
                _durations([s for s in acknowledge if s is not None]),
                _durations([s for s in resolve if s is not None]),
            )
        )
    return tuple(rows)

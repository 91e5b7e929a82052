"""Which traces a thinned day keeps, and which days are due (pure: numpy, no Django).

A day past the hot period keeps every trace with an error, every trace with a root span
slower than its pipeline's p99 of that minute, and a uniform sample of the rest chosen by
trace id alone, so a trace is kept or dropped whole, on every day it touches, by every run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from latencyboard.sketches.sketch import Sketch

BoolArray = npt.NDArray[np.bool_]
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SCALE = 2.0**64
SLOW_QUANTILE = 0.99


@dataclass(frozen=True, slots=True)
class TraceFlags:
    """One entry per trace of a day: its id (16 bytes each, end to end) and why it may stay.

    ``kept_nearby`` marks traces with spans in a neighbouring day already thinned: they were
    kept there, so they are kept here too and stay whole across midnight."""

    trace_ids: bytes
    error: BoolArray
    slow: BoolArray
    kept_nearby: BoolArray

    def __len__(self) -> int:
        return len(self.error)


@dataclass(frozen=True, slots=True)
class Selection:
    """The traces a thinned day keeps, and how many for each reason (each trace counted
    under its first reason: error, then slow, then sample)."""

    keep: BoolArray
    errors: int
    slow: int
    sampled: int

    @property
    def kept(self) -> int:
        return self.errors + self.slow + self.sampled


def sampled(trace_ids: bytes, percent: float) -> BoolArray:
    """Whether each trace (16-byte ids end to end) falls in the ``percent`` sample.

    The two halves of the id are folded and mixed (SplitMix64's finaliser), so that ids that
    are not random (sequential, or random only in part) still sample uniformly; the same id
    always gets the same answer, and a larger percent keeps a superset.
    """
    halves = np.frombuffer(trace_ids, dtype="<u8").astype(np.uint64)
    x = halves[0::2] ^ halves[1::2]
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _MIX_1
        x = (x ^ (x >> np.uint64(27))) * _MIX_2
        x = x ^ (x >> np.uint64(31))
    return x.astype(np.float64) < percent / 100 * _SCALE


def select(flags: TraceFlags, percent: float) -> Selection:
    """Keep errors, slow traces, those kept next door, and the ``percent`` sample of the rest."""
    chosen = sampled(flags.trace_ids, percent) | flags.kept_nearby
    slow = flags.slow & ~flags.error
    by_sample = chosen & ~flags.error & ~flags.slow
    return Selection(
        flags.error | flags.slow | chosen,
        int(np.count_nonzero(flags.error)),
        int(np.count_nonzero(slow)),
        int(np.count_nonzero(by_sample)),
    )


def slow_thresholds_ms(sketches: Iterable[bytes]) -> list[float]:
    """The p99 of each end-to-end minute sketch: a root span above it is a slow trace."""
    return [Sketch.from_bytes(blob).quantile(SLOW_QUANTILE) for blob in sketches]


def due_days(
    days: Iterable[dt.date], thinned: Iterable[dt.date], now: dt.datetime, hot_days: int
) -> list[dt.date]:
    """Days of ``days`` wholly past the hot period and not thinned yet, oldest first."""
    done = set(thinned)
    cutoff = now.astimezone(dt.UTC) - dt.timedelta(days=hot_days)
    return sorted(
        day
        for day in days
        if day not in done
        and dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC) <= cutoff
    )

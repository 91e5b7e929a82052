"""Values of the Prometheus-compatible API's series at instants and over ranges.

A sample at time ``t`` of a range query with step ``s`` describes ``[t - s, t)``: the rollup
rows of that step merged once (quantiles from the merged sketches, never averaged). Steps
lie on the rollup grid (:func:`series_syntax.fitting_step`): a step the grid cannot serve,
or one that would give more than ``series_query.MAX_POINTS`` points per pipeline, is
coarsened to the next that fits, and samples fall on its multiples since the Unix epoch. No
sample is after now. An instant query at ``t`` describes the last whole :data:`LOOKBACK`
before ``t`` on that step's grid (its sample is stamped ``t``). Buckets without spans have no
sample, as a Prometheus series has gaps.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
from django.contrib.auth.models import AnonymousUser, User

from latencyboard import bounds, series_query, series_syntax, windows
from latencyboard.pipelines.models import Stage
from latencyboard.prometheus import series as catalogue
from latencyboard.prometheus.promql import Unsupported
from latencyboard.rollups.queries import PercentileSeries, percentile_series
from latencyboard.sla import queries as sla_queries
from latencyboard.sla.models import Objective

LOOKBACK: Final = dt.timedelta(minutes=5)
"""What an instant query describes: as Prometheus' default lookback."""

Sample = tuple[float, float]  # Unix seconds, value


@dataclass(frozen=True, slots=True)
class Grid:
    """Samples at ``first``, ``first + step``, …, ``last``, each describing the step before."""

    first: dt.datetime
    last: dt.datetime
    step: dt.timedelta

    @property
    def empty(self) -> bool:
        return self.first > self.last


def range_grid(
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
    series_per_pipeline: int,
    now: dt.datetime,
) -> Grid:
    """The samples of a range query, its step coarsened as the module doc says; raises
    :class:`Unsupported` when what they read, from a step before the first, is longer than
    ``windows.MAX_SERIES_WINDOW``."""
    end = min(end, now)
    span = max((end - start).total_seconds(), 0.0)
    per_series = max(series_query.MAX_POINTS // max(series_per_pipeline, 1) - 2, 1)
    seconds = series_syntax.fitting_step(max(step.total_seconds(), span / per_series))
    width = dt.timedelta(seconds=seconds)
    grid = Grid(windows.ceil_to(start, width), windows.floor_to(end, width), width)
    if not grid.empty and grid.last - (grid.first - width) > windows.MAX_SERIES_WINDOW:
        raise Unsupported(
            f"The range, with the step its first sample describes, may span at most "
            f"{windows.MAX_SERIES_WINDOW.days} days."
        )
    return grid


def instant_grid(time: dt.datetime, now: dt.datetime) -> Grid:
    """The one sample of an instant query at ``time`` (at most now)."""
    moment = windows.floor_to(min(time, now), LOOKBACK)
    return Grid(moment, moment, LOOKBACK)


def values(
    user: User | AnonymousUser,
    chosen: Sequence[catalogue.Series],
    grid: Grid,
    now: dt.datetime,
    stamp: float | None = None,
) -> list[list[Sample]]:
    """The samples of each of ``chosen`` on ``grid``; ``stamp`` (an instant query's time)
    replaces the grid's timestamps when given."""
    if grid.empty or grid.first - grid.step < bounds.EARLIEST:
        return [[] for _ in chosen]
    by_pipeline: dict[int, list[int]] = defaultdict(list)
    found: list[list[Sample]] = [[] for _ in chosen]
    for index, entry in enumerate(chosen):
        if entry.objective_id is None:
            by_pipeline[entry.pipeline_id].append(index)
        else:
            found[index] = _attainment(entry.objective_id, grid, now, stamp)
    for pipeline_id, indexes in by_pipeline.items():
        figures = _figures(user, pipeline_id, [chosen[i] for i in indexes], grid)
        for index in indexes:
            found[index] = _samples(chosen[index], figures, grid, stamp)
    return found


def _figures(
    user: User | AnonymousUser,
    pipeline_id: int,
    chosen: Sequence[catalogue.Series],
    grid: Grid,
) -> PercentileSeries:
    asked = list(dict.fromkeys(entry.stage_id for entry in chosen))
    # A stage deleted since the series were chosen has no samples, the others theirs.
    ids = [stage for stage in asked if stage is not None]
    kept = set(
        Stage.objects.filter(pipeline_id=pipeline_id, pk__in=ids).values_list("pk", flat=True)
    )
    stages = [stage for stage in asked if stage is None or stage in kept]
    levels = sorted({entry.quantile for entry in chosen if entry.quantile is not None}) or [0.5]
    return percentile_series(
        user, pipeline_id, stages, grid.first - grid.step, grid.last, grid.step, levels
    )


def _samples(
    entry: catalogue.Series, figures: PercentileSeries, grid: Grid, stamp: float | None
) -> list[Sample]:
    rows = [stage.id for stage in figures.stages]
    if entry.stage_id not in rows:
        return []
    row = rows.index(entry.stage_id)
    step = figures.step_seconds
    # Bucket i ends at start + (i + 1) * step; a sample is stamped with its bucket's end.
    ends = int(figures.start.timestamp()) + step * np.arange(1, figures.bucket_count + 1)
    values, present = _values(entry, figures, row, step)
    kept = present & (ends >= grid.first.timestamp()) & (ends <= grid.last.timestamp())
    if stamp is not None:  # an instant query: one sample, of the whole lookback
        last = np.flatnonzero(kept)[-1:]
        return [(stamp, float(values[i])) for i in last]
    return list(zip(ends[kept].astype(np.float64).tolist(), values[kept].tolist(), strict=True))


def _values(
    entry: catalogue.Series, figures: PercentileSeries, row: int, step: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Each bucket's value of ``entry`` in ``row``, and whether the bucket has one: a count and
    a rate always, a ratio or a quantile only where the bucket has requests (and, for a
    quantile, a figure)."""
    n = figures.points.n[row].astype(np.float64)
    if entry.metric == catalogue.REQUESTS:
        return n, np.ones(n.shape, dtype=bool)
    if entry.metric == catalogue.REQUEST_RATE:
        return n / step, np.ones(n.shape, dtype=bool)
    if entry.metric == catalogue.ERROR_RATIO:
        return figures.points.error_rate[row].astype(np.float64), n != 0
    level = figures.quantiles.index(entry.quantile)
    milliseconds = figures.points.quantiles_ms[row, :, level].astype(np.float64)
    return milliseconds / 1000, (n != 0) & ~np.isnan(milliseconds)


def _attainment(
    objective_id: int, grid: Grid, now: dt.datetime, stamp: float | None
) -> list[Sample]:
    objective = Objective.objects.get(pk=objective_id)
    series = sla_queries.attainment(objective, grid.first - grid.step, grid.last, grid.step, now)
    return [
        (float(bucket.end.timestamp()) if stamp is None else stamp, bucket.good / bucket.total)
        for bucket in series.buckets
        if bucket.total
    ]

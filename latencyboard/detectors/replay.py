"""Would a rule have fired? The regression detector replayed minute by minute over stored
minute sketches, and its findings stepped through the alert lifecycle (pure: no Django).

Each evaluation at minute ``t`` tests the window of minutes ``[t - window, t)`` against the
baselines, exactly as the minute evaluation does. Running the detector at every minute of a
week is wasteful, so the replay runs it only where it could matter: while an alert is open
(to count clean evaluations), and where some (stage, quantile) test's own p-value is at most
the family's significance level. That screen cannot miss a firing: Holm's procedure rejects
nothing unless the smallest p-value is at most ``alpha / m``, and the counts a p-value is
computed from (values in the window, values above the baseline quantile's bucket) are sums
over the window's minutes, so they are found for every minute from running sums. So is the
rank test's ``U`` (pairs of a window value above a baseline value): its p-value needs the
window's ties too, so the screen takes the smallest p-value any ties could give.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from latencyboard.detectors import lifecycle, regression
from latencyboard.detectors.tail import counts_above_many, pairs_above_many
from latencyboard.sketches.sketch import merge_many
from latencyboard.stats.binomial import binomial_upper_tail
from latencyboard.stats.labels import quantile_label
from latencyboard.stats.rank import MIN_VALUES, smallest_p_values
from latencyboard.windows import MINUTE

FOREVER = dt.datetime.max.replace(tzinfo=dt.UTC)

OUTCOMES = {
    regression.Status.REGRESSION: lifecycle.Outcome.FIRING,
    regression.Status.OK: lifecycle.Outcome.CLEAN,
}


class OutOfTime(Exception):
    """The replay passed its deadline before it was done."""


def _check(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise OutOfTime


@dataclass(frozen=True)
class ReplayedAlert:
    """An alert the rule would have raised: its stage, when it would have fired and
    resolved (``None``: still open at the end), and its figures at firing."""

    stage: str
    fired_at: dt.datetime
    resolved_at: dt.datetime | None
    quantile: str
    baseline_ms: float
    current_ms: float
    effect_pct: float
    p_value: float


@dataclass(frozen=True)
class Replay:
    """``evaluations`` minutes replayed from ``first`` to ``last`` (evaluation times), the
    detector run on ``detector_runs`` of them; ``pages`` counts the incidents the alerts
    form (alerts overlapping in time page once)."""

    first: dt.datetime
    last: dt.datetime
    evaluations: int
    detector_runs: int
    alerts: tuple[ReplayedAlert, ...]
    pages: int


Baselines = Mapping[str, regression.Baseline]


def replay(
    baselines: Baselines | Sequence[tuple[int, Baselines]],
    minutes: Mapping[str, Mapping[int, bytes]],
    start: dt.datetime,
    count: int,
    window: int,
    rule: regression.RegressionRule,
    clean_needed: int,
    deadline: float = math.inf,
) -> Replay:
    """Replay the detector over the minutes ``start + i`` (``i`` in ``0..count-1``):
    ``minutes[stage][i]`` is that stage's stored sketch (blob) of minute ``i`` (absent: no
    values), ``baselines`` the stages' baselines, or a schedule of them: ``(t, baselines)``
    pairs by ``t``, each used from evaluation ``t`` to the next pair's (the baseline job
    rebuilds them hourly). Evaluations run at every minute boundary from ``start + window``
    to ``start + count``. Raises :class:`OutOfTime` once ``time.monotonic()`` passes
    ``deadline``."""
    schedule = [(window, baselines)] if isinstance(baselines, Mapping) else list(baselines)
    starts = [window] + [max(t, window) for t, _ in schedule[1:]]
    ends = [*starts[1:], count + 1]
    screen = np.zeros(count + 1, dtype=bool)
    ordered = {stage: sorted(rows) for stage, rows in minutes.items()}
    for first, end, (_, used) in zip(starts, ends, schedule, strict=True):
        if first < end:
            screen[first:end] = _segment_screen(
                used, minutes, ordered, first, end, window, rule, deadline
            )
    states = {stage: lifecycle.AlertState() for stage in minutes}
    opened: dict[str, ReplayedAlert] = {}
    alerts: list[ReplayedAlert] = []
    runs = 0
    times = range(window, count + 1)
    which = np.searchsorted(starts, np.arange(count + 1), side="right") - 1
    for t in times:
        if not screen[t] and not opened:
            continue
        _check(deadline)
        runs += 1
        at = start + t * MINUTE
        used = schedule[int(which[t])][1]
        windows = {
            stage: merge_many(rows[i] for i in range(t - window, t) if i in rows)
            for stage, rows in minutes.items()
            if any(i in rows for i in range(t - window, t))
        }
        result = regression.evaluate(used, windows, rule)
        for stage in result.stages:
            outcome = OUTCOMES.get(stage.status, lifecycle.Outcome.NO_DATA)
            states[stage.stage], transition = lifecycle.step(
                states[stage.stage], outcome, clean_needed
            )
            if transition is lifecycle.Transition.FIRED:
                opened[stage.stage] = _fired(stage, at)
            elif transition is lifecycle.Transition.RESOLVED:
                alerts.append(dataclasses.replace(opened.pop(stage.stage), resolved_at=at))
    alerts.extend(opened.values())
    alerts.sort(key=lambda alert: (alert.fired_at, alert.stage))
    return Replay(
        first=start + window * MINUTE,
        last=start + count * MINUTE,
        evaluations=len(times),
        detector_runs=runs,
        alerts=tuple(alerts),
        pages=_pages(alerts),
    )


def _fired(stage: regression.StageResult, at: dt.datetime) -> ReplayedAlert:
    test = stage.strongest
    assert test is not None, "a regressed stage has a fired test"
    return ReplayedAlert(
        stage=stage.stage,
        fired_at=at,
        resolved_at=None,
        quantile=quantile_label(test.q),
        baseline_ms=test.baseline.estimate,
        current_ms=test.current.estimate,
        effect_pct=100.0 * test.effect_relative,
        p_value=test.p_value,
    )


def _segment_screen(
    baselines: Baselines,
    minutes: Mapping[str, Mapping[int, bytes]],
    ordered: Mapping[str, list[int]],
    first: int,
    end: int,
    window: int,
    rule: regression.RegressionRule,
    deadline: float,
) -> np.ndarray:
    """:func:`_screen` of the evaluations ``first .. end - 1`` (their windows' minutes from
    ``first - window``; ``ordered``: each stage's minutes sorted, so a segment's are sliced
    out rather than looked for among all of them)."""
    offset = first - window
    local = {}
    for stage, rows in minutes.items():
        keys = ordered[stage]
        inside = keys[bisect.bisect_left(keys, offset) : bisect.bisect_left(keys, end - 1)]
        local[stage] = {i - offset: rows[i] for i in inside}
    return _screen(baselines, local, end - 1 - offset, window, rule, deadline)[window:]


def _screen(
    baselines: Mapping[str, regression.Baseline],
    minutes: Mapping[str, Mapping[int, bytes]],
    count: int,
    window: int,
    rule: regression.RegressionRule,
    deadline: float,
) -> np.ndarray:
    """For each evaluation minute ``t`` (index ``t``), whether some test of it could be
    significant: its own p-value at most ``significance``."""
    possible = np.zeros(count + 1, dtype=bool)
    qs = rule.quantiles
    for stage, rows in minutes.items():
        _check(deadline)
        baseline = baselines.get(stage)
        if baseline is None or baseline.count < rule.min_baseline_count or not rows:
            continue
        thresholds = [figure.threshold for figure in baseline.figures(qs, rule.confidence)]
        n = np.zeros(count + 1, dtype=np.int64)
        k = np.zeros((count + 1, len(qs)), dtype=np.int64)
        at = np.fromiter(rows.keys(), np.int64, len(rows)) + 1
        n[at], k[at] = counts_above_many(list(rows.values()), thresholds)
        n_sum, k_sum = np.cumsum(n), np.cumsum(k, axis=0)
        n_w = n_sum[window:] - n_sum[:-window]
        k_w = k_sum[window:] - k_sum[:-window]
        possible[window:] |= _rank_screen(
            baseline, list(rows.values()), at, n_w, count, window, rule
        )
        for j, q in enumerate(qs):
            expected = n_w * (1.0 - q)
            # Only a count above what no change would give can have a small p-value.
            tested = (expected >= rule.min_expected_above) & (k_w[:, j] > expected)
            for w in np.flatnonzero(tested & ~possible[window:]):
                p_value = binomial_upper_tail(int(k_w[w, j]), int(n_w[w]), 1.0 - q)
                possible[window + w] |= p_value <= rule.significance
    return possible


def _rank_screen(
    baseline: regression.Baseline,
    blobs: list[bytes],
    at: np.ndarray,
    n_w: np.ndarray,
    count: int,
    window: int,
    rule: regression.RegressionRule,
) -> np.ndarray:
    """Which windows' rank test could be significant (``n_w``: their values)."""
    keys, counts = baseline.buckets()
    pairs = np.zeros(count + 1)
    pairs[at] = pairs_above_many(blobs, keys, counts)[1]
    pairs_sum = np.cumsum(pairs)
    u_w = pairs_sum[window:] - pairs_sum[:-window]
    # Only a U above its no-change mean can have a small p-value.
    tested = (n_w >= MIN_VALUES) & (u_w > n_w * baseline.count / 2.0)
    found = np.zeros(n_w.size, dtype=bool)
    if tested.any():
        bound = smallest_p_values(u_w[tested], n_w[tested], counts)
        found[tested] = bound <= rule.significance
    return found


def _pages(alerts: list[ReplayedAlert]) -> int:
    """How many incidents the alerts form: an alert firing while another is open joins it."""
    pages = 0
    open_until: dt.datetime | None = None
    for alert in sorted(alerts, key=lambda a: a.fired_at):
        until = alert.resolved_at or FOREVER
        if open_until is None or alert.fired_at >= open_until:
            pages += 1
            open_until = until
        else:
            open_until = max(open_until, until)
    return pages

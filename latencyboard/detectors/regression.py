"""Did a stage regress? Binomial tail counts and a rank test of a recent window against the
stage's baseline.

The tests
    For each stage and each tested quantile ``q`` (p90, p95, p99 by default), count the ``k``
    of the window's ``n`` values above the baseline's ``q`` quantile (above its bucket, see
    :mod:`latencyboard.detectors.tail`). With no change, each value lands there with probability
    at most ``1 - q``, so ``k`` is at most ``Binomial(n, 1 - q)`` and ``P(K >= k)`` is a valid
    one-sided p-value, whatever the latency distribution.

    Beside them, a Mann-Whitney rank test of the window's buckets against the baseline's
    (:mod:`latencyboard.stats.rank`, from ``MIN_VALUES`` values): the counts see a tail that
    grew, the rank test a whole distribution that moved, which the counts miss when it is
    wide in log space. Its figures are the medians' (reported as p50), and its effect is the
    median's change.

When it fires
    Only when all three hold for one (stage, test):

    * the p-value is rejected by Holm's procedure over every (stage, quantile) tested in the
      evaluation, at the rule's family-wise ``significance``;
    * the window's quantile exceeds the baseline's by ``min_relative_effect`` **and**
      ``min_absolute_effect_ms`` (a real but immaterial change is not worth a page), the
      relative floor taken to the sketch's resolution (see ``_decide``);
    * the window holds enough values: ``n * (1 - q) >= min_expected_above`` (p99 needs 500
      values, p95 100, p90 50, with the default 5; the rank test 20).

    A stage whose baseline has fewer than ``min_baseline_count`` values is "not ready" and
    takes no part (its quantile would be too uncertain to test against).

Why p90 too
    The count test alone finds a +25% shift easily at p95 and p99, but the effect floor
    compares the window's own quantile, and the p99 of 600 values (10 minutes at 1 request/s)
    is its 6th largest: it wanders by +-15% around the truth, so a +25% shift reads below
    +20% a fifth of the time. The p90 of the same window is three times steadier, and a shift
    of a stage moves its p90 as much as its p99; with it, +25% shifts are found within 10
    minutes in >= 95% of the simulated trials (``make bench-detector``).

The false-alarm budget
    Holm bounds the chance that an evaluation of an unchanged pipeline fires at
    ``significance`` (the family: every stage's counts and rank test). Evaluated every
    minute, 30 days are 43,200 evaluations; an alarm episode needs at least one firing
    evaluation, so the expected number of false alarms is at most ``43,200 * significance``.
    The default ``1e-5`` gives at most 0.43 per pipeline per 30 days before the effect floor,
    which removes most of the rest, inside the budget of 1. Against the trailing week a
    stage with a daily cycle of more than the effect floor would fire at its slow hours
    every day: the baseline is the same hours of the previous days once they hold the
    values (:mod:`latencyboard.detectors.seasonal`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Final

import numpy as np

from latencyboard.detectors.tail import Threshold, bucket_counts, count_above, threshold_of
from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.binomial import binomial_upper_tail, holm_rejections
from latencyboard.stats.interval import Interval, quantile_intervals
from latencyboard.stats.rank import MIN_VALUES, rank_shift

__all__ = [
    "Baseline",
    "Evaluation",
    "Method",
    "QuantileTest",
    "RegressionRule",
    "StageResult",
    "Status",
    "evaluate",
    "large_enough",
    "quantile_tests",
]

DEFAULT_QUANTILES: Final = (0.9, 0.95, 0.99)
MEDIAN: Final = 0.5
"""The rank test's figures are the medians'."""


class Method(StrEnum):
    """Which test found a change."""

    COUNT = "count"
    """Values above the baseline quantile, binomial."""
    RANK = "rank"
    """Mann-Whitney rank test of the whole distribution."""


class Status(StrEnum):
    """What an evaluation (or one stage of it) concluded."""

    NOT_READY = "not_ready"
    """Baseline too small: no test, no alert."""
    NO_DATA = "no_data"
    """Too few values in the window for any quantile test: neither firing nor clean (an
    alert must not resolve because traffic stopped)."""
    OK = "ok"
    REGRESSION = "regression"


@dataclass(frozen=True)
class Baseline:
    """A stage's latencies over a trailing window, or over the same hours of the previous
    days (``seasonal``, :mod:`latencyboard.detectors.seasonal`), as the baseline job stores
    them."""

    sketch: Sketch
    window_start: datetime
    window_end: datetime
    seasonal: bool = False
    _figures: dict[tuple[tuple[float, ...], float], tuple[_BaselineFigure, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _buckets: list[tuple[np.ndarray, np.ndarray]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    @property
    def count(self) -> int:
        """Values in the baseline (its ``n``)."""
        return self.sketch.count

    def figures(self, qs: tuple[float, ...], confidence: float) -> tuple[_BaselineFigure, ...]:
        """Threshold and interval of each quantile, worked out once per baseline: a baseline
        is rebuilt hourly and tested against every minute."""
        key = (qs, confidence)
        if key not in self._figures:
            intervals = quantile_intervals(self.sketch, qs, confidence)
            self._figures[key] = tuple(
                _BaselineFigure(threshold_of(self.sketch, q), interval)
                for q, interval in zip(qs, intervals, strict=True)
            )
        return self._figures[key]

    def buckets(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`bucket_counts` of the baseline, worked out once."""
        if not self._buckets:
            self._buckets.append(bucket_counts(self.sketch))
        return self._buckets[0]


@dataclass(frozen=True)
class _BaselineFigure:
    threshold: Threshold
    interval: Interval


@dataclass(frozen=True)
class RegressionRule:
    """The detector's settings (the defaults are the documented ones)."""

    quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    significance: float = 1e-5
    """Family-wise false-alarm probability per evaluation (Holm over stages x quantiles): the
    alert rule's ``significance``."""
    min_relative_effect: float = 0.20
    min_absolute_effect_ms: float = 5.0
    min_baseline_count: int = 10_000
    """Below this a stage's baseline is not ready (100 values above its p99)."""
    min_expected_above: float = 5.0
    """A quantile is tested only when the window expects this many values above it."""
    confidence: float = 0.95
    """Of the quantile intervals kept as evidence (``ALERT_EVIDENCE_CONFIDENCE_PERCENT``): they
    describe the change at a level the alert page states. Not the decision's: at one minus a
    significance of 1e-5 a p99 interval of a 10-minute window mostly has no upper bound."""


@dataclass(frozen=True)
class QuantileTest:
    """The evidence for one (stage, quantile)."""

    q: float
    baseline: Interval
    current: Interval
    n: int
    """Values in the window."""
    k: int
    """Of them, above the baseline quantile's bucket."""
    threshold_ms: float
    """The value ``k`` counts above (the upper edge of the baseline quantile's bucket)."""
    p_value: float
    significant: bool
    """Rejected by Holm's procedure over the evaluation."""
    effect_ms: float
    effect_relative: float
    fired: bool
    method: Method = Method.COUNT


@dataclass(frozen=True)
class StageResult:
    """One stage of an evaluation; ``tests`` is empty when not ready or too few values."""

    stage: str
    status: Status
    baseline_count: int
    n: int
    tests: tuple[QuantileTest, ...] = field(default=())

    @property
    def strongest(self) -> QuantileTest | None:
        """The fired test with the largest effect in ms (``None`` when none fired)."""
        fired = [test for test in self.tests if test.fired]
        return max(fired, key=lambda test: test.effect_ms) if fired else None


@dataclass(frozen=True)
class Evaluation:
    """An evaluation of every stage of a pipeline at one time."""

    status: Status
    stages: tuple[StageResult, ...]
    grew_most: str | None
    """The firing stage whose self time grew most (ms at its strongest quantile)."""

    @property
    def firing(self) -> tuple[StageResult, ...]:
        """The stages that regressed."""
        return tuple(stage for stage in self.stages if stage.status is Status.REGRESSION)


@dataclass(frozen=True)
class _Pending:
    """A quantile test before the Holm step, which needs every p-value of the family."""

    q: float
    baseline: Interval
    current: Interval
    n: int
    k: int
    threshold_ms: float
    p_value: float
    method: Method = Method.COUNT


def _rank_pending(baseline: Baseline, window: Sketch, rule: RegressionRule) -> list[_Pending]:
    """The rank test, when the window has the values for it."""
    if window.count < MIN_VALUES:
        return []
    (figure,) = baseline.figures((MEDIAN,), rule.confidence)
    (current,) = quantile_intervals(window, (MEDIAN,), rule.confidence)
    shift = rank_shift(*baseline.buckets(), *bucket_counts(window))
    return [
        _Pending(
            MEDIAN,
            figure.interval,
            current,
            window.count,
            count_above(window, [figure.threshold])[0],
            figure.threshold.upper_edge_ms,
            shift.p_value,
            Method.RANK,
        )
    ]


def _pending(baseline: Baseline, window: Sketch, rule: RegressionRule) -> list[_Pending]:
    """The tests a window supports (ignoring quantiles with too few values)."""
    ranked = _rank_pending(baseline, window, rule)
    qs = tuple(q for q in rule.quantiles if window.count * (1.0 - q) >= rule.min_expected_above)
    if not qs:
        return ranked
    currents = quantile_intervals(window, qs, rule.confidence)
    figures = baseline.figures(qs, rule.confidence)
    above = count_above(window, [figure.threshold for figure in figures])
    pending = []
    for q, figure, current, k in zip(qs, figures, currents, above, strict=True):
        pending.append(
            _Pending(
                q,
                figure.interval,
                current,
                window.count,
                k,
                figure.threshold.upper_edge_ms,
                binomial_upper_tail(k, window.count, 1.0 - q),
            )
        )
    return ranked + pending


def large_enough(effect_ms: float, base_ms: float, rule: RegressionRule) -> bool:
    """Whether a change of ``effect_ms`` from ``base_ms`` (both from sketch figures) passes
    the rule's minimum effect."""
    effect_relative = effect_ms / base_ms if base_ms > 0 else math.inf
    # Both figures are bucket estimates, so their ratio moves in steps of GAMMA (~2%): the
    # relative floor is applied to the sketch's resolution (1.197 is the step nearest 1.2).
    floor = (1.0 + rule.min_relative_effect) / (1.0 + RELATIVE_ERROR) - 1.0
    return effect_ms >= rule.min_absolute_effect_ms and effect_relative >= floor


def _decide(pending: _Pending, significant: bool, rule: RegressionRule) -> QuantileTest:
    base, now = pending.baseline.estimate, pending.current.estimate
    effect_ms = now - base
    effect_relative = effect_ms / base if base > 0 else math.inf
    large = large_enough(effect_ms, base, rule)
    return QuantileTest(
        pending.q,
        pending.baseline,
        pending.current,
        pending.n,
        pending.k,
        pending.threshold_ms,
        pending.p_value,
        significant,
        effect_ms,
        effect_relative,
        significant and large,
        pending.method,
    )


def quantile_tests(
    baselines: Mapping[str, Baseline],
    windows: Mapping[str, Sketch],
    rule: RegressionRule,
) -> dict[str, tuple[QuantileTest, ...]]:
    """Test every group (stage, or cohort) that has a ready baseline and a window, with Holm's
    correction over all of their (group, quantile) tests; groups without a test are absent.
    """
    family: list[tuple[str, _Pending]] = []
    for name, window in windows.items():
        baseline = baselines.get(name)
        if baseline is None or baseline.count < rule.min_baseline_count or window.count == 0:
            continue
        family.extend((name, pending) for pending in _pending(baseline, window, rule))
    rejected = holm_rejections([pending.p_value for _, pending in family], rule.significance)
    results: dict[str, list[QuantileTest]] = {}
    for (name, pending), significant in zip(family, rejected, strict=True):
        results.setdefault(name, []).append(_decide(pending, significant, rule))
    return {name: tuple(tests) for name, tests in results.items()}


def evaluate(
    baselines: Mapping[str, Baseline],
    windows: Mapping[str, Sketch],
    rule: RegressionRule | None = None,
) -> Evaluation:
    """Evaluate a pipeline: ``windows`` maps each stage to its recent window's sketch (e.g.
    the last 10 minutes), ``baselines`` each stage to its baseline.

    A stage without a ready baseline is ``NOT_READY``, one whose window is too small for
    any test ``NO_DATA``. The evaluation is ``REGRESSION`` when a stage fired, else ``OK``
    when a stage was tested, else ``NO_DATA`` when a ready stage lacked values, else
    ``NOT_READY``.
    """
    rule = rule or RegressionRule()
    tests = quantile_tests(baselines, windows, rule)
    stages = []
    for name, window in windows.items():
        baseline = baselines.get(name)
        baseline_count = 0 if baseline is None else baseline.count
        if baseline_count < rule.min_baseline_count:
            status = Status.NOT_READY
        elif name not in tests:
            status = Status.NO_DATA
        elif any(test.fired for test in tests[name]):
            status = Status.REGRESSION
        else:
            status = Status.OK
        stages.append(StageResult(name, status, baseline_count, window.count, tests.get(name, ())))
    firing = [stage for stage in stages if stage.status is Status.REGRESSION]
    statuses = {stage.status for stage in stages}
    overall = next(
        (status for status in (Status.REGRESSION, Status.OK, Status.NO_DATA) if status in statuses),
        Status.NOT_READY,
    )
    grew_most = None
    if firing:
        grew_most = max(firing, key=lambda s: s.strongest.effect_ms if s.strongest else 0.0).stage
    return Evaluation(overall, tuple(stages), grew_most)

"""Tests for latencyboard.stats.interval: the one quantile interval of a sketch, which compare
and the regression detector both quote."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from latencyboard.detectors.evidence import (
    change_intervals,
    current_evidence,
    regression_evidence,
)
from latencyboard.detectors.regression import Baseline, RegressionRule, evaluate
from latencyboard.sketches.buckets import GAMMA, RELATIVE_ERROR
from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.comparison import Change, compare_sketches
from latencyboard.stats.interval import quantile_intervals
from latencyboard.stats.labels import quantile_label

WEEK_END = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)


def test_intervals_bracket_the_rank_bounds_within_the_sketch_error() -> None:
    # given 1000 distinct latencies 1..1000 ms
    values = np.arange(1.0, 1001.0)
    sketch = Sketch.from_values(values)
    # when the median and p99 are asked with 95% intervals
    median, p99 = quantile_intervals(sketch, [0.5, 0.99], 0.95)
    # then the estimates are the sketch's and the binomial rank bounds (ranks 468 and 531
    # for the median of 1000, 0-based) are widened to their buckets' edges
    assert median.estimate == sketch.quantile(0.5)
    assert values[468] * (1 - 2 * RELATIVE_ERROR) <= median.low <= values[468]
    assert values[531] <= median.high <= values[531] * (1 + 2 * RELATIVE_ERROR)
    assert p99.low < p99.estimate < p99.high


@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_the_interval_holds_a_quantile_at_the_top_edge_of_its_bucket(q: float) -> None:
    # given 5,000 spans just under a bucket's upper edge gamma**k, between a faster and a
    # slower one: the sketch reports them as the bucket's centre, 2 gamma**k / (gamma + 1),
    # 1% below their value
    value = GAMMA**300 * (1.0 - 1e-12)
    sketch = Sketch.from_values([1.0, *np.full(5_000, value), 1e6])
    # when the quantile's interval is read from the sketch
    (interval,) = quantile_intervals(sketch, [q], 0.95)
    # then it holds the true quantile: widening the top by (1 + 1%) falls short of the edge
    assert interval.low <= value <= interval.high


def test_too_few_values_leave_a_side_open() -> None:
    # given 100 values: the p99's upper bound would need a 101st value
    (p99,) = quantile_intervals(Sketch.from_values(np.arange(1.0, 101.0)), [0.99], 0.95)
    # then the top is unbounded, the bottom still the 97th smallest taken to its bucket's edge
    assert p99.high == np.inf
    assert 97.0 / (1 + 2 * RELATIVE_ERROR) <= p99.low <= 97.0


@pytest.mark.parametrize(
    ("rule_quantiles", "quoted", "significance", "confidence"),
    [
        # compare's own quantiles, at compare's confidence
        ((0.5, 0.95, 0.99), (0.5, 0.95, 0.99), 0.05, 0.95),
        # an alert rule's, which quotes its rank test's median beside them, at another level
        ((0.9, 0.95, 0.99), (0.5, 0.9, 0.95, 0.99), 0.025, 0.975),
        # the default rule's significance, its evidence at the default 95%
        ((0.9, 0.95, 0.99), (0.5, 0.9, 0.95, 0.99), 1e-5, 0.95),
    ],
)
def test_compare_and_an_alert_over_the_same_sketches_quote_the_same_change_interval(
    rule_quantiles: tuple[float, ...],
    quoted: tuple[float, ...],
    significance: float,
    confidence: float,
) -> None:
    # given a week of a stage's latencies and a slower window of it, as sketches
    rng = np.random.default_rng(23)
    week = Sketch.from_values(rng.lognormal(np.log(20.0), 0.5, 20_000))
    window = Sketch.from_values(1.5 * rng.lognormal(np.log(20.0), 0.5, 3_000))
    # when the regression detector tests the window against the week and its alert's
    # evidence is written, at firing and as the latest figures
    rule = RegressionRule(
        quantiles=rule_quantiles, significance=significance, confidence=confidence
    )
    baseline = Baseline(week, WEEK_END - dt.timedelta(days=7), WEEK_END)
    evaluation = evaluate({"model_forward": baseline}, {"model_forward": window}, rule)
    (stage,) = evaluation.firing
    changes = change_intervals(stage, baseline, window, rule)
    fired = regression_evidence(stage, evaluation, changes)
    latest = current_evidence(stage, changes)["quantiles"]
    # and compare is asked about the same two sketches and quantiles at the confidence the
    # alert quotes its evidence at
    compared = compare_sketches(week, window, quantiles=quoted, confidence=confidence)
    # then the alert quotes every one of those quantiles' change with compare's interval,
    # to the last digit, and says at which confidence and over which quantiles
    assert set(latest) == {quantile_label(q) for q in quoted}
    for delta in compared.quantiles:
        figures = latest[quantile_label(delta.q)]
        interval = figures["change_interval"]
        assert (figures["effect_ms"], interval["low_ms"], interval["high_ms"]) == (
            delta.delta_ms,
            delta.ci_low_ms,
            delta.ci_high_ms,
        )
        assert (interval["confidence"], interval["over"]) == (
            confidence,
            [quantile_label(q) for q in quoted],
        )
        assert delta.change is Change.SLOWER
    # and the evidence at firing quotes its quantile's interval too
    assert fired["change_interval"] == latest[fired["quantile"]]["change_interval"]

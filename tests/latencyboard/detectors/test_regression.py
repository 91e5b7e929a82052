"""Tests for latencyboard.detectors.regression: when the binomial tail tests and the rank test
fire, and their evidence."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from latencyboard.detectors.regression import Baseline, Method, RegressionRule, Status, evaluate
from latencyboard.sketches.sketch import Sketch

WEEK_START = datetime(2026, 3, 1, tzinfo=UTC)
WEEK_END = datetime(2026, 3, 8, tzinfo=UTC)


def latencies(
    seed: int, size: int, median_ms: float = 40.0, factor: float = 1.0, sigma: float = 0.3
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.lognormal(np.log(median_ms), sigma, size) * factor


def baseline(
    seed: int, size: int = 100_000, median_ms: float = 40.0, sigma: float = 0.3
) -> Baseline:
    values = latencies(seed, size, median_ms, sigma=sigma)
    return Baseline(Sketch.from_values(values), WEEK_START, WEEK_END)


def window(
    seed: int, size: int = 600, median_ms: float = 40.0, factor: float = 1.0, sigma: float = 0.3
) -> Sketch:
    return Sketch.from_values(latencies(seed, size, median_ms, factor, sigma))


def test_unchanged_stages_do_not_fire() -> None:
    # given two stages whose last 10 minutes look like their week
    baselines = {"preprocess": baseline(1), "model_forward": baseline(2)}
    windows = {"preprocess": window(3), "model_forward": window(4)}
    # when evaluated
    result = evaluate(baselines, windows)
    # then nothing fires, and each stage ran the rank test and all three quantile counts
    assert result.status is Status.OK
    assert result.firing == ()
    assert result.grew_most is None
    for stage in result.stages:
        assert [(test.method, test.q) for test in stage.tests] == [
            (Method.RANK, 0.5),
            (Method.COUNT, 0.9),
            (Method.COUNT, 0.95),
            (Method.COUNT, 0.99),
        ]


def test_a_slower_stage_fires_with_its_evidence() -> None:
    # given model_forward 50% slower over the last 10 minutes
    baselines = {"preprocess": baseline(1), "model_forward": baseline(2)}
    windows = {"preprocess": window(3), "model_forward": window(4, factor=1.5)}
    # when evaluated
    result = evaluate(baselines, windows)
    # then it fires on model_forward only, naming it
    assert result.status is Status.REGRESSION
    assert [stage.stage for stage in result.firing] == ["model_forward"]
    assert result.grew_most == "model_forward"
    p99 = result.firing[0].tests[3]
    # and the evidence is the p99 test: 600 values, far more than 6 above the baseline p99
    assert (p99.q, p99.n) == (0.99, 600)
    assert p99.k > 40
    assert p99.p_value < 1e-20
    assert (p99.significant, p99.fired) == (True, True)
    assert p99.baseline.low < p99.baseline.estimate < p99.baseline.high
    assert p99.current.low < p99.current.estimate < p99.current.high
    assert p99.effect_relative == pytest.approx(0.5, abs=0.15)
    assert p99.effect_ms == pytest.approx(p99.current.estimate - p99.baseline.estimate)
    assert p99.threshold_ms >= p99.baseline.estimate


def test_a_small_baseline_is_not_ready() -> None:
    # given a stage with 5,000 values of baseline (10,000 needed)
    result = evaluate({"model_forward": baseline(1, size=5_000)}, {"model_forward": window(2)})
    # then no test runs and no alert can come from it
    assert result.status is Status.NOT_READY
    assert result.stages[0].status is Status.NOT_READY
    assert result.stages[0].tests == ()


def test_a_stage_without_baseline_is_not_ready_and_the_others_still_fire() -> None:
    baselines = {"model_forward": baseline(1)}
    windows = {"model_forward": window(2, factor=1.5), "rerank": window(3)}
    result = evaluate(baselines, windows)
    assert result.status is Status.REGRESSION
    assert [stage.status for stage in result.stages] == [Status.REGRESSION, Status.NOT_READY]


def test_too_few_values_skip_the_tail_quantiles() -> None:
    # given a window of 150 values: p99 expects 1.5 above it, p95 7.5, p90 15 (5 needed)
    result = evaluate({"model_forward": baseline(1)}, {"model_forward": window(2, size=150)})
    # then only p90 and p95 are counted, beside the rank test
    assert [test.q for test in result.stages[0].tests] == [0.5, 0.9, 0.95]


def test_a_window_too_small_for_any_test_is_no_data() -> None:
    # given 19 values: p90 expects 1.9 above it (5 needed), the rank test needs 20
    result = evaluate({"model_forward": baseline(1)}, {"model_forward": window(2, size=19)})
    # then the stage is neither firing nor clean, so an open alert would stay open
    assert result.status is Status.NO_DATA
    assert (result.stages[0].status, result.stages[0].tests) == (Status.NO_DATA, ())


def test_an_empty_window_is_no_data() -> None:
    result = evaluate({"model_forward": baseline(1)}, {"model_forward": Sketch()})
    assert result.status is Status.NO_DATA


def test_a_significant_but_small_change_does_not_fire() -> None:
    # given 20,000 values 8% slower: overwhelming evidence, but below the +20% floor
    result = evaluate(
        {"model_forward": baseline(1)}, {"model_forward": window(2, size=20_000, factor=1.08)}
    )
    tests = result.stages[0].tests
    assert all(test.significant for test in tests)
    assert not any(test.fired for test in tests)
    assert result.status is Status.OK


def test_a_fast_stage_below_the_absolute_floor_does_not_fire() -> None:
    # given a 2 ms stage 50% slower: +1 ms at the median, +2 ms at p99, under the 5 ms floor
    result = evaluate(
        {"serialize": baseline(1, median_ms=2.0)},
        {"serialize": window(2, median_ms=2.0, factor=1.5)},
    )
    tests = result.stages[0].tests
    assert all(test.significant and test.effect_relative > 0.3 for test in tests)
    assert result.status is Status.OK


def test_the_level_is_corrected_for_every_stage_and_quantile_tested() -> None:
    # given one slower stage among six: 24 tests in the family (a rank test and three
    # counts each)
    stages = ["s0", "s1", "s2", "s3", "s4", "s5"]
    baselines = {name: baseline(i) for i, name in enumerate(stages)}
    windows = {
        name: window(10 + i, factor=1.3 if name == "s3" else 1.0) for i, name in enumerate(stages)
    }
    smallest = min(test.p_value for test in evaluate(baselines, windows).stages[3].tests)
    # when the family-wise level sits just above the smallest p-value, it is not enough:
    # Holm compares the smallest with alpha / 24
    below = evaluate(baselines, windows, replace(RegressionRule(), significance=smallest * 23))
    above = evaluate(baselines, windows, replace(RegressionRule(), significance=smallest * 24))
    assert not any(test.significant for stage in below.stages for test in stage.tests)
    assert any(test.significant for test in above.stages[3].tests)


@pytest.mark.parametrize("seed", range(5))
def test_a_quarter_slower_wide_stage_is_found_by_the_rank_test(seed: int) -> None:
    # given a stage of log-sigma 0.8, its last 10 minutes at 1 request/s 25% slower: few
    # more values pass its p90, p95 or p99 than noise would put there
    result = evaluate(
        {"generate": baseline(seed, sigma=0.8)},
        {"generate": window(100 + seed, factor=1.25, sigma=0.8)},
    )
    # then it fires, the rank test among its reasons, the median's change as its effect
    assert result.status is Status.REGRESSION
    rank = result.firing[0].tests[0]
    assert (rank.method, rank.q, rank.fired) == (Method.RANK, 0.5, True)
    assert rank.effect_relative == pytest.approx(0.25, abs=0.08)
    assert rank.p_value < 1e-6


def test_a_wide_stage_unchanged_does_not_fire() -> None:
    result = evaluate(
        {"generate": baseline(1, sigma=0.8)}, {"generate": window(2, size=6_000, sigma=0.8)}
    )
    assert result.status is Status.OK

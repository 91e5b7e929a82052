"""Tests for latencyboard.detectors.mix: a change of traffic mix told from a cohort's regression."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import numpy as np
import pytest

from latencyboard.detectors.mix import Label, decompose
from latencyboard.detectors.regression import Baseline
from latencyboard.sketches.sketch import Sketch

WEEK_START = datetime(2026, 3, 1, tzinfo=UTC)
WEEK_END = datetime(2026, 3, 8, tzinfo=UTC)


def sketch(seed: int, size: int, factor: float = 1.0) -> Sketch:
    rng = np.random.default_rng(seed)
    return Sketch.from_values(rng.lognormal(np.log(40.0), 0.25, size) * factor)


def baseline(seed: int, size: int, factor: float = 1.0) -> Baseline:
    return Baseline(sketch(seed, size, factor), WEEK_START, WEEK_END)


def test_a_new_slower_version_taking_traffic_is_a_regression_of_that_version() -> None:
    # given a week of v7 only, then 60% of the last 10 minutes on a new v8, 35% slower
    baselines = {"v7": baseline(1, 100_000)}
    windows = {"v7": sketch(2, 400), "v8": sketch(3, 600, factor=1.35)}
    # when split
    result = decompose(baselines, windows)
    # then it is v8's regression, judged against v7 over the same window, not a mix shift
    assert result.label is Label.REGRESSION
    assert result.cohort == "v8"
    assert re.fullmatch(
        r"regression in v8, now 60% of traffic: p(50|99) \+3\d% over v7 "
        r"\([\d.]+ → [\d.]+ ms\)",
        result.message,
    )
    assert [(c.cohort, c.regressed) for c in result.cohorts] == [("v7", False), ("v8", True)]
    assert result.k == sum(cohort.k for cohort in result.cohorts)
    assert result.within_excess + result.mix_excess == pytest.approx(result.k - result.expected)


def test_a_rollout_to_all_traffic_is_judged_against_the_old_versions_baseline() -> None:
    # given a week of v7 only, then every request of the last 10 minutes on a v8 35% slower
    result = decompose({"v7": baseline(1, 100_000)}, {"v8": sketch(3, 600, factor=1.35)})
    assert (result.label, result.cohort) == (Label.REGRESSION, "v8")
    assert re.match(
        r"regression in v8, now 100% of traffic: p(50|99) \+3\d% over v7", result.message
    )


@pytest.mark.parametrize("share", [0.2, 0.6])
def test_a_new_version_as_fast_as_the_old_is_not_named(share: float) -> None:
    # given a new v8 exactly like v7 taking traffic while v7 itself got 50% slower
    baselines = {"v7": baseline(1, 100_000)}
    n8 = int(1000 * share)
    windows = {"v7": sketch(2, 1000 - n8, factor=1.5), "v8": sketch(3, n8, factor=1.5)}
    result = decompose(baselines, windows)
    # then v8 is no regression of its own: it is as slow as v7 in the same minutes
    assert all(not c.regressed for c in result.cohorts if c.cohort == "v8")
    assert not result.message.startswith("regression in v8")


def test_a_slow_canary_taking_more_traffic_is_a_mix_shift() -> None:
    # given a week with v8 at 20% and 35% slower, then v8 at 60% (of 2,000 requests: the
    # pooled p99 already holds v8's tail, so the change is smaller), neither cohort changed
    baselines = {"v7": baseline(1, 80_000), "v8": baseline(2, 20_000, factor=1.35)}
    windows = {"v7": sketch(3, 800), "v8": sketch(4, 1200, factor=1.35)}
    result = decompose(baselines, windows)
    assert result.label is Label.MIX_SHIFT
    assert result.cohort == "v8"
    assert [cohort.regressed for cohort in result.cohorts] == [False, False]


def test_a_mix_shift_caught_mid_way_with_a_chance_excess_is_still_a_mix_shift() -> None:
    # given a week with a 35% slower v8 at 10%, then a window caught mid-way of its move to
    # 90% (v8 at 41%), whose v8 values happen to land above the pooled p99 more often than
    # v8's baseline does: more excess is left within the cohorts than the mix explains, but
    # not significantly more, and neither cohort's own test fires
    baselines = {"v7": baseline(1, 90_000), "v8": baseline(2, 10_000, factor=1.35)}
    windows = {"v7": sketch(1206, 480), "v8": sketch(2206, 330, factor=1.35)}
    result = decompose(baselines, windows)
    assert result.within_excess > result.mix_excess > 0.25 * (result.k - result.expected)
    assert result.p_value < 1e-10 < 1e-5 < result.within_p_value
    assert [cohort.regressed for cohort in result.cohorts] == [False, False]
    # then it is the mix shift it is, not a regression of no one in particular
    assert (result.label, result.cohort) == (Label.MIX_SHIFT, "v8")
    assert result.message.startswith("mix shift: 41% of traffic now on v8, whose p99 is ")


def test_a_regression_inside_one_cohort_names_it() -> None:
    # given v7 and v8 half and half, as in their week, and v8 50% slower now
    baselines = {"v7": baseline(1, 50_000), "v8": baseline(2, 50_000)}
    windows = {"v7": sketch(3, 1000), "v8": sketch(4, 1000, factor=1.5)}
    result = decompose(baselines, windows)
    assert result.label is Label.REGRESSION
    assert result.cohort == "v8"
    assert re.fullmatch(r"regression in v8: p\d+ [\d.]+ → [\d.]+ ms \(\+\d+%\)", result.message)
    assert result.within_excess > 10 * abs(result.mix_excess)


def test_a_regression_and_a_mix_shift_together() -> None:
    # given a week of v7 only; now v7 is 30% slower and a v8 35% slower than v7 was takes 60%
    baselines = {"v7": baseline(1, 100_000)}
    windows = {"v7": sketch(3, 800, factor=1.3), "v8": sketch(4, 1200, factor=1.35)}
    result = decompose(baselines, windows)
    # then both are named: the mix explains well over a quarter of the excess
    assert result.label is Label.MIX_SHIFT_AND_REGRESSION
    assert result.cohort == "v7"
    assert result.mix_excess > 0.25 * (result.k - result.expected)
    assert result.message.startswith("mix shift: 60% of traffic now on v8, whose p99 is ")
    assert "; regression in v7: " in result.message


def test_nothing_changed() -> None:
    baselines = {"v7": baseline(1, 50_000), "v8": baseline(2, 50_000)}
    windows = {"v7": sketch(3, 300), "v8": sketch(4, 300)}
    result = decompose(baselines, windows)
    assert (result.label, result.cohort, result.message) == (Label.NO_CHANGE, None, "no change")


def test_empty_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        decompose({"v7": baseline(1, 50_000)}, {"v7": Sketch()})


def test_a_new_version_slower_than_an_old_one_of_0_ms_is_named_without_a_ratio() -> None:
    # given a week of v7 whose spans took 0 ms (a coarse clock), then a new v8 at about 40 ms
    zero = Sketch.from_values(np.zeros(100_000))
    baselines = {"v7": Baseline(zero, WEEK_START, WEEK_END)}
    # when split
    result = decompose(baselines, {"v7": Sketch.from_values(np.zeros(400)), "v8": sketch(3, 600)})
    # then v8 is the regression, its message quotes both figures and no percentage of 0 ms
    assert (result.label, result.cohort) == (Label.REGRESSION, "v8")
    assert re.fullmatch(
        r"regression in v8, now 60% of traffic: p(50|99) over v7 \(0\.0 → [\d.]+ ms\)",
        result.message,
    )

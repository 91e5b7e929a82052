"""The detector over simulated traffic, reduced to run in CI (the full run is
``make bench-detector``): no false alarm over two days, +25% shifts found within 10 minutes,
a move to a slower version labelled a mix shift."""

from __future__ import annotations

import numpy as np
import pytest

from latencyboard.detectors import mix
from latencyboard.detectors.simulations import steady


@pytest.fixture(scope="module")
def pipeline_with_baseline() -> tuple[steady.Pipeline, dict, np.random.Generator]:
    rng = np.random.default_rng(20260301)
    pipeline = steady.Pipeline.draw(rng)
    return pipeline, steady.week_of_baselines(pipeline, rng), rng


def test_two_days_of_unchanged_traffic_raise_no_alarm() -> None:
    # given 2,880 evaluations: the rule's budget allows 0.03 false alarms in expectation
    run = steady.false_alarm_run(seed=7, days=2)
    assert run.evaluations == 2 * 1440
    assert (run.alarms, run.firing_evaluations) == (0, 0)


def test_a_25_percent_shift_is_found_within_10_minutes(
    pipeline_with_baseline: tuple[steady.Pipeline, dict, np.random.Generator],
) -> None:
    pipeline, baselines, rng = pipeline_with_baseline
    # when one random stage gets 25% slower at a random time, 40 times
    trials = [steady.detection_trial(pipeline, baselines, rng) for _ in range(40)]
    # then at least 36 alerts (90%; the full run asks 95% of 200) come within 10 minutes,
    # each naming the stage that was shifted
    on_time = [t for t in trials if t.delay_seconds is not None and t.delay_seconds <= 600]
    assert len(on_time) >= 36
    assert all(t.named_stage == t.stage for t in on_time)


def test_a_move_to_a_new_slower_version_is_labelled_its_regression(
    pipeline_with_baseline: tuple[steady.Pipeline, dict, np.random.Generator],
) -> None:
    pipeline, baselines, rng = pipeline_with_baseline
    trials = [steady.mix_trial(pipeline, baselines, rng) for _ in range(10)]
    named = [t for t in trials if t.label is mix.Label.REGRESSION]
    assert len(named) >= 9
    assert all((t.message or "").startswith("regression in v8, now ") for t in named)

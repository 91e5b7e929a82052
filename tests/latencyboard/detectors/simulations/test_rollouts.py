"""Rollouts on production-like traffic, reduced to run in CI (the full run is
``make bench-detector``): traffic moving between two baselined versions, far enough to take
the stage past the rule's floor, is a mix shift, never a regression of either version."""

from __future__ import annotations

import numpy as np
import pytest

from latencyboard.detectors import mix, regression
from latencyboard.detectors.simulations import diurnal as sim
from latencyboard.detectors.simulations import rollouts as rollouts

MIX_SHIFT = rollouts.Rollout("v8 10% -> 90%", 0.1, 0.9, 1.35, expected=(mix.Label.MIX_SHIFT, "v8"))
BELOW_FLOOR = rollouts.Rollout("v8 20% -> 60%", 0.2, 0.6, 1.35, expected=MIX_SHIFT.expected)
BUSY = np.flatnonzero(sim.rate_per_second(np.arange(sim.DAY)) >= 1.0)


@pytest.fixture(scope="module")
def rng() -> np.random.Generator:
    return np.random.default_rng(20261127)


@pytest.fixture(scope="module")
def pipeline(rng: np.random.Generator) -> sim.DiurnalPipeline:
    return sim.DiurnalPipeline.draw(rng)


def _trials(
    pipeline: sim.DiurnalPipeline, rng: np.random.Generator, rollout: rollouts.Rollout, count: int
) -> list[rollouts.RolloutTrial]:
    baselines = rollouts.rollout_baselines(pipeline, rng, rollout)
    return [
        rollouts.rollout_trial(pipeline, rng, rollout, baselines, int(rng.choice(BUSY)))
        for _ in range(count)
    ]


def test_a_mix_shift_past_the_floor_is_labelled_a_mix_shift(
    pipeline: sim.DiurnalPipeline, rng: np.random.Generator
) -> None:
    # given v7 and a 35% slower v8, both baselined, v8's share moving from 10% to 90% (the
    # stage +25% or more at every tested quantile, neither version's own latency changing)
    rule = regression.RegressionRule()
    levels = (0.5, *rule.quantiles)
    change = rollouts.true_change(pipeline, rng, MIX_SHIFT, levels)
    assert all(regression.large_enough(a - b, b, rule) for b, a in change)
    # when it happens 8 times at a busy hour
    trials = _trials(pipeline, rng, MIX_SHIFT, 8)
    # then every one alerts, as a mix shift towards v8, saying where the traffic is
    assert [(t.label, t.cohort) for t in trials] == [("mix_shift", "v8")] * 8
    assert all(t.message.startswith("mix shift: ") for t in trials)
    assert all("of traffic now on v8, whose p" in t.message for t in trials)


def test_a_mix_shift_under_the_floor_is_never_called_a_regression(
    pipeline: sim.DiurnalPipeline, rng: np.random.Generator
) -> None:
    # given v8's share moving from 20% to 60% only: the stage +12% to +14%, under the floor
    rule = regression.RegressionRule()
    change = rollouts.true_change(pipeline, rng, BELOW_FLOOR, (0.5, *rule.quantiles))
    assert not any(regression.large_enough(a - b, b, rule) for b, a in change)
    # when it happens 8 times, then what alerts (if any) is a mix shift, not a regression
    labels = {t.label for t in _trials(pipeline, rng, BELOW_FLOOR, 8)}
    assert labels <= {"no_alert", "mix_shift"}

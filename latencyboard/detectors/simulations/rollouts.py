"""Rollouts of a new version for the regression detector's production-like traffic
(:mod:`latencyboard.detectors.simulations.diurnal`): v7 and v8 on ``VERSION_STAGE``, and the
label :func:`mix.decompose` gives the stage by version at the first evaluation that fired.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from latencyboard.detectors import mix, regression
from latencyboard.detectors.simulations.diurnal import (
    BASELINE_HOURS,
    STAGES,
    VERSION_STAGE,
    WINDOW_MINUTES,
    Baselines,
    DiurnalPipeline,
    History,
    Traffic,
    replayed_alerts,
    segment,
)
from latencyboard.detectors.simulations.steady import SIMULATION_START
from latencyboard.sketches.sketch import Sketch

__all__ = ["Rollout", "RolloutTrial", "rollout_baselines", "rollout_trial", "true_change"]

_TRUE_VALUES: Final = 400_000
"""Requests per side when :func:`true_change` measures a rollout's effect on the stage."""


@dataclass(frozen=True)
class Rollout:
    """A version change on ``VERSION_STAGE``: v7 and v8, v8 ``v8_factor`` times v7's scale,
    v7 ``v7_factor`` times its own after the change (a regression inside v7)."""

    name: str
    baseline_v8_share: float
    """v8's share in the baseline (0: v8 is new, it has none)."""
    v8_share: float
    """v8's share after the change."""
    v8_factor: float
    v7_factor: float = 1.0
    expected: tuple[mix.Label, str | None] = (mix.Label.REGRESSION, "v8")


@dataclass(frozen=True)
class RolloutTrial:
    label: str
    """``no_alert`` when the stage did not fire within the trial."""
    cohort: str | None
    message: str
    expected: bool


def _versioned(
    traffic: Traffic, rng: np.random.Generator, share: np.ndarray | float, factor: float
) -> np.ndarray:
    """Assigns each request a version (True: v8) and slows v8's ``VERSION_STAGE``."""
    on_v8: np.ndarray = np.less(rng.random(traffic.values.shape[0]), share)
    traffic.values[on_v8, VERSION_STAGE] *= factor
    return on_v8


def true_change(
    pipeline: DiurnalPipeline, rng: np.random.Generator, rollout: Rollout, levels: tuple[float, ...]
) -> tuple[tuple[float, float], ...]:
    """``VERSION_STAGE``'s quantiles (ms) before and after the rollout at each level, over
    every version (what the detector sees of the stage), from ``_TRUE_VALUES`` requests a
    side: whether the rollout takes the stage past the rule's minimum effect at all."""
    column = pipeline.values(rng, 2 * _TRUE_VALUES)[:, VERSION_STAGE]
    before, after = column[:_TRUE_VALUES], column[_TRUE_VALUES:]
    before[rng.random(_TRUE_VALUES) < rollout.baseline_v8_share] *= rollout.v8_factor
    on_v8 = rng.random(_TRUE_VALUES) < rollout.v8_share
    after[on_v8] *= rollout.v8_factor
    after[~on_v8] *= rollout.v7_factor
    return tuple(
        (float(np.quantile(before, level)), float(np.quantile(after, level))) for level in levels
    )


def rollout_baselines(
    pipeline: DiurnalPipeline, rng: np.random.Generator, rollout: Rollout
) -> tuple[History, Baselines]:
    """7 days of traffic with v8 at ``baseline_v8_share``: the stages' history (their
    baselines at each hour), and ``VERSION_STAGE``'s baselines by version over the 7 days (a
    version without traffic has none), as the cohort split takes them."""
    before = pipeline.traffic(rng, 0, BASELINE_HOURS * 60)
    before_v8 = _versioned(before, rng, rollout.baseline_v8_share, rollout.v8_factor)
    history = History(regression.RegressionRule().min_baseline_count)
    history.add(before)
    stage_values = before.values[:, VERSION_STAGE]
    cohort_baselines = {
        version: regression.Baseline(
            Sketch.from_values(stage_values[mask]), SIMULATION_START, SIMULATION_START
        )
        for version, mask in (("v7", ~before_v8), ("v8", before_v8))
        if mask.any()
    }
    return history, cohort_baselines


def rollout_trial(
    pipeline: DiurnalPipeline,
    rng: np.random.Generator,
    rollout: Rollout,
    baselines: tuple[History, Baselines],
    minute_of_day: int,
    follow: int = 30,
    rule: regression.RegressionRule | None = None,
) -> RolloutTrial:
    """The label :func:`mix.decompose` gives ``VERSION_STAGE`` by version at the first
    evaluation that fired on it (``baselines``: :func:`rollout_baselines`)."""
    rule = rule or regression.RegressionRule()
    history, cohort_baselines = baselines
    traffic, _, after = segment(pipeline, rng, minute_of_day, follow)
    share = np.where(after, rollout.v8_share, rollout.baseline_v8_share)
    on_v8 = _versioned(traffic, rng, share, rollout.v8_factor)
    traffic.values[after & ~on_v8, VERSION_STAGE] *= rollout.v7_factor
    name = STAGES[VERSION_STAGE][0]
    for alert in replayed_alerts(traffic, history, rule):
        if alert.stage != name:
            continue
        end = int((alert.fired_at - SIMULATION_START).total_seconds() // 60) - traffic.first_minute
        in_window = (traffic.minute >= end - WINDOW_MINUTES) & (traffic.minute < end)
        column = traffic.values[:, VERSION_STAGE]
        windows = {
            version: Sketch.from_values(column[in_window & mask])
            for version, mask in (("v7", ~on_v8), ("v8", on_v8))
            if (in_window & mask).any()
        }
        q = float(alert.quantile[1:]) / 100.0
        split = mix.decompose(cohort_baselines, windows, q, rule)
        expected = (split.label, split.cohort) == rollout.expected
        return RolloutTrial(str(split.label), split.cohort, split.message, expected)
    return RolloutTrial("no_alert", None, "", False)

"""The detectors' acceptance harness: the real detector over simulated pipeline traffic.

Traffic is 1 request/s through six stages, each stage's self time drawn independently from a
log-normal body with a Pareto tail: with probability ``TAIL_SHARE`` a request's stage time is
replaced by a Pareto (index 1.5, infinite variance) draw starting at the body's p99.5. Each
pipeline gets its own medians (x1 to x3 of the stage's reference) and spreads (x0.8 to x1.2),
so the checks do not hinge on one shape. The reference medians are large enough that +25% of
every stage's p90 clears the rule's 5 ms floor: a shift the rule deems immaterial by design
is not counted as a miss.

Everything goes through what production uses: per-minute sketches (built with
:func:`~latencyboard.sketches.sketch.sketches_by_group`), hourly sketches, a 7-day baseline merged
from the hourly ones and rebuilt every hour, a 10-minute window merged from the minute ones
with :func:`~latencyboard.sketches.sketch.merge_many` every minute, :func:`regression.evaluate` and
the :mod:`lifecycle` state machine (an alarm is a ``FIRED`` transition).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

import numpy as np

from latencyboard.detectors import lifecycle, mix, regression
from latencyboard.sketches.sketch import Sketch, merge_many, sketches_by_group

__all__ = [
    "STAGES",
    "DetectionTrial",
    "FalseAlarmRun",
    "MixTrial",
    "Pipeline",
    "detection_trial",
    "false_alarm_run",
    "mix_trial",
]

# (stage, reference median ms, log-normal sigma)
STAGES: Final = (
    ("queue_wait", 15.0, 0.55),
    ("feature_hydration", 20.0, 0.40),
    ("preprocess", 18.0, 0.30),
    ("model_forward", 45.0, 0.25),
    ("postprocess", 16.0, 0.30),
    ("serialize", 16.0, 0.35),
)
TAIL_SHARE: Final = 0.002
TAIL_INDEX: Final = 1.5
WINDOW_MINUTES: Final = 10
BASELINE_HOURS: Final = 7 * 24
MODEL_FORWARD: Final = 3
SIMULATION_START: Final = datetime(2026, 1, 1, tzinfo=UTC)
"""Where simulated time begins: any fixed date, the simulation runs on its own clock."""
OUTCOMES: Final = {
    regression.Status.REGRESSION: lifecycle.Outcome.FIRING,
    regression.Status.OK: lifecycle.Outcome.CLEAN,
    regression.Status.NO_DATA: lifecycle.Outcome.NO_DATA,
    regression.Status.NOT_READY: lifecycle.Outcome.NO_DATA,
}


@dataclass(frozen=True)
class Pipeline:
    """A simulated pipeline's stage time distributions."""

    medians: np.ndarray
    sigmas: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator) -> Pipeline:
        reference = np.array([median for _, median, _ in STAGES])
        spread = np.array([sigma for _, _, sigma in STAGES])
        return cls(
            reference * rng.uniform(1.0, 3.0, len(STAGES)),
            spread * rng.uniform(0.8, 1.2, len(STAGES)),
        )

    def traffic(self, rng: np.random.Generator, seconds: int) -> np.ndarray:
        """Stage self times (ms) of one request per second: shape ``(seconds, stages)``."""
        body = rng.lognormal(np.log(self.medians), self.sigmas, (seconds, len(STAGES)))
        tail_start = self.medians * np.exp(2.576 * self.sigmas)
        tail = (rng.pareto(TAIL_INDEX, body.shape) + 1.0) * tail_start
        return np.where(rng.random(body.shape) < TAIL_SHARE, tail, body)


def _minute_sketches(values: np.ndarray) -> list[list[Sketch]]:
    """Per minute, one sketch per stage, of ``(seconds, stages)`` values (whole minutes)."""
    minutes, stages = values.shape[0] // 60, values.shape[1]
    groups = (np.arange(minutes * 60)[:, None] // 60) * stages + np.arange(stages)
    by_group = sketches_by_group(groups.ravel(), values.ravel())
    return [[by_group[m * stages + s] for s in range(stages)] for m in range(minutes)]


def _baselines(hours: deque[list[Sketch]], end: datetime) -> dict[str, regression.Baseline]:
    start = end - timedelta(hours=len(hours))
    return {
        name: regression.Baseline(merge_many(hour[s] for hour in hours), start, end)
        for s, (name, _, _) in enumerate(STAGES)
    }


def _windows(minutes: deque[list[Sketch]]) -> dict[str, Sketch]:
    return {
        name: merge_many(minute[s] for minute in minutes) for s, (name, _, _) in enumerate(STAGES)
    }


def week_of_baselines(
    pipeline: Pipeline, rng: np.random.Generator
) -> dict[str, regression.Baseline]:
    """A 7-day baseline of fresh traffic, built from hourly sketches as the baseline job does."""
    hours = deque(_hour_sketches(pipeline.traffic(rng, 3600)) for _ in range(BASELINE_HOURS))
    return _baselines(hours, SIMULATION_START)


def _hour_sketches(values: np.ndarray) -> list[Sketch]:
    """One sketch per stage of an hour's ``(3600, stages)`` values."""
    by_stage = sketches_by_group(np.tile(np.arange(len(STAGES)), 3600), values.ravel())
    return [by_stage[s] for s in range(len(STAGES))]


@dataclass(frozen=True)
class FalseAlarmRun:
    """One pipeline's days of unchanged traffic."""

    evaluations: int
    firing_evaluations: int
    alarms: int
    """``FIRED`` transitions: alerts on-call would have received."""
    stages: tuple[str, ...]
    """The stage named by each alarm."""


def false_alarm_run(
    seed: int, days: int, rule: regression.RegressionRule | None = None
) -> FalseAlarmRun:
    """Evaluate every minute for ``days`` days after a 7-day warm-up, traffic unchanged."""
    rng = np.random.default_rng(seed)
    pipeline = Pipeline.draw(rng)
    hours: deque[list[Sketch]] = deque(maxlen=BASELINE_HOURS)
    minutes: deque[list[Sketch]] = deque(maxlen=WINDOW_MINUTES)
    state = lifecycle.AlertState()
    evaluations = firing = 0
    named: list[str] = []
    for hour in range(BASELINE_HOURS + days * 24):
        values = pipeline.traffic(rng, 3600)
        if hour < BASELINE_HOURS - 1:
            hours.append(_hour_sketches(values))
            continue
        per_minute = _minute_sketches(values)
        if hour == BASELINE_HOURS - 1:
            # The warm-up's last minutes make the first evaluation's window.
            minutes.extend(per_minute)
        else:
            baselines = _baselines(hours, SIMULATION_START + timedelta(hours=hour))
            for minute in per_minute:
                minutes.append(minute)
                result = regression.evaluate(baselines, _windows(minutes), rule)
                evaluations += 1
                firing += result.status is regression.Status.REGRESSION
                state, transition = lifecycle.step(state, OUTCOMES[result.status])
                if transition is lifecycle.Transition.FIRED:
                    named.append(result.grew_most or "")
        hours.append([merge_many(minute[s] for minute in per_minute) for s in range(len(STAGES))])
    return FalseAlarmRun(evaluations, firing, len(named), tuple(named))


@dataclass(frozen=True)
class DetectionTrial:
    stage: str
    delay_seconds: float | None
    """From the shift to the first evaluation that fired on the shifted stage; ``None``
    when none did within the trial."""
    named_stage: str | None
    """``grew_most`` of that evaluation."""


def _evaluations(
    values: np.ndarray, shift_at: float, start_minute: int
) -> Iterator[tuple[int, float, dict[str, Sketch]]]:
    """Per minute from ``start_minute`` on: the minute the evaluation ends, the seconds
    since the shift then, and the 10-minute windows of each stage."""
    per_minute = _minute_sketches(values)
    for end in range(start_minute, len(per_minute) + 1):
        minutes = deque(per_minute[end - WINDOW_MINUTES : end], maxlen=WINDOW_MINUTES)
        yield end, end * 60 - shift_at, _windows(minutes)


def detection_trial(
    pipeline: Pipeline,
    baselines: dict[str, regression.Baseline],
    rng: np.random.Generator,
    factor: float = 1.25,
    follow_minutes: int = 20,
    rule: regression.RegressionRule | None = None,
) -> DetectionTrial:
    """Shift one random stage by ``factor`` at a random second of minute 10 and evaluate
    every minute for ``follow_minutes`` more."""
    stage = int(rng.integers(len(STAGES)))
    shift_at = WINDOW_MINUTES * 60 + float(rng.uniform(0, 60))
    values = pipeline.traffic(rng, (WINDOW_MINUTES + 1 + follow_minutes) * 60)
    shifted = np.arange(values.shape[0]) >= shift_at
    values[shifted, stage] *= factor
    name = STAGES[stage][0]
    for _end, since, windows in _evaluations(values, shift_at, WINDOW_MINUTES + 1):
        result = regression.evaluate(baselines, windows, rule)
        if any(s.stage == name for s in result.firing):
            return DetectionTrial(name, since, result.grew_most)
    return DetectionTrial(name, None, None)


@dataclass(frozen=True)
class MixTrial:
    label: mix.Label | None
    """At the first evaluation that fired on ``model_forward``; ``None`` if none did."""
    message: str | None
    new_share: float


def mix_trial(
    pipeline: Pipeline,
    baselines: dict[str, regression.Baseline],
    rng: np.random.Generator,
    new_share: float = 0.6,
    factor: float = 1.35,
    follow_minutes: int = 20,
    rule: regression.RegressionRule | None = None,
) -> MixTrial:
    """From a random second of minute 10, ``new_share`` of requests go to a new v8, whose
    ``model_forward`` is ``factor`` times slower; v7 (all of the baseline) is unchanged: a
    regression of the deploy."""
    shift_at = WINDOW_MINUTES * 60 + float(rng.uniform(0, 60))
    values = pipeline.traffic(rng, (WINDOW_MINUTES + 1 + follow_minutes) * 60)
    seconds = np.arange(values.shape[0])
    on_v8 = (seconds >= shift_at) & (rng.random(values.shape[0]) < new_share)
    values[on_v8, MODEL_FORWARD] *= factor
    cohort_baselines = {"v7": baselines["model_forward"]}
    minute_of = seconds // 60
    for end, _since, windows in _evaluations(values, shift_at, WINDOW_MINUTES + 1):
        result = regression.evaluate(baselines, windows, rule)
        if not any(s.stage == "model_forward" for s in result.firing):
            continue
        in_window = (minute_of >= end - WINDOW_MINUTES) & (minute_of < end)
        cohorts = {
            "v7": Sketch.from_values(values[in_window & ~on_v8, MODEL_FORWARD]),
            "v8": Sketch.from_values(values[in_window & on_v8, MODEL_FORWARD]),
        }
        stage = next(s for s in result.firing if s.stage == "model_forward")
        q = stage.strongest.q if stage.strongest else 0.99
        split = mix.decompose(cohort_baselines, cohorts, q, rule)
        return MixTrial(split.label, split.message, new_share)
    return MixTrial(None, None, new_share)

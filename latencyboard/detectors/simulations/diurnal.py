"""Production-like traffic for the regression detector (issue #25): what the acceptance
figures of ``make bench-detector`` are measured on, beside the steady traffic of :mod:`steady`.

Traffic
    Requests arrive as a Poisson process whose rate follows the day: 0.2 requests/s at the
    trough (04:00) to 3 at the peak (16:00), a cosine in between. Each request passes seven
    stages with independent self times: log-normal of log-sigma 0.22, 0.36, 0.5, 0.6, 0.7
    and 0.8, and a Lomax (Pareto II) stage of shape 2.5 (its variance is finite, its tail
    heavy). Each pipeline draws its own scale per stage (x1 to x2 of the reference), large
    enough that +25% of every stage's p90 clears the rule's 5 ms floor.

Scenarios
    Stationary (every minute for days: false alarms), a daily cycle (``CYCLE_STAGE`` is 30%
    slower at the trough and 30% faster at the peak), a +25% shift of one stage's whole
    distribution or of its slowest 5% only (values above its true p95), and rollouts of a
    new version on ``VERSION_STAGE`` (:mod:`latencyboard.detectors.simulations.rollouts`).

Everything goes through what the workers use: stored minute sketches per stage, hourly
sketches merged into the baseline the baseline job builds at the start of each hour (the
same hours of the previous 7 days, :mod:`latencyboard.detectors.seasonal`, else the trailing 7
days), windows of ``WINDOW_MINUTES`` evaluated every minute by :func:`replay.replay` (the
rule preview's replay: :func:`regression.evaluate` and one :mod:`lifecycle` per stage, an
alarm being a ``FIRED`` transition; it skips only minutes where no test could be
significant, so it raises exactly the alerts an evaluation at every minute does) and, for
rollouts, :func:`mix.decompose` at the first firing evaluation. One shortcut, stated with
the figures: the days of a false-alarm run are replayed one at a time, the alerts'
lifecycles starting afresh each day (an alert open at midnight is counted again: alarms
are over-counted, never missed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import numpy as np

from latencyboard.detectors import lifecycle, regression, replay, seasonal
from latencyboard.detectors.simulations.steady import SIMULATION_START
from latencyboard.sketches.sketch import Sketch, merge_many, sketches_by_group, to_bytes_many

__all__ = [
    "CYCLE_STAGE",
    "STAGES",
    "VERSION_STAGE",
    "DiurnalPipeline",
    "FalseAlarmRun",
    "History",
    "false_alarm_run",
    "pipeline_history",
    "rate_per_second",
    "replayed_alerts",
    "segment",
    "shift_trial",
]

# (stage, reference median ms, log-normal sigma; None: Lomax of shape LOMAX_SHAPE whose
# scale is the reference "median" x 3, median ~32% of the scale).
STAGES: Final = (
    ("tokenize", 30.0, 0.22),
    ("embed", 40.0, 0.36),
    ("retrieve", 35.0, 0.5),
    ("rerank", 30.0, 0.6),
    ("generate", 60.0, 0.7),
    ("postprocess", 25.0, 0.8),
    ("fetch", 35.0, None),
)
LOMAX_SHAPE: Final = 2.5
LOW_RATE: Final = 0.2
HIGH_RATE: Final = 3.0
TROUGH_MINUTE: Final = 4 * 60
DAY: Final = 24 * 60
CYCLE_STAGE: Final = 2
"""``retrieve`` (log-sigma 0.5): x1.3 at the traffic trough, x0.7 at the peak."""
CYCLE_AMPLITUDE: Final = 0.3
VERSION_STAGE: Final = 1
"""``embed``: the stage a new version changes."""
WINDOW_MINUTES: Final = 10
BASELINE_HOURS: Final = 7 * 24
_Z95: Final = 1.6448536269514722


def rate_per_second(minute: np.ndarray) -> np.ndarray:
    """Requests per second at each minute (of the day, or since the epoch)."""
    mid, amplitude = (HIGH_RATE + LOW_RATE) / 2, (HIGH_RATE - LOW_RATE) / 2
    return mid - amplitude * np.cos(2 * np.pi * (minute - TROUGH_MINUTE) / DAY)


def cycle_factor(minute: np.ndarray) -> np.ndarray:
    """``CYCLE_STAGE``'s factor at each minute: slowest at the traffic trough."""
    return 1.0 + CYCLE_AMPLITUDE * np.cos(2 * np.pi * (minute - TROUGH_MINUTE) / DAY)


@dataclass(frozen=True)
class Traffic:
    """The requests of whole minutes ``first_minute ..``: each one's minute (relative),
    arrival (seconds since the epoch) and stage self times ``(requests, stages)``."""

    first_minute: int
    minutes: int
    minute: np.ndarray
    seconds: np.ndarray
    values: np.ndarray

    def minute_sketches(self) -> list[list[Sketch]]:
        """Per minute, one sketch per stage (empty when the minute had no request)."""
        stages = self.values.shape[1]
        groups = self.minute[:, None] * stages + np.arange(stages)
        by_group = sketches_by_group(groups.ravel(), self.values.ravel())
        return [
            [by_group.get(m * stages + s, Sketch()) for s in range(stages)]
            for m in range(self.minutes)
        ]

    def stored(self, offset: int = 0) -> dict[str, dict[int, bytes]]:
        """The minute sketches as the rollups store them: per stage, minute index (from
        ``offset``) to blob, minutes without values absent."""
        per_minute = self.minute_sketches()
        stored: dict[str, dict[int, bytes]] = {}
        for s, (name, _, _) in enumerate(STAGES):
            present = [m for m in range(self.minutes) if per_minute[m][s].count]
            blobs = to_bytes_many([per_minute[m][s] for m in present])
            stored[name] = {offset + m: blob for m, blob in zip(present, blobs, strict=True)}
        return stored

    def hour_sketches(self) -> list[list[Sketch]]:
        """Per whole hour, one sketch per stage."""
        stages = self.values.shape[1]
        groups = (self.minute // 60)[:, None] * stages + np.arange(stages)
        by_group = sketches_by_group(groups.ravel(), self.values.ravel())
        return [
            [by_group.get(h * stages + s, Sketch()) for s in range(stages)]
            for h in range(self.minutes // 60)
        ]


@dataclass(frozen=True)
class DiurnalPipeline:
    """A simulated pipeline: each stage's scale (ms)."""

    scales: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator) -> DiurnalPipeline:
        reference = np.array([median for _, median, _ in STAGES])
        return cls(reference * rng.uniform(1.0, 2.0, len(STAGES)))

    def values(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Stage self times (ms) of ``n`` requests: shape ``(n, stages)``."""
        out = np.empty((n, len(STAGES)))
        for s, (_, _, sigma) in enumerate(STAGES):
            if sigma is None:
                out[:, s] = 3.0 * self.scales[s] * rng.pareto(LOMAX_SHAPE, n)
            else:
                out[:, s] = rng.lognormal(np.log(self.scales[s]), sigma, n)
        return out

    def p95(self, stage: int) -> float:
        """The stage's true 95th percentile (where the slowest 5% start)."""
        sigma = STAGES[stage][2]
        if sigma is None:
            return float(3.0 * self.scales[stage] * (0.05 ** (-1.0 / LOMAX_SHAPE) - 1.0))
        return float(self.scales[stage] * np.exp(_Z95 * sigma))

    def traffic(
        self, rng: np.random.Generator, first_minute: int, minutes: int, cycle: bool = False
    ) -> Traffic:
        """The requests of ``minutes`` minutes from ``first_minute`` (since the epoch)."""
        absolute = first_minute + np.arange(minutes)
        counts = rng.poisson(60.0 * rate_per_second(absolute))
        minute = np.repeat(np.arange(minutes), counts)
        seconds = (first_minute + minute) * 60.0 + rng.uniform(0.0, 60.0, minute.size)
        values = self.values(rng, minute.size)
        if cycle:
            values[:, CYCLE_STAGE] *= cycle_factor(first_minute + minute)
        return Traffic(first_minute, minutes, minute, seconds, values)


Baselines = dict[str, regression.Baseline]


class History:
    """A pipeline's hour sketches per stage (by hour since the epoch), and the baselines the
    baseline job builds from them at each hour: the same hours of the previous days where
    they hold the values, else the trailing 7 days (:mod:`latencyboard.detectors.seasonal`)."""

    def __init__(self, min_count: int) -> None:
        self.min_count = min_count
        self.hours: dict[int, list[Sketch]] = {}
        self._built: dict[int, Baselines] = {}

    def add(self, traffic: Traffic) -> None:
        """The whole hours of ``traffic`` (which starts on an hour)."""
        first = traffic.first_minute // 60
        for offset, sketches in enumerate(traffic.hour_sketches()):
            self.hours[first + offset] = sketches
        kept = max(self.hours) - BASELINE_HOURS - 2 * seasonal.DAY_HOURS
        for hour in [hour for hour in self.hours if hour < kept]:
            del self.hours[hour]

    def baselines_at(self, hour: int) -> Baselines:
        """The baselines built at the start of ``hour``."""
        if hour not in self._built:
            self._built = {hour: self._build(hour)} | {
                h: b for h, b in self._built.items() if h > hour - seasonal.DAY_HOURS
            }
        return self._built[hour]

    def _merged(self, stage: int, hours: range) -> Sketch:
        present = [self.hours[h][stage] for h in hours if h in self.hours]
        return merge_many(present) if present else Sketch()

    def _build(self, hour: int) -> Baselines:
        at = SIMULATION_START + timedelta(hours=hour)
        spans = seasonal.hour_offsets(BASELINE_HOURS // 24)
        baselines = {}
        for s, (name, _, _) in enumerate(STAGES):
            days = [self._merged(s, range(hour + span.start, hour + span.stop)) for span in spans]
            same_hours = seasonal.seasonal_sketch(days, self.min_count)
            if same_hours is None:
                trailing = self._merged(s, range(hour - BASELINE_HOURS, hour))
                baselines[name] = regression.Baseline(trailing, at - timedelta(days=7), at)
            else:
                baselines[name] = regression.Baseline(same_hours, at - timedelta(days=7), at, True)
        return baselines

    def schedule(self, first_minute: int, minutes: int) -> list[tuple[int, Baselines]]:
        """The baselines of a replay of ``minutes`` minutes from ``first_minute``: each
        hour's from its first evaluation (``replay.replay``'s schedule)."""
        first_hour = (first_minute + WINDOW_MINUTES) // 60
        last_hour = (first_minute + minutes) // 60
        return [
            (hour * 60 - first_minute, self.baselines_at(hour))
            for hour in range(first_hour, last_hour + 1)
        ]


def pipeline_history(
    pipeline: DiurnalPipeline,
    rng: np.random.Generator,
    rule: regression.RegressionRule | None = None,
) -> History:
    """7 days of stationary diurnal traffic (no cycle), as hour sketches."""
    history = History((rule or regression.RegressionRule()).min_baseline_count)
    history.add(pipeline.traffic(rng, 0, BASELINE_HOURS * 60))
    return history


@dataclass(frozen=True)
class FalseAlarmRun:
    """One pipeline's days of traffic without a regression."""

    days: int
    evaluations: int
    detector_runs: int
    """Evaluations the replay ran the detector at (the others could not fire)."""
    alarm_minutes: tuple[int, ...]
    """Minute of the day of each alarm (a ``FIRED`` transition of a stage's alert)."""
    alarm_stages: tuple[str, ...]


def false_alarm_run(
    seed: int, days: int, cycle: bool = False, rule: regression.RegressionRule | None = None
) -> FalseAlarmRun:
    """Evaluate every minute for ``days`` days after a 7-day warm-up, day by day against the
    baselines of each hour (see the module docstring)."""
    rule = rule or regression.RegressionRule()
    rng = np.random.default_rng(seed)
    pipeline = DiurnalPipeline.draw(rng)
    history = History(rule.min_baseline_count)
    for day in range(BASELINE_HOURS // 24):
        history.add(pipeline.traffic(rng, day * DAY, DAY, cycle))
    evaluations = runs = 0
    minutes_of_day: list[int] = []
    stages: list[str] = []
    first_day = BASELINE_HOURS // 24
    tail = pipeline.traffic(rng, first_day * DAY - WINDOW_MINUTES, WINDOW_MINUTES, cycle)
    for day in range(first_day, first_day + days):
        first_minute = day * DAY - WINDOW_MINUTES
        today = pipeline.traffic(rng, day * DAY, DAY, cycle)
        # A baseline uses only hours before it was built, so today's may be added now.
        history.add(today)
        stored = today.stored(WINDOW_MINUTES)
        for name, rows in tail.stored().items():
            stored[name].update(rows)
        result = replay.replay(
            history.schedule(first_minute, WINDOW_MINUTES + DAY),
            stored,
            SIMULATION_START + timedelta(minutes=first_minute),
            WINDOW_MINUTES + DAY,
            WINDOW_MINUTES,
            rule,
            lifecycle.CLEAN_NEEDED,
        )
        # Its first evaluation is the day before's last.
        evaluations += result.evaluations - (day > first_day)
        runs += result.detector_runs
        for alert in result.alerts:
            minutes_of_day.append(
                int((alert.fired_at - SIMULATION_START).total_seconds() // 60) % DAY
            )
            stages.append(alert.stage)
        tail = _last_minutes(today, WINDOW_MINUTES)
    return FalseAlarmRun(days, evaluations, runs, tuple(minutes_of_day), tuple(stages))


def _last_minutes(traffic: Traffic, minutes: int) -> Traffic:
    keep = traffic.minute >= traffic.minutes - minutes
    return Traffic(
        traffic.first_minute + traffic.minutes - minutes,
        minutes,
        traffic.minute[keep] - (traffic.minutes - minutes),
        traffic.seconds[keep],
        traffic.values[keep],
    )


def replayed_alerts(
    traffic: Traffic, history: History, rule: regression.RegressionRule
) -> tuple[replay.ReplayedAlert, ...]:
    """The alerts of every minute's evaluation over the traffic, from its first full window,
    against the baselines ``history`` gives at each hour."""
    start = SIMULATION_START + timedelta(minutes=traffic.first_minute)
    return replay.replay(
        history.schedule(traffic.first_minute, traffic.minutes),
        traffic.stored(),
        start,
        traffic.minutes,
        WINDOW_MINUTES,
        rule,
        lifecycle.CLEAN_NEEDED,
    ).alerts


def segment(
    pipeline: DiurnalPipeline, rng: np.random.Generator, minute_of_day: int, follow: int
) -> tuple[Traffic, float, np.ndarray]:
    """A window of traffic before a change at a random second of the minute that starts at
    ``minute_of_day`` (on day 7), ``follow`` minutes after it; the change's time and mask."""
    first = BASELINE_HOURS * 60 + minute_of_day - WINDOW_MINUTES
    traffic = pipeline.traffic(rng, first, WINDOW_MINUTES + 1 + follow)
    change_at = (first + WINDOW_MINUTES) * 60.0 + float(rng.uniform(0.0, 60.0))
    return traffic, change_at, traffic.seconds >= change_at


def shift_trial(
    pipeline: DiurnalPipeline,
    history: History,
    rng: np.random.Generator,
    stage: int,
    minute_of_day: int,
    tail_only: bool = False,
    factor: float = 1.25,
    follow: int = 30,
    rule: regression.RegressionRule | None = None,
) -> float | None:
    """Seconds from a ``factor`` shift of ``stage`` (of its slowest 5% only with
    ``tail_only``) to the first evaluation that fired on it; ``None``: not within ``follow``
    minutes."""
    rule = rule or regression.RegressionRule()
    traffic, change_at, after = segment(pipeline, rng, minute_of_day, follow)
    column = traffic.values[:, stage]
    if tail_only:
        after = after & (column > pipeline.p95(stage))
    column[after] *= factor
    name = STAGES[stage][0]
    for alert in replayed_alerts(traffic, history, rule):
        if alert.stage == name:
            return (alert.fired_at - SIMULATION_START).total_seconds() - change_at
    return None

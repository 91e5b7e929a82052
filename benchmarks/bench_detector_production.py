"""The regression detector on production-like traffic (issue #25), from simulated pipelines;
run: make bench-detector   (or python benchmarks/bench_detector_production.py [--pipelines 2
--days 30 --cycle-days 7 --trials 20 --rollouts 20] [--only stationary cycle shifts rollouts]).

Scenarios of :mod:`latencyboard.detectors.simulations.diurnal` (diurnal 0.2-3 requests/s;
stages log-normal of sigma 0.22..0.8 and Lomax of shape 2.5), with the default rule:

* stationary: every minute for ``--days`` days per pipeline, no change: alarms per pipeline
  per 30 days (budget <= 1);
* daily cycle: one stage +-30% over the day, slowest at the traffic trough, ``--cycle-days``
  per pipeline: alarms per pipeline per week (budget <= 1) and how many fall between 23:00
  and 08:00;
* +25% shift of one stage, at >= 1 request/s and at the low hour (0.2 requests/s), and +25%
  of its slowest 5% only at >= 1 request/s: per stage, the share found within 10, 15 and
  30 minutes (``--trials`` per stage and scenario);
* rollouts of a new version on one stage: the label of the first firing evaluation
  (``--rollouts`` each), among every trial and among the ones that alerted, beside the
  stage's true change (a rollout that leaves it under the rule's +20% floor should not
  alert at all).

Seeded: the same arguments print the same figures. Work runs in ``--workers`` processes;
the defaults take about 100 CPU-seconds (the wall time printed depends on the machine's load).
"""

from __future__ import annotations

import argparse
import collections
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Final

import numpy as np

from latencyboard.detectors import mix, reach, regression
from latencyboard.detectors.simulations import diurnal as sim
from latencyboard.detectors.simulations import rollouts as rollouts_sim

ROLLOUTS: Final = (
    rollouts_sim.Rollout("100% rollout of a new v8 (x1.35, no baseline)", 0.0, 1.0, 1.35),
    rollouts_sim.Rollout("canary: 20% on a new v8 (x1.35, no baseline)", 0.0, 0.2, 1.35),
    rollouts_sim.Rollout(
        "mix shift: v8 (x1.35, baselined) 20% -> 60%",
        0.2,
        0.6,
        1.35,
        expected=(mix.Label.MIX_SHIFT, "v8"),
    ),
    rollouts_sim.Rollout(
        "mix shift: v8 (x1.35, baselined) 10% -> 90%",
        0.1,
        0.9,
        1.35,
        expected=(mix.Label.MIX_SHIFT, "v8"),
    ),
    rollouts_sim.Rollout(
        "v7 regresses x1.3, v8 steady (both baselined, 50/50)",
        0.5,
        0.5,
        1.0,
        v7_factor=1.3,
        expected=(mix.Label.REGRESSION, "v7"),
    ),
)
BUSY_MINUTES: Final = np.flatnonzero(sim.rate_per_second(np.arange(sim.DAY)) >= 1.0)
LOW_HOUR: Final = sim.TROUGH_MINUTE - 15
"""Changes at 03:45: the 30 minutes after run at 0.2-0.23 requests/s."""
SCENARIOS: Final = ("busy", "low_hour", "tail_only")
PARTS: Final = ("stationary", "cycle", "shifts", "rollouts")
"""What ``--only`` selects: the false-alarm runs, the shift trials, the rollouts' labels."""


def shifts(seed: int, trials: int) -> dict[str, list[tuple[str, float | None]]]:
    """One pipeline's shift trials: per scenario, (stage, delay seconds or None)."""
    rng = np.random.default_rng(20_000 + seed)
    pipeline = sim.DiurnalPipeline.draw(rng)
    history = sim.pipeline_history(pipeline, rng)
    found: dict[str, list[tuple[str, float | None]]] = {name: [] for name in SCENARIOS}
    for stage, (name, _, _) in enumerate(sim.STAGES):
        for _ in range(trials):
            busy = int(rng.choice(BUSY_MINUTES))
            for scenario, minute, tail in (
                ("busy", busy, False),
                ("low_hour", LOW_HOUR, False),
                ("tail_only", busy, True),
            ):
                delay = sim.shift_trial(pipeline, history, rng, stage, minute, tail_only=tail)
                found[scenario].append((name, delay))
    return found


def rollouts(seed: int, trials: int) -> list[list[rollouts_sim.RolloutTrial]]:
    """One pipeline's rollout trials, per rollout."""
    rng = np.random.default_rng(30_000 + seed)
    pipeline = sim.DiurnalPipeline.draw(rng)
    runs = []
    for rollout in ROLLOUTS:
        baselines = rollouts_sim.rollout_baselines(pipeline, rng, rollout)
        runs.append(
            [
                rollouts_sim.rollout_trial(
                    pipeline, rng, rollout, baselines, int(rng.choice(BUSY_MINUTES))
                )
                for _ in range(trials)
            ]
        )
    return runs


def _alarm_lines(title: str, runs: list[sim.FalseAlarmRun], per_days: int) -> None:
    alarms = [len(run.alarm_minutes) for run in runs]
    days = sum(run.days for run in runs)
    night = sum(
        minute >= 23 * 60 or minute < 8 * 60 for run in runs for minute in run.alarm_minutes
    )
    print(f"{title}: {len(runs)} pipelines x {runs[0].days} days, every minute")
    print(
        f"  alarms per pipeline {alarms}: {sum(alarms) * per_days / days:.2f} per pipeline per "
        f"{per_days} days; {night} of {sum(alarms)} between 23:00 and 08:00"
    )
    print(
        f"  evaluations {sum(run.evaluations for run in runs):,}, "
        f"detector run at {sum(run.detector_runs for run in runs):,} (the others could not fire), "
        f"stages "
        f"{dict(collections.Counter(s for run in runs for s in run.alarm_stages))}"
    )


def _shift_lines(title: str, trials: list[tuple[str, float | None]]) -> None:
    minutes = np.array([np.inf if d is None else d / 60.0 for _, d in trials])
    print(f"{title}, {len(trials)} trials: found within 10 / 15 / 30 min")
    print(
        f"  all stages {np.mean(minutes <= 10):.0%} / {np.mean(minutes <= 15):.0%} / "
        f"{np.mean(minutes <= 30):.0%}"
    )
    for name, _, sigma in sim.STAGES:
        mine = np.array([m for (stage, _), m in zip(trials, minutes, strict=True) if stage == name])
        shape = f"log-normal sigma {sigma}" if sigma else f"Lomax shape {sim.LOMAX_SHAPE}"
        print(
            f"  {name:<12} {shape:<22} {np.mean(mine <= 10):>4.0%} / {np.mean(mine <= 15):>4.0%}"
            f" / {np.mean(mine <= 30):>4.0%}"
        )


def _reach_lines(seed: int) -> None:
    """What the rule's page says of the first shift pipeline's stages (detectors.reach)."""
    rng = np.random.default_rng(20_000 + seed)
    pipeline = sim.DiurnalPipeline.draw(rng)
    history = sim.pipeline_history(pipeline, rng)
    rule = regression.RegressionRule()
    print(
        "what the rule page says (detectors.reach, first pipeline): the shift found in 10 min "
        "with 80% probability, the window +25% needs"
    )
    for rate, hour in ((1.0, 12), (0.2, sim.TROUGH_MINUTE // 60)):
        baselines = history.baselines_at(sim.BASELINE_HOURS + hour)
        n = round(rate * 60 * sim.WINDOW_MINUTES)
        family = reach.family_size([n] * len(sim.STAGES), rule)
        found = [
            reach.reach(baselines[name], rate * 60, sim.WINDOW_MINUTES, rule, family)
            for name, _, _ in sim.STAGES
        ]
        print(
            f"  at {rate:g} request/s ({n} a window): "
            + "; ".join(
                f"{name} {_finds(r)}" for (name, _, _), r in zip(sim.STAGES, found, strict=True)
            )
        )


def _finds(found: reach.Reach) -> str:
    shift = "out of reach" if found.detectable is None else f"+{found.detectable:.0%}"
    minutes = "over a day" if found.target_minutes is None else f"{found.target_minutes} min"
    return f"{shift} ({found.test}), +25% in {minutes}"


def _cpu_seconds() -> float:
    """CPU time of this process and its finished workers."""
    me, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def _rollout_lines(seed: int, labelled_runs: list[list[list[rollouts_sim.RolloutTrial]]]) -> None:
    """Per rollout: the stage's true change against the rule's floor, then the labels among
    every trial and among the ones that alerted."""
    rule = regression.RegressionRule()
    levels = (0.5, *rule.quantiles)
    rng = np.random.default_rng(40_000 + seed)
    pipeline = sim.DiurnalPipeline.draw(rng)
    for index, rollout in enumerate(ROLLOUTS):
        trials = [trial for run in labelled_runs for trial in run[index]]
        quantiles = rollouts_sim.true_change(pipeline, rng, rollout, levels)
        change = [after / before - 1.0 for before, after in quantiles]
        rule_floor = (
            f"+{rule.min_relative_effect:.0%} and +{rule.min_absolute_effect_ms:g} ms floor"
        )
        past = any(regression.large_enough(a - b, b, rule) for b, a in quantiles)
        floor = f"past the {rule_floor}" if past else f"below the {rule_floor}: no alert expected"
        labels = collections.Counter(
            f"{t.label} {t.cohort}" if t.cohort else t.label for t in trials
        )
        expected = sum(t.expected for t in trials)
        alerted = sum(t.label != "no_alert" for t in trials)
        wrong = alerted - expected
        want = f"{rollout.expected[0]} {rollout.expected[1]}"
        print(f"{rollout.name}, {len(trials)} trials")
        print(
            "  the stage's true change "
            + ", ".join(
                f"p{level * 100:g} {c:+.0%}" for level, c in zip(levels, change, strict=True)
            )
            + f" ({floor})"
        )
        print(
            f"  alerted {alerted} of {len(trials)}; labelled '{want}' in {expected} of "
            f"{len(trials)} trials ({expected / len(trials):.0%}) and {expected} of the {alerted} "
            f"that alerted ({expected / max(alerted, 1):.0%}); another label in {wrong}"
        )
        print(f"  labels {dict(labels)}")
        example = next((t.message for t in trials if t.expected), "")
        print(f"  e.g. {example!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=2)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--cycle-days", type=int, default=7)
    parser.add_argument("--trials", type=int, default=10, help="per stage, scenario, pipeline")
    parser.add_argument("--rollouts", type=int, default=10, help="per rollout and pipeline")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--only",
        nargs="+",
        choices=PARTS,
        default=PARTS,
        help="run these parts only (default: all)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    seeds = list(range(args.pipelines))
    n = len(seeds)
    with ProcessPoolExecutor(args.workers) as pool:
        steady = cycled = found = labelled = None
        if "stationary" in args.only:
            steady = pool.map(sim.false_alarm_run, seeds, [args.days] * n)
        if "cycle" in args.only:
            cycled = pool.map(
                sim.false_alarm_run, [100 + s for s in seeds], [args.cycle_days] * n, [True] * n
            )
        if "shifts" in args.only:
            found = pool.map(shifts, seeds, [args.trials] * n)
        if "rollouts" in args.only:
            labelled = pool.map(rollouts, seeds, [args.rollouts] * n)
        if steady is not None:
            _alarm_lines("stationary diurnal traffic", list(steady), 30)
        if cycled is not None:
            _alarm_lines("daily cycle (+-30%, one stage)", list(cycled), 7)
        if found is not None:
            found_runs = list(found)
            titles = {
                "busy": "+25% shift of one stage at >= 1 request/s",
                "low_hour": "+25% shift of one stage at the low hour (0.2 requests/s)",
                "tail_only": "+25% on the slowest 5% of one stage at >= 1 request/s",
            }
            for scenario, title in titles.items():
                _shift_lines(title, [trial for run in found_runs for trial in run[scenario]])
            _reach_lines(seeds[0])
        if labelled is not None:
            _rollout_lines(seeds[0], list(labelled))
    print(f"wall time {time.perf_counter() - started:.0f} s, CPU {_cpu_seconds():.0f} s")


if __name__ == "__main__":
    main()

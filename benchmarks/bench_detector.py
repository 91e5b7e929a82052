"""The regression detector's acceptance figures (issue #13), from simulated traffic; run:
make bench-detector   (or python benchmarks/bench_detector.py [--pipelines 10 --days 30]).

Three checks of :mod:`latencyboard.detectors.simulations.steady`, with the default rule:

* false alarms: each pipeline evaluated every minute for ``--days`` days of unchanged traffic
  (after a 7-day warm-up), budget <= 1 alarm per pipeline per 30 days;
* detection: a +25% shift of one random stage at a random time, detected (on that stage)
  within 10 minutes in >= 95% of trials; delays p50 / p95 / max;
* deploy: 60% of traffic moves to a new v8 whose model_forward is x1.35, labelled a
  ``regression`` of v8 in >= 95% of trials.

Pipelines run in ``--workers`` processes (2: this machine's cores). Seeded: the same
arguments print the same figures.
"""

from __future__ import annotations

import argparse
import collections
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from latencyboard.detectors import mix
from latencyboard.detectors.simulations import steady


def trials(
    seed: int, detections: int, mixes: int
) -> tuple[list[tuple[str, float | None]], int, list[str]]:
    """One pipeline's shifted stages and detection delays, how many alerts named the shifted
    stage, and the mix trials' labels."""
    rng = np.random.default_rng(10_000 + seed)
    pipeline = steady.Pipeline.draw(rng)
    baselines = steady.week_of_baselines(pipeline, rng)
    found = [steady.detection_trial(pipeline, baselines, rng) for _ in range(detections)]
    mixed = [steady.mix_trial(pipeline, baselines, rng) for _ in range(mixes)]
    labels = [str(trial.label) if trial.label else "no_alert" for trial in mixed]
    named = sum(trial.named_stage == trial.stage for trial in found)
    return [(trial.stage, trial.delay_seconds) for trial in found], named, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=10)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--detections", type=int, default=20, help="trials per pipeline")
    parser.add_argument("--mixes", type=int, default=10, help="mix trials per pipeline")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    seeds = range(args.pipelines)
    with ProcessPoolExecutor(args.workers) as pool:
        runs = list(pool.map(steady.false_alarm_run, seeds, [args.days] * args.pipelines))
        found = list(
            pool.map(trials, seeds, [args.detections] * len(seeds), [args.mixes] * len(seeds))
        )
    alarms = [run.alarms for run in runs]
    print(f"false alarms over {args.days} days of unchanged traffic, {args.pipelines} pipelines:")
    print(f"  alarms per pipeline {alarms}  (total {sum(alarms)}, max {max(alarms)})")
    print(
        f"  evaluations {sum(run.evaluations for run in runs):,}, firing "
        f"{sum(run.firing_evaluations for run in runs)}, stages named "
        f"{[stage for run in runs for stage in run.stages]}"
    )
    shifts = [shift for run_shifts, _, _ in found for shift in run_shifts]
    delays = [delay for _, delay in shifts]
    detected = np.array([np.inf if delay is None else delay for delay in delays]) / 60.0
    within = float(np.mean(detected <= 10.0))
    named = sum(count for _, count, _ in found)
    print(f"+25% shift of one stage, {len(delays)} trials:")
    print(
        f"  detected within 10 min {within:.1%}; ever (20 min) {np.mean(np.isfinite(detected)):.1%}"
    )
    finite = detected[np.isfinite(detected)]
    p50, p95 = np.percentile(finite, [50, 95])
    print(f"  delay min p50 {p50:.1f}  p95 {p95:.1f}  max {finite.max():.1f}")
    print(f"  the alert named the shifted stage in {named} of {finite.size} detections")
    per_stage = collections.defaultdict(list)
    for (stage, _), minutes in zip(shifts, detected, strict=True):
        per_stage[stage].append(minutes <= 10.0)
    print(
        "  within 10 min by stage: "
        + ", ".join(f"{stage} {sum(hits)}/{len(hits)}" for stage, hits in sorted(per_stage.items()))
    )
    labels = collections.Counter(label for _, _, run_labels in found for label in run_labels)
    total = sum(labels.values())
    share = labels[str(mix.Label.REGRESSION)] / total
    print(f"new v8 taking 60% (model_forward x1.35), {total} trials:")
    print(f"  labelled regression {share:.1%}; labels {dict(labels)}")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

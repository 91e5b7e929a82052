"""Throughput of latencyboard.sketches (sketch and batch) on synthetic latencies; run:
python benchmarks/bench_sketch.py.

Prints the best of several runs for each operation, as values/s or items/s plus wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from latencyboard.sketches.batch import SketchBatch
from latencyboard.sketches.sketch import Sketch, merge_many, sketches_by_group

REPEATS = 7
MINUTES_PER_WEEK = 7 * 24 * 60
HOURS_PER_WEEK = 7 * 24


def best_seconds(operation: Callable[[], object]) -> float:
    """Best wall time of REPEATS runs (the minimum is the least noisy estimate)."""
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        operation()
        timings.append(time.perf_counter() - start)
    return min(timings)


def report(label: str, seconds: float, units: float, unit: str) -> None:
    print(f"{label:<48} {seconds * 1e3:9.2f} ms  {units / seconds:14,.0f} {unit}/s")


def latencies(rng: np.random.Generator, size: int) -> np.ndarray:
    """Log-normal inference latencies around 50 ms with a slow 5% mode around 800 ms."""
    fast = rng.lognormal(np.log(50.0), 0.6, size)
    slow = rng.lognormal(np.log(800.0), 0.5, size)
    return np.where(rng.random(size) < 0.05, slow, fast)


def main() -> None:
    rng = np.random.default_rng(2024)
    million = latencies(rng, 1_000_000)

    report(
        "insert (from_values, 1M values)",
        best_seconds(lambda: Sketch.from_values(million)),
        million.size,
        "values",
    )

    minute_groups = np.sort(rng.integers(0, 1_000, million.size))
    report(
        "sketches_by_group (1M values, 1k groups, sorted)",
        best_seconds(lambda: sketches_by_group(minute_groups, million)),
        million.size,
        "values",
    )
    random_groups = rng.integers(0, 10_000, million.size)
    report(
        "sketches_by_group (1M values, 10k groups, random)",
        best_seconds(lambda: sketches_by_group(random_groups, million)),
        million.size,
        "values",
    )

    # A week of per-minute sketches of ~100 spans each, as stored by the rollup worker.
    minute_ids = np.repeat(np.arange(MINUTES_PER_WEEK), 100)
    minute_values = latencies(rng, minute_ids.size)
    minute_sketches = sketches_by_group(minute_ids, minute_values)
    minute_objects = list(minute_sketches.values())
    report(
        f"to_bytes ({len(minute_objects):,} minute sketches)",
        best_seconds(lambda: [sketch.to_bytes() for sketch in minute_objects]),
        len(minute_objects),
        "sketches",
    )
    minute_blobs = [sketch.to_bytes() for sketch in minute_objects]
    report(
        "from_bytes (one minute blob)",
        best_seconds(lambda: Sketch.from_bytes(minute_blobs[0])),
        1,
        "blobs",
    )
    report(
        f"merge_many ({len(minute_blobs):,} minute blobs)",
        best_seconds(lambda: merge_many(minute_blobs)),
        len(minute_blobs),
        "blobs",
    )
    report(
        f"merge_many ({len(minute_objects):,} minute Sketch objects)",
        best_seconds(lambda: merge_many(minute_objects)),
        len(minute_objects),
        "sketches",
    )

    hour_blobs = [
        merge_many(minute_blobs[hour * 60 : (hour + 1) * 60]).to_bytes()
        for hour in range(HOURS_PER_WEEK)
    ]
    report(
        f"merge_many ({len(hour_blobs)} hour blobs)",
        best_seconds(lambda: merge_many(hour_blobs)),
        len(hour_blobs),
        "blobs",
    )

    week = merge_many(minute_blobs)
    qs = [0.5, 0.9, 0.95, 0.99, 0.999]
    report(
        "quantiles (5 qs on the week sketch)",
        best_seconds(lambda: week.quantiles(qs)),
        len(qs),
        "quantiles",
    )
    # The dashboard's week as the percentiles API reads it: hour rows of 7 series end to end
    # in one buffer, decoded once and summarized per hour and per series.
    series = 7
    dashboard = hour_blobs * series
    buffer = b"".join(dashboard)
    lengths = np.array([len(blob) for blob in dashboard])
    hour_of = np.arange(len(dashboard))
    series_of = hour_of // HOURS_PER_WEEK

    def dashboard_week() -> None:
        batch = SketchBatch.from_buffer(buffer, lengths)
        batch.group_summaries(hour_of, len(dashboard), qs)
        batch.group_summaries(series_of, series, qs)

    report(
        f"SketchBatch ({series} x {HOURS_PER_WEEK} hour blobs, 2 groupings)",
        best_seconds(dashboard_week),
        len(dashboard),
        "blobs",
    )
    many_qs = np.linspace(0.0, 1.0, 1_001)
    report(
        "quantiles (1,001 qs on the week sketch)",
        best_seconds(lambda: week.quantiles(many_qs)),
        many_qs.size,
        "quantiles",
    )

    print()
    print(
        f"minute blob: mean {np.mean([len(b) for b in minute_blobs]):.0f} bytes; "
        f"hour blob: mean {np.mean([len(b) for b in hour_blobs]):.0f} bytes; "
        f"week blob: {len(week.to_bytes())} bytes"
    )
    for size in (100, 10_000):
        blob = Sketch.from_values(rng.lognormal(np.log(50.0), 1.0, size)).to_bytes()
        print(f"log-normal sketch of {size:>6,} values: {len(blob)} bytes")


if __name__ == "__main__":
    main()

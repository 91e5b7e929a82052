"""Fold throughput of one rollup worker process: spans/s from pending batches to rollups.

Run: ``python benchmarks/bench_rollup.py [--spans 2000000] [--source backfill|writer]``.

Self-contained: starts a throwaway PostgreSQL 16 (fsync on) and Redis (each fold tells the live
pages over the channel layer, as in production), migrates, and loads ``--spans``
spans as pending ingest batches, either

* ``backfill`` (default): ``manage.py backfill_demo`` over ``--days`` days ending now, the demo
  pipelines' traffic with one batch per hour of traffic, or
* ``writer``: 512-span export requests through ``ingest.writer.SpanWriter`` (what live ingest
  writes), spread over the last two hours.

Then, in this one process, it ANALYZEs (as autovacuum would have by then) and calls
``fold_pending_batches`` until no batch is pending, timing each fold transaction, checks that
the minute rollups count every stored span exactly once, and times the first compaction over
the whole history and the next one. Prints spans/s and writes the figures to
``var/bench/rollup.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from _demo_data import backfill_demo, demo_scale, pending_folds
from _stack import (  # puts the repo on sys.path
    ROOT,
    BenchStack,
    bench_config,
    interrupt_on_sigterm,
    running_redis,
    write_json,
)

from latencyboard.storage import tables

JSON_PATH = ROOT / "var" / "bench" / "rollup.json"
SPANS_PER_REQUEST = 512
STAGES = ("queue_wait", "feature_hydration", "model_forward", "postprocess", "serialize")


def load_writer(team_id: int, spans: int) -> None:
    from ingest.decoding import DecodedSpan
    from ingest.writer import SpanWriter
    from latencyboard.db import conninfo

    now_ns = time.time_ns()

    def request_batch(number: int) -> list[DecodedSpan]:
        rng = np.random.default_rng(number)  # one per request: generators are not thread-safe
        batch = []
        starts = now_ns - rng.integers(0, 7200 * 10**9, SPANS_PER_REQUEST // 6)
        durations = rng.lognormal(np.log(8e6), 0.8, (len(starts), len(STAGES))).astype(np.int64)
        for start, stage_ns in zip(starts.tolist(), durations.tolist(), strict=True):
            trace, root = os.urandom(16), os.urandom(8)
            service = "recommender" if start % 3 else "fraud"
            names: list[tuple[str | None, int]] = [
                (None, sum(stage_ns)),
                *zip(STAGES, stage_ns, strict=True),
            ]
            for stage, duration in names:
                batch.append(
                    DecodedSpan(
                        trace_id=trace,
                        span_id=root if stage is None else os.urandom(8),
                        parent_span_id=None if stage is None else root,
                        name=stage or "predict",
                        kind=2 if stage is None else 1,
                        start_ns=start,
                        end_ns=start + duration,
                        status_code=2 if duration > 40e6 else 0,
                        status_message="",
                        service_name=service,
                        environment="",
                        stage=stage,
                        attributes={},
                        dropped_attributes=0,
                    )
                )
        return batch

    writer = SpanWriter(conninfo(), max_connections=3)
    received = dt.datetime.now(dt.UTC)
    try:
        write = writer.write  # the first request alone creates the pipelines and stages
        write(team_id, request_batch(0), rejected=0, protocol="bench", received_at=received)
        requests = -(-spans // SPANS_PER_REQUEST) - 1
        with ThreadPoolExecutor(3) as pool:
            for _ in pool.map(
                lambda n: write(
                    team_id, request_batch(n), rejected=0, protocol="bench", received_at=received
                ),
                range(requests),
            ):
                pass
    finally:
        writer.close()


def fold_phase() -> dict[str, Any]:
    from django.db import connection
    from django.utils import timezone

    from latencyboard.rollups.compaction import compact_rollups

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute(f"SELECT count(*), sum(stored_spans) FROM {tables.INGEST_BATCH}")  # noqa: S608
        batches, stored = cursor.fetchone()
    started = time.perf_counter()
    folds = [(result.batches, result.spans, seconds) for result, seconds in pending_folds()]
    seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT coalesce(sum(count), 0) FROM {tables.ROLLUP} "  # noqa: S608
            "WHERE resolution = 'minute' AND stage_id IS NOT NULL"
        )
        (counted,) = cursor.fetchone()
        cursor.execute(f"SELECT count(*) FROM {tables.ROLLUP} WHERE resolution = 'minute'")  # noqa: S608
        (minute_rows,) = cursor.fetchone()
    compact_started = time.perf_counter()
    compaction = compact_rollups(timezone.now())
    first_compaction_seconds = time.perf_counter() - compact_started
    compact_started = time.perf_counter()
    compact_rollups(timezone.now())
    per_fold = [spans / fold_seconds for _, spans, fold_seconds in folds]
    return {
        "batches": batches,
        "spans": int(stored),
        "folds": len(folds),
        "seconds": seconds,
        "spans_per_s": int(stored) / seconds,
        "median_fold_spans": statistics.median(spans for _, spans, _ in folds),
        "median_fold_seconds": statistics.median(s for _, _, s in folds),
        "slowest_fold_spans_per_s": min(per_fold),
        "minute_rows": minute_rows,
        "consistent": int(counted) == int(stored),
        "first_compaction_seconds": first_compaction_seconds,
        "next_compaction_seconds": time.perf_counter() - compact_started,
        "first_compaction_hours": compaction.hours,
        "first_compaction_days": compaction.days,
        "fold_seconds": [round(s, 3) for _, _, s in folds],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=2_000_000, help="spans to load and fold")
    parser.add_argument("--source", choices=["backfill", "writer"], default="backfill")
    parser.add_argument("--days", type=int, default=9, help="days of history (backfill)")
    parser.add_argument("--json", type=Path, default=JSON_PATH, help="where to write figures")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    args = parser.parse_args()
    interrupt_on_sigterm()
    figures: dict[str, Any] = {"config": bench_config(source=args.source)}
    try:
        with BenchStack(keep=args.keep) as stack, running_redis(stack) as redis_url:
            stack.env["REDIS_URL"] = redis_url
            os.environ.update(stack.env)
            import django

            django.setup()
            print(f"bench: loading {args.spans:,} spans ({args.source})", file=sys.stderr)
            load_started = time.perf_counter()
            if args.source == "backfill":
                backfill_demo(stack, args.days, demo_scale(args.spans, args.days))
            else:
                load_writer(stack.team_id, args.spans)
            figures["load_seconds"] = time.perf_counter() - load_started
            print("bench: folding", file=sys.stderr)
            figures["fold"] = fold_phase()
            from django.db import connection

            connection.close()
    except KeyboardInterrupt:
        print("bench: interrupted, everything stopped", file=sys.stderr)
        return 130
    fold = figures["fold"]
    print(
        f"folded {fold['spans']:,} spans in {fold['batches']:,} batches with "
        f"{fold['folds']} fold transactions in {fold['seconds']:.1f} s: "
        f"{fold['spans_per_s']:,.0f} spans/s (median fold {fold['median_fold_spans']:,.0f} "
        f"spans in {fold['median_fold_seconds']:.2f} s; {fold['minute_rows']:,} minute rows)"
    )
    print(
        f"first compaction: {fold['first_compaction_hours']:,} hour and "
        f"{fold['first_compaction_days']:,} day rows in {fold['first_compaction_seconds']:.1f} s; "
        f"the next one (nothing new) in {fold['next_compaction_seconds']:.2f} s"
    )
    print(f"every span counted once: {fold['consistent']}")
    write_json(args.json, figures)
    return 0 if fold["consistent"] else 1


if __name__ == "__main__":
    sys.exit(main())

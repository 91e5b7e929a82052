"""Disk with tiered retention against keeping every span, over days of demo traffic.

Days of the demo profile are back-filled one at a time into a throwaway PostgreSQL and run
through what the beat tasks do after each simulated day, with the clock at that day's end
(plus 70 minutes, so its stage shares are written): fold, compaction and minute retention,
stage shares, then thinning of the days past SPAN_HOT_DAYS. Before a day is thinned its
partition's size (heap, indexes and TOAST) is noted: the sum of those is the span table
kept whole. At the end, both totals add the derived tables every setup keeps (rollups,
cohort rollups, SLA minutes, stage shares, ingest batches).

By default the pipelines run at the live demo's own rates (about 18 M spans a day; a day
takes about 4 minutes on 2 cores, so 30 days about 2 hours, with at most 3 days, ~13 GB, of
whole partitions on disk at once). ``--scale`` multiplies those rates; ``--requests-per-s``
sets one daily mean for every pipeline instead. A lower rate is quicker but not the same
measurement: the derived tables, whose size follows minutes and stages rather than
requests, weigh more, and with a few requests per pipeline-minute "slower than the minute's
p99" keeps a larger share of the traces.

    make bench-retention                                         # 30 days at the demo's rates
    make bench-retention ARGS="--days 7 --requests-per-s 0.05"   # quicker, not comparable
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

from _stack import BenchStack, bench_config, interrupt_on_sigterm, running_redis, write_json

JSON_PATH = Path("var/bench/retention.json")
SETTLE = dt.timedelta(minutes=70)
MIB = 1024 * 1024


def _sizes() -> dict[str, int]:
    """Bytes on disk (heap, indexes, TOAST) of each span partition and derived table."""
    from django.db import connection

    from latencyboard.storage import tables
    from latencyboard.storage.partitions import existing

    derived = (
        tables.ROLLUP,
        tables.COHORT_ROLLUP,
        tables.SLA_MINUTE,
        tables.STAGE_SHARE,
        tables.STAGE_SHARE_WATERMARK,
        tables.INGEST_BATCH,
        tables.THINNED_DAY,
    )
    with connection.cursor() as cursor:
        names = [*existing(cursor), *derived]
        cursor.execute(
            "SELECT name, pg_total_relation_size(name::regclass) FROM unnest(%s::text[]) name",
            [names],
        )
        return dict(cursor.fetchall())


def _at(moment: dt.datetime) -> dt.datetime:
    return moment


def _simulate(
    team_name: str, days: int, scale: float, requests_per_s: float | None, seed: int
) -> dict[str, Any]:
    from latencyboard.demo.backfill import backfill_demo
    from latencyboard.retention.models import ThinnedDay
    from latencyboard.retention.services import thin_due
    from latencyboard.rollups import compaction, stage_share_services
    from latencyboard.rollups.services import fold_until_idle
    from latencyboard.storage.partitions import DayPartition
    from latencyboard.teams.models import Team

    team = Team.objects.get(name=team_name)
    first = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first -= dt.timedelta(days=days + 1)
    whole: dict[str, int] = {}  # partition name: bytes before it was thinned
    started = time.perf_counter()
    for number in range(days):
        day = first + dt.timedelta(days=number)
        now = day + dt.timedelta(days=1) + SETTLE
        backfill_demo(
            team, days=1, end=day + dt.timedelta(days=1), now=now,
            scale=scale, requests_per_s=requests_per_s, seed=seed + number,
        )  # fmt: skip
        fold_until_idle(functools.partial(_at, now), seconds=3600)
        compaction.compact_rollups(now)
        stage_share_services.compute_stage_shares(now, seconds=3600)
        # A partition's size before it is thinned, the largest it has been.
        for name, size in _sizes().items():
            if name.startswith("spans_span_p"):
                whole[name] = max(whole.get(name, 0), size)
        thinned = thin_due(now)
        sizes = _sizes()
        kept_bytes = sum(v for k, v in sizes.items() if k.startswith("spans_span_p"))
        print(
            f"bench: day {number + 1}/{days} ({day:%Y-%m-%d}) done, {len(thinned)} thinned, "
            f"spans {sum(whole.values()) / MIB:,.1f} MiB whole, {kept_bytes / MIB:,.1f} MiB kept, "
            f"all tables {sum(sizes.values()) / MIB:,.1f} MiB, "
            f"{time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    sizes = _sizes()
    spans_now = {k: v for k, v in sizes.items() if k.startswith("spans_span_p")}
    derived = {k: v for k, v in sizes.items() if k not in spans_now}
    counted = (
        "spans_before", "spans_after", "traces_before", "error_traces", "slow_traces",
        "sampled_traces",
    )  # fmt: skip
    days_rows = list(ThinnedDay.objects.values_list(*counted))
    kept = {key: sum(row[i] for row in days_rows) for i, key in enumerate(counted)}
    partition_days = [DayPartition.from_name(name) for name in spans_now]
    return {
        "seconds": time.perf_counter() - started,
        "thinned_days": len(days_rows),
        "span_partitions": len([p for p in partition_days if p is not None]),
        "spans_whole_bytes": sum(max(whole.get(k, 0), v) for k, v in spans_now.items()),
        "spans_thinned_bytes": sum(spans_now.values()),
        "derived_bytes": derived,
        "kept": kept,
    }


def _report(result: dict[str, Any]) -> dict[str, float]:
    derived = sum(result["derived_bytes"].values())
    whole = result["spans_whole_bytes"] + derived
    thinned = result["spans_thinned_bytes"] + derived
    kept = result["kept"]
    traces = kept["traces_before"] or 1
    print(
        f"{result['thinned_days']} of {result['span_partitions']} days thinned in "
        f"{result['seconds']:.0f} s"
    )
    print(
        f"keeping every span: {whole / MIB:,.1f} MiB (spans "
        f"{result['spans_whole_bytes'] / MIB:,.1f} + derived {derived / MIB:,.1f})"
    )
    print(
        f"tiered retention:   {thinned / MIB:,.1f} MiB (spans "
        f"{result['spans_thinned_bytes'] / MIB:,.1f} + derived {derived / MIB:,.1f})"
    )
    print(f"ratio: 1/{whole / thinned:.1f} of keeping every span (target: 1/8 or less)")
    spans_ratio = result["spans_whole_bytes"] / (result["spans_thinned_bytes"] or 1)
    print(f"span partitions alone: 1/{spans_ratio:.1f}")
    for name, size in sorted(result["derived_bytes"].items(), key=lambda item: -item[1]):
        print(f"  {name}: {size / MIB:,.1f} MiB")
    print(
        f"thinned days kept {kept['spans_after']:,} of {kept['spans_before']:,} spans "
        f"({kept['spans_after'] / (kept['spans_before'] or 1):.1%}); traces: "
        f"{kept['error_traces'] / traces:.2%} with errors, {kept['slow_traces'] / traces:.2%} "
        f"slow, {kept['sampled_traces'] / traces:.2%} sampled"
    )
    return {"whole_bytes": whole, "thinned_bytes": thinned, "ratio": whole / thinned}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30, help="simulated days of traffic")
    rate = parser.add_mutually_exclusive_group()
    rate.add_argument("--scale", type=float, default=1.0, help="the live demo's rates times this")
    rate.add_argument(
        "--requests-per-s", type=float, help="instead: this daily mean for every pipeline"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=JSON_PATH, help="where to write figures")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    args = parser.parse_args()
    interrupt_on_sigterm()
    figures: dict[str, Any] = {
        "config": bench_config(days=args.days, scale=args.scale, requests_per_s=args.requests_per_s)
    }
    try:
        with BenchStack(keep=args.keep) as stack, running_redis(stack) as redis_url:
            stack.env["REDIS_URL"] = redis_url
            os.environ.update(stack.env)
            import django

            django.setup()
            figures["run"] = _simulate(
                stack.team_name, args.days, args.scale, args.requests_per_s, args.seed
            )
            from django.db import connection

            connection.close()
    except KeyboardInterrupt:
        print("bench: interrupted, everything stopped", file=sys.stderr)
        return 130
    figures["totals"] = _report(figures["run"])
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-span costs measured in one run, and the capacity model they give (docs/capacity.md).

Run: ``python benchmarks/bench_capacity.py [--seconds 20] [--senders 2] [--processes 1]
[--cores-per-host 16] [--utilization 0.6] [--disk-fill 0.7] [--disk-tb-per-host 16]
[--retention-days 30] [--hot-days 2] [--kept-share 0.07]`` (``make bench-capacity ARGS=...``).

Self-contained, on the machinery of ``bench_ingest.py``: a throwaway PostgreSQL 16 (fsync
on), migrated, and ``python -m ingest``. Then:

1. Ingest: ``--senders`` processes POST 512-span OTLP/protobuf exports (the ingest
   benchmark's traffic) for ``--warmup`` + ``--seconds``; CPU of the ingest server and of
   PostgreSQL per stored span in the measured window.
2. Disk: heap + indexes + TOAST of every span partition over the spans stored.
3. Fold: in this process, ``fold_pending_batches`` until nothing is pending, then the stage
   shares of every minute; CPU of this process and of PostgreSQL per span folded.
4. WAL: ``pg_current_wal_lsn()`` before and after ingest (all of it: warm-up and tail too) and
   around the fold, over the spans stored.

Prints the costs and the model for 10k, 100k and 1M spans/s as a Markdown table, and writes
both to ``var/bench/capacity.json``. CPU per span is what other tenants' load moves least on a
shared machine; rerun after a schema change (a leaner span row) and compare in one sitting.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
from pathlib import Path
from typing import Any

import psycopg
from _capacity_model import Assumptions, SpanCosts, capacity, table
from _demo_data import pending_folds
from _ingest_phase import ingest_phase
from _meters import CpuMeter, postmaster_pid, process_tree, processes_of
from _stack import (  # puts the repo on sys.path
    ROOT,
    BenchStack,
    bench_config,
    interrupt_on_sigterm,
    write_json,
)

from latencyboard.storage import tables

JSON_PATH = ROOT / "var" / "bench" / "capacity.json"
LOG_DIR = ROOT / "var" / "bench" / "capacity-logs"
RATES = (10_000, 100_000, 1_000_000)

_WAL_LSN = "SELECT pg_current_wal_lsn()::text"
_WAL_SINCE = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::float8"
_SPAN_DISK = f"""
SELECT (SELECT count(*) FROM {tables.SPAN}),
       (SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits
        WHERE inhparent = '{tables.SPAN}'::regclass)
"""  # noqa: S608 - a constant table name


def _lsn(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(_WAL_LSN).fetchone()
    assert row is not None
    return str(row[0])


def _wal_since(url: str, lsn: str) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # so that neither phase's WAL includes the other's flush
        row = conn.execute(_WAL_SINCE, [lsn]).fetchone()
    assert row is not None
    return float(row[0])


def _disk(url: str) -> dict[str, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # the visibility map and statistics autovacuum would add
        spans, span_bytes = conn.execute(_SPAN_DISK).fetchone()  # type: ignore[misc]
    return {
        "spans": int(spans),
        "span_bytes": float(span_bytes),
        "bytes_per_span": float(span_bytes) / max(int(spans), 1),
    }


def fold_phase(stack: BenchStack) -> dict[str, Any]:
    """Fold every pending batch and compute every minute's stage shares, in this process."""
    from django.db import connection

    from latencyboard.rollups.stage_share_services import compute_stage_shares

    meter = CpuMeter(
        {
            "rollup worker": processes_of(lambda: [os.getpid()]),
            "postgres": process_tree(postmaster_pid(stack)),
        }
    )
    started = dt.datetime.now(dt.UTC)
    meter.start()
    folded = sum(result.spans for result, _ in pending_folds())
    # Every minute stored has ended its grace period an hour from now.
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    while compute_stage_shares(later, seconds=60).behind:
        pass
    cpu = meter.stop()
    seconds = (dt.datetime.now(dt.UTC) - started).total_seconds()
    connection.close()
    return {
        "spans": folded,
        "seconds": seconds,
        "cpu_us_per_span": {
            name: cpu[name] * seconds / max(folded, 1) * 1e6
            for name in ("rollup worker", "postgres")
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured ingest seconds")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first")
    parser.add_argument("--senders", type=int, default=2, help="client processes")
    parser.add_argument("--threads", type=int, default=None, help="ingest --threads")
    parser.add_argument("--processes", type=int, default=1, help="ingest --processes")
    defaults = Assumptions()
    parser.add_argument("--cores-per-host", type=int, default=defaults.cores_per_host)
    parser.add_argument("--utilization", type=float, default=defaults.utilization)
    parser.add_argument("--disk-fill", type=float, default=defaults.disk_fill)
    parser.add_argument("--disk-tb-per-host", type=float, default=defaults.disk_tb_per_host)
    parser.add_argument("--retention-days", type=int, default=defaults.retention_days)
    parser.add_argument("--hot-days", type=int, default=defaults.hot_days)
    parser.add_argument(
        "--kept-share",
        type=float,
        default=defaults.kept_share,
        help="share of spans a thinned day keeps (errors, above p99, sample)",
    )
    parser.add_argument("--json", type=Path, default=JSON_PATH, help="where to write figures")
    args = parser.parse_args()
    interrupt_on_sigterm()
    assume = Assumptions(
        args.cores_per_host,
        args.utilization,
        args.disk_fill,
        args.disk_tb_per_host,
        args.retention_days,
        args.hot_days,
        args.kept_share,
    )
    figures: dict[str, Any] = {"config": bench_config(**dataclasses.asdict(assume))}
    try:
        with BenchStack(log_dir=LOG_DIR) as stack:
            stack.start_ingest(args.threads, args.processes)
            print("bench: ingesting", file=sys.stderr, flush=True)
            before = _lsn(stack.database_url)
            figures["ingest"] = ingest_phase(
                stack, [stack.team] * args.senders, args.warmup, args.seconds
            )
            for server in stack.ingest:
                server.stop()
            ingest_wal = _wal_since(stack.database_url, before)
            # Live updates off: the fold's cost, not a Redis round trip per pipeline.
            os.environ.update({**stack.env, "LIVE_UPDATES": "false"})
            import django

            django.setup()
            print("bench: folding", file=sys.stderr, flush=True)
            before = _lsn(stack.database_url)
            figures["fold"] = fold_phase(stack)
            fold_wal = _wal_since(stack.database_url, before)
            figures["disk"] = _disk(stack.database_url)
    except KeyboardInterrupt:
        print("bench: interrupted, everything stopped", file=sys.stderr)
        return 130
    spans = figures["disk"]["spans"]
    ingest_cpu, fold_cpu = figures["ingest"]["cpu_us_per_row"], figures["fold"]["cpu_us_per_span"]
    costs = SpanCosts(
        ingest_cpu_us=ingest_cpu["ingest server"],
        postgres_ingest_cpu_us=ingest_cpu["postgres"],
        fold_cpu_us=fold_cpu["rollup worker"],
        postgres_fold_cpu_us=fold_cpu["postgres"],
        disk_bytes=figures["disk"]["bytes_per_span"],
        wal_bytes=(ingest_wal + fold_wal) / max(spans, 1),
    )
    figures["wal"] = {
        "ingest_bytes_per_span": ingest_wal / spans,
        "fold_bytes_per_span": fold_wal / spans,
    }
    figures["costs"] = dataclasses.asdict(costs)
    rows = [capacity(rate, costs, assume) for rate in RATES]
    figures["model"] = [dataclasses.asdict(row) for row in rows]
    report(figures, costs, assume, rows)
    write_json(args.json, figures)
    consistent = figures["ingest"]["consistent"] and figures["fold"]["spans"] == spans
    return 0 if consistent else 1


def report(figures: dict[str, Any], costs: SpanCosts, assume: Assumptions, rows: list[Any]) -> None:
    ingest, fold, disk = figures["ingest"], figures["fold"], figures["disk"]
    print(
        "\n".join(
            [
                "",
                f"capacity: {figures['config']['command']}",
                f"  stored {disk['spans']:,} spans ({ingest['stored_spans_per_s']:,.0f}/s in the"
                f" window); folded {fold['spans']:,} in {fold['seconds']:.1f} s",
                f"  ingest CPU µs/span        {costs.ingest_cpu_us:8.1f}",
                f"  PostgreSQL CPU µs/span    {costs.postgres_ingest_cpu_us:8.1f} ingest"
                f"  {costs.postgres_fold_cpu_us:6.1f} fold",
                f"  fold CPU µs/span          {costs.fold_cpu_us:8.1f}   (fold + stage shares)",
                f"  disk B/span               {costs.disk_bytes:8.0f}   (heap + indexes + TOAST)",
                f"  WAL B/span                {costs.wal_bytes:8.0f}   (ingest"
                f" {figures['wal']['ingest_bytes_per_span']:.0f}, fold"
                f" {figures['wal']['fold_bytes_per_span']:.0f})",
                f"  assumptions               {assume}",
                "",
                table(rows),
            ]
        ),
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())

"""Sustained OTLP/HTTP ingest throughput against the raw COPY ceiling of the same PostgreSQL.

Run: ``python benchmarks/bench_ingest.py [--seconds 60] [--senders 4] [--threads N]``.

Self-contained: starts a throwaway PostgreSQL 16 (fsync on, as in production), migrates, issues
an ingest token and starts ``python -m ingest``. Then, in one run so that the figures share the
machine's momentary noise and can be compared as ratios:

1. Ingest phase: ``--senders`` processes POST pre-encoded 512-span protobuf exports over
   keep-alive connections, ``--warmup`` seconds unmeasured, then ``--seconds`` measured. Every
   span is distinct: each request is a template whose trace/span ids and timestamps are patched
   in place (numpy scatter, 0.2-0.4 ms) with fresh random ids and "now". Afterwards the rows in
   the span table must equal the spans acknowledged with 200, and every stored span's pipeline
   and stage must exist, else the run fails loudly.
2. COPY ceiling: as many rows as were stored in the measured window, copied as 512-row binary
   COPY batches, one commit each, from ``--copy-workers`` processes, into a day-partitioned copy
   of the span table with the same indexes. The rows are real stored rows (read back with COPY
   TO) with fresh trace ids, pre-encoded, so the clients cost next to nothing and the figure is
   what this PostgreSQL can absorb.

Prints accepted and stored spans/s, stored/ceiling, request latency percentiles, the ingest
server's peak RSS, non-200 counts, the CPU split per component and CPU microseconds per span
(the figure that other tenants' load barely moves), PostgreSQL backend states and wait events
sampled in the measured window, WAL volume, and the bytes on disk per stored span (heap,
each index and TOAST of the span partitions over the rows stored, see ``_disk.py``); writes
the same to ``var/bench/ingest.json`` and keeps the servers' logs in
``var/bench/ingest-logs/``. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import psycopg
from _copy_ceiling import copy_phase
from _disk import describe, span_bytes
from _ingest_phase import ingest_phase
from _otlp_bodies import SPANS_PER_REQUEST
from _stack import (  # puts the repo on sys.path
    ROOT,
    BenchStack,
    bench_config,
    interrupt_on_sigterm,
    write_json,
)

from latencyboard.storage import tables

JSON_PATH = ROOT / "var" / "bench" / "ingest.json"
LOG_DIR = ROOT / "var" / "bench" / "ingest-logs"


def _cores(cpu: dict[str, float], spec: str = ".2f") -> str:
    return ", ".join(f"{name} {value:{spec}}" for name, value in cpu.items())


def _states(states: dict[str, float], top: int = 8) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in list(states.items())[:top])


def report(figures: dict[str, Any]) -> None:
    ingest, copy = figures["ingest"], figures.get("copy")
    lat = ingest["latency_ms"]
    lines = [
        "",
        f"ingest: {figures['config']['command']}",
        f"  accepted spans/s          {ingest['accepted_spans_per_s']:12,.0f}",
        f"  stored spans/s            {ingest['stored_spans_per_s']:12,.0f}"
        f"   ({ingest['requests_per_s']:.1f} requests/s of {SPANS_PER_REQUEST} spans)",
    ]
    if copy:
        lines += [
            f"  COPY ceiling rows/s       {copy['rows_per_s']:12,.0f}"
            f"   ({copy['rows']:,} rows, {figures['config']['copy_workers']} clients,"
            f" batch p50 {copy['batch_latency_ms']['p50']:.1f} ms"
            f" p99 {copy['batch_latency_ms']['p99']:.1f} ms)",
            f"  stored / ceiling          {figures['stored_over_ceiling']:12.2f}",
        ]
    lines += [
        f"  request latency ms        p50 {lat['p50']:.1f}  p90 {lat['p90']:.1f}"
        f"  p99 {lat['p99']:.1f}  max {lat['max']:.1f}",
        "  ingest peak RSS MiB       "
        + ", ".join(f"{k} {v:.0f}" for k, v in ingest["peak_rss_mib"].items()),
        f"  non-200 responses         {ingest['non_200'] or 'none'}",
        f"  stored rows / accepted    {ingest['stored_rows_total']:,}"
        f" / {ingest['accepted_total']:,}"
        f"   (batches say {ingest['batch_stored_total']:,}, duplicates"
        f" {ingest['duplicates_total']}, rejected {ingest['rejected_total']})",
        f"  CPU cores, ingest phase   {_cores(ingest['cpu_cores'])}",
        f"  CPU µs per stored span    {_cores(ingest['cpu_us_per_row'], '.1f')}",
        f"  PG backends, ingest       {_states(ingest['pg_backends_by_state'])}",
        f"  WAL, ingest               {ingest['wal']['bytes_per_row']:.0f} B/row,"
        f" {ingest['wal']['mib_per_s']:.1f} MiB/s, {ingest['wal']['syncs_per_s']:.0f} fsync/s,"
        f" {ingest['wal']['fpi_per_s']:.0f} FPI/s",
        f"  sender render ms/request  {ingest['sender_render_ms_per_request']:.2f}",
    ]
    lines += describe(figures["disk"])
    if copy:
        lines += [
            f"  CPU cores, COPY phase     {_cores(copy['cpu_cores'])}",
            f"  CPU µs per COPY row       {_cores(copy['cpu_us_per_row'], '.1f')}",
            f"  PG backends, COPY         {_states(copy['pg_backends_by_state'])}",
            f"  WAL, COPY                 {copy['wal']['bytes_per_row']:.0f} B/row,"
            f" {copy['wal']['mib_per_s']:.1f} MiB/s, {copy['wal']['syncs_per_s']:.0f} fsync/s",
        ]
    print("\n".join(lines), flush=True)
    if ingest["dangling_references"]:
        print(
            "\n!!! DANGLING: stored spans reference missing pipelines/stages: "
            + "; ".join(ingest["dangling_references"]),
            file=sys.stderr,
            flush=True,
        )
    if ingest["stored_rows_total"] != ingest["accepted_total"]:
        print(
            f"\n!!! MISMATCH: {tables.SPAN} holds "
            f"{ingest['stored_rows_total']:,} rows but {ingest['accepted_total']:,} spans were "
            f"acknowledged with 200 (ingest batches count {ingest['batch_stored_total']:,}) !!!",
            file=sys.stderr,
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds first")
    parser.add_argument("--senders", type=int, default=4, help="client processes")
    parser.add_argument(
        "--threads", type=int, default=None, help="ingest --threads (default: INGEST_THREADS, 8)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=os.cpu_count() or 1,
        help="ingest --processes: workers sharing the ports (default: one per core)",
    )
    parser.add_argument("--copy-workers", type=int, default=4, help="COPY ceiling clients")
    parser.add_argument("--skip-copy", action="store_true", help="no COPY ceiling phase")
    parser.add_argument("--json", type=Path, default=JSON_PATH, help="where to write figures")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    args = parser.parse_args()
    interrupt_on_sigterm()
    figures: dict[str, Any] = {
        "config": bench_config(
            seconds=args.seconds,
            warmup=args.warmup,
            senders=args.senders,
            threads=args.threads,
            ingest_processes=args.processes,
            copy_workers=args.copy_workers,
            spans_per_request=SPANS_PER_REQUEST,
        )
    }
    try:
        with BenchStack(keep=args.keep, log_dir=LOG_DIR) as stack:
            server = stack.start_ingest(args.threads, args.processes)
            print(
                f"bench: stack up in {stack.root}, ingest pid {server.pid}"
                f" ({args.processes} workers)",
                file=sys.stderr,
                flush=True,
            )
            figures["ingest"] = ingest_phase(stack, args)
            with psycopg.connect(stack.database_url) as conn:
                figures["disk"] = span_bytes(conn, (tables.RESOURCE, tables.SPAN_TEMPLATE))
            if not args.skip_copy:
                rows = max(figures["ingest"]["stored_in_window"], 20 * SPANS_PER_REQUEST)
                figures["copy"] = copy_phase(stack, args, rows)
                figures["stored_over_ceiling"] = (
                    figures["ingest"]["stored_spans_per_s"] / figures["copy"]["rows_per_s"]
                )
    except KeyboardInterrupt:
        print("bench: interrupted, everything stopped", file=sys.stderr)
        return 130
    report(figures)
    write_json(args.json, figures)
    return 0 if figures["ingest"]["consistent"] else 1


if __name__ == "__main__":
    sys.exit(main())

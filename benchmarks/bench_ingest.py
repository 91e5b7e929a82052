"""Sustained OTLP/HTTP ingest throughput, of one team and of two teams at once, against the raw
COPY ceiling of the same PostgreSQL.

Run: ``python benchmarks/bench_ingest.py [--seconds 60] [--two-team-seconds S] [--senders 4]
[--threads N] [--only lone|two]``.

Self-contained: starts a throwaway PostgreSQL 16 (fsync on, as in production), migrates, issues
an ingest token to each of two teams and starts ``python -m ingest``. Then, in one run so that
the figures share the machine's momentary noise and can be compared as ratios:

1. Lone team: ``--senders`` processes POST pre-encoded 512-span protobuf exports with team A's
   token over keep-alive connections, ``--warmup`` seconds unmeasured, then ``--seconds``
   measured. Every span is distinct: each request is a template whose trace/span ids and
   timestamps are patched in place (numpy scatter, 0.2-0.4 ms) with fresh random ids and "now".
   An export refused with 429 or 503 is sent again after its Retry-After, as an OTLP exporter
   does; its spans count as accepted once, when a 200 comes back.
2. Two teams: the same, against the same server, with half the senders on team A's token and
   half on team B's, for ``--two-team-seconds`` (default ``--seconds``).
   After each phase, each team's new rows in the span table and in its ingest batches must equal
   the spans acknowledged to it with 200, and every stored span's pipeline and stage must exist,
   else the run fails loudly.
3. COPY ceiling: as many rows as the busier phase stored in its measured window, copied as
   512-row binary COPY batches, one commit each, from ``--copy-workers`` processes, into a
   day-partitioned copy of the span table with the same indexes. The rows are real stored rows
   (read back with COPY TO) with fresh trace ids, pre-encoded, so the clients cost next to
   nothing and the figure is what this PostgreSQL can absorb.

Prints, per phase: stored and accepted spans/s (per team, with each team's share, in the
two-team phase), how idle the machine was, request latency percentiles and export latency
(first try to 200), non-200 answers, refusals, retries and exports given up when the phase
ended, the ingest server's peak RSS in the phase, the CPU split per component and CPU
microseconds per span (the figure that other tenants' load barely moves), PostgreSQL backend
states and wait events sampled in the measured window and WAL volume; then the bytes on disk per
stored span (heap, each index and TOAST of the span partitions over the rows stored, see
``_disk.py``), the COPY ceiling and each phase's stored/ceiling. Writes the same to
``var/bench/ingest.json`` (the lone phase under ``ingest`` and ``stored_over_ceiling``, the
two-team phase under ``two_teams`` and ``two_teams_over_ceiling``) and keeps the servers' logs
in ``var/bench/ingest-logs/``. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
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
    BenchTeam,
    bench_config,
    interrupt_on_sigterm,
    write_json,
)

from latencyboard.storage import tables

JSON_PATH = ROOT / "var" / "bench" / "ingest.json"
LOG_DIR = ROOT / "var" / "bench" / "ingest-logs"


@dataclass(frozen=True)
class Phase:
    """An ingest phase of the run: its key in the figures and which team each sender sends as."""

    key: str
    title: str
    over_ceiling_key: str
    senders: Callable[[BenchStack, int], list[BenchTeam]]


def _lone_senders(stack: BenchStack, count: int) -> list[BenchTeam]:
    return [stack.team] * count


def _two_team_senders(stack: BenchStack, count: int) -> list[BenchTeam]:
    half = count // 2
    return [stack.team] * (count - half) + [stack.second_team] * half


PHASES = {
    "lone": Phase("ingest", "lone team", "stored_over_ceiling", _lone_senders),
    "two": Phase("two_teams", "two teams", "two_teams_over_ceiling", _two_team_senders),
}


def _cores(cpu: dict[str, float], spec: str = ".2f") -> str:
    return ", ".join(f"{name} {value:{spec}}" for name, value in cpu.items())


def _states(states: dict[str, float], top: int = 8) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in list(states.items())[:top])


def _idle(ingest: dict[str, Any]) -> str:
    cpu = ingest["cpu_cores"]
    return (
        f"{ingest['machine_idle_share']:.0%} of the cores"
        f" (idle {cpu['machine idle']:.2f} + iowait {cpu['machine iowait']:.2f} cores)"
    )


def _team_lines(ingest: dict[str, Any]) -> list[str]:
    lines = []
    for name, team in ingest["teams"].items():
        if not team["senders"] and team["consistent"]:
            continue
        lines += [
            f"  team {name:<10}          {team['stored_spans_per_s']:12,.0f} stored spans/s"
            f"   {team['share_of_stored']:.0%} of the total, senders: {team['senders']}",
            f"    stored rows / accepted  {team['stored_rows_total']:,}"
            f" / {team['accepted_total']:,}"
            f"   ({'equal' if team['consistent'] else 'MISMATCH'}; batches say"
            f" {team['batch_stored_total']:,}, duplicates {team['duplicates_total']},"
            f" rejected {team['rejected_total']})",
            f"    non-200 responses       {team['non_200'] or 'none'}",
            f"    refused / retried / given up at the end   {team['refused']} /"
            f" {team['retries']} / {team['abandoned']}",
        ]
    return lines


def _phase_lines(phase: Phase, ingest: dict[str, Any]) -> list[str]:
    lat, export = ingest["latency_ms"], ingest["export_latency_ms"]
    return [
        "",
        f"{phase.title} ({ingest['senders']} senders, {ingest['seconds']:.0f} s measured):",
        f"  stored spans/s            {ingest['stored_spans_per_s']:12,.0f}"
        f"   ({ingest['requests_per_s']:.1f} requests/s of {SPANS_PER_REQUEST} spans)",
        f"  accepted spans/s          {ingest['accepted_spans_per_s']:12,.0f}",
        f"  machine idle              {_idle(ingest)}",
        *_team_lines(ingest),
        f"  request latency ms        p50 {lat['p50']:.1f}  p90 {lat['p90']:.1f}"
        f"  p99 {lat['p99']:.1f}  max {lat['max']:.1f}",
        f"  export latency ms         p50 {export['p50']:.1f}  p99 {export['p99']:.1f}"
        "   (first try to 200, waits to retry included)",
        "  ingest peak RSS MiB       "
        + ", ".join(f"{k} {v:.0f}" for k, v in ingest["peak_rss_mib"].items()),
        f"  CPU cores                 {_cores(ingest['cpu_cores'])}",
        f"  CPU µs per stored span    {_cores(ingest['cpu_us_per_row'], '.1f')}",
        f"  PG backends               {_states(ingest['pg_backends_by_state'])}",
        f"  WAL                       {ingest['wal']['bytes_per_row']:.0f} B/row,"
        f" {ingest['wal']['mib_per_s']:.1f} MiB/s, {ingest['wal']['syncs_per_s']:.0f} fsync/s,"
        f" {ingest['wal']['fpi_per_s']:.0f} FPI/s",
        f"  sender render ms/request  {ingest['sender_render_ms_per_request']:.2f}",
    ]


def _failures(phase: Phase, ingest: dict[str, Any]) -> list[str]:
    """The loud lines of a phase whose books do not balance."""
    lines = []
    if ingest["dangling_references"]:
        lines.append(
            f"!!! DANGLING after the {phase.title} phase: stored spans reference missing"
            " pipelines/stages: " + "; ".join(ingest["dangling_references"])
        )
    for name, team in ingest["teams"].items():
        if not team["consistent"]:
            lines.append(
                f"!!! MISMATCH in the {phase.title} phase, team {name}: {tables.SPAN} gained"
                f" {team['stored_rows_total']:,} rows but {team['accepted_total']:,} spans were"
                f" acknowledged with 200 (its ingest batches count"
                f" {team['batch_stored_total']:,}) !!!"
            )
    return lines


def report(figures: dict[str, Any]) -> None:
    copy = figures.get("copy")
    phases = [phase for phase in PHASES.values() if phase.key in figures]
    lines = [f"\ningest: {figures['config']['command']}"]
    for phase in phases:
        lines += _phase_lines(phase, figures[phase.key])
    lines += ["", *describe(figures["disk"])]
    if copy:
        lines += [
            "",
            f"COPY ceiling rows/s         {copy['rows_per_s']:12,.0f}"
            f"   ({copy['rows']:,} rows, {figures['config']['copy_workers']} clients,"
            f" batch p50 {copy['batch_latency_ms']['p50']:.1f} ms"
            f" p99 {copy['batch_latency_ms']['p99']:.1f} ms)",
            *(
                f"  {phase.title + ' / ceiling':<24}{figures[phase.over_ceiling_key]:12.2f}"
                f"   machine idle {figures[phase.key]['machine_idle_share']:.0%}"
                for phase in phases
            ),
            f"  CPU cores, COPY phase     {_cores(copy['cpu_cores'])}",
            f"  CPU µs per COPY row       {_cores(copy['cpu_us_per_row'], '.1f')}",
            f"  PG backends, COPY         {_states(copy['pg_backends_by_state'])}",
            f"  WAL, COPY                 {copy['wal']['bytes_per_row']:.0f} B/row,"
            f" {copy['wal']['mib_per_s']:.1f} MiB/s, {copy['wal']['syncs_per_s']:.0f} fsync/s",
        ]
    print("\n".join(lines), flush=True)
    failures = [line for phase in phases for line in _failures(phase, figures[phase.key])]
    if failures:
        print("\n" + "\n".join(failures), file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds")
    parser.add_argument(
        "--two-team-seconds",
        type=float,
        default=None,
        help="measured seconds of the two-team phase (default: --seconds)",
    )
    parser.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds first")
    parser.add_argument("--senders", type=int, default=4, help="client processes")
    parser.add_argument(
        "--only", choices=sorted(PHASES), default=None, help="run one ingest phase only"
    )
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
    runs = [args.only] if args.only else list(PHASES)
    if "two" in runs and args.senders < 2:
        parser.error("the two-team phase needs --senders 2 or more (one per team at least)")
    seconds = {"lone": args.seconds, "two": args.two_team_seconds or args.seconds}
    interrupt_on_sigterm()
    figures: dict[str, Any] = {
        "config": bench_config(
            seconds=args.seconds,
            two_team_seconds=seconds["two"],
            phases=runs,
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
            for run in runs:
                phase = PHASES[run]
                print(f"bench: {phase.title} phase", file=sys.stderr, flush=True)
                figures[phase.key] = ingest_phase(
                    stack, phase.senders(stack, args.senders), args.warmup, seconds[run]
                )
            with psycopg.connect(stack.database_url) as conn:
                figures["disk"] = span_bytes(conn, (tables.RESOURCE, tables.SPAN_TEMPLATE))
            if not args.skip_copy:
                stored = max(figures[PHASES[run].key]["stored_in_window"] for run in runs)
                figures["copy"] = copy_phase(stack, args, max(stored, 20 * SPANS_PER_REQUEST))
                for run in runs:
                    phase = PHASES[run]
                    figures[phase.over_ceiling_key] = (
                        figures[phase.key]["stored_spans_per_s"] / figures["copy"]["rows_per_s"]
                    )
    except KeyboardInterrupt:
        print("bench: interrupted, everything stopped", file=sys.stderr)
        return 130
    report(figures)
    write_json(args.json, figures)
    return 0 if all(figures[PHASES[run].key]["consistent"] for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

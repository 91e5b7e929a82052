"""An ingest phase: sender processes, each exporting as one team, POST distinct OTLP exports to
``python -m ingest`` while CPU, backend states and WAL are measured; then each team's stored rows
are checked against its acks."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from _children import collect, sleep_until, stop_processes
from _meters import (
    CpuMeter,
    WaitSampler,
    cpu_per_row,
    peak_rss_mib,
    percentile,
    postmaster_pid,
    process_tree,
    processes_of,
    reset_peak_rss,
    wal_counters,
    wal_delta,
    wal_per_row,
)
from _otlp_sender import RETRYABLE, Timeline, sender
from _stack import BenchStack, BenchTeam

from latencyboard.storage import tables

_STORED_ROWS = f"SELECT team_id, count(*) FROM {tables.SPAN} GROUP BY 1"  # noqa: S608
_BATCH_TOTALS = (
    "SELECT team_id, sum(stored_spans), sum(duplicate_spans), "  # noqa: S608 - a constant name
    f"sum(rejected_spans) FROM {tables.INGEST_BATCH} GROUP BY 1"
)
_WINDOW_STORED = (
    f"SELECT team_id, sum(stored_spans) FROM {tables.INGEST_BATCH} "  # noqa: S608
    "WHERE received_at >= %s AND received_at < %s GROUP BY 1"
)
_BOOKS = ("rows", "batch_stored", "duplicates", "rejected")
# A phase's figures that are the sum of its teams'.
_SUMMED = (
    "accepted_spans_per_s",
    "refused",
    "retries",
    "abandoned",
    "accepted_total",
    "stored_rows_total",
    "batch_stored_total",
    "duplicates_total",
    "rejected_total",
)


def ingest_phase(
    stack: BenchStack, senders: Sequence[BenchTeam], warmup: float, seconds: float
) -> dict[str, Any]:
    """One sender process per entry of ``senders``, each exporting as that team, against the
    stack's first ingest server: ``warmup`` seconds unmeasured, then ``seconds`` measured.

    The books are kept per team of the stack and over this phase alone (rows and batches
    counted before and after it), so phases of one run are checked each on its own.
    """
    ctx = mp.get_context("fork")
    port = stack.ingest[0].http_port
    start_at = ctx.Value("d", 0.0)
    ready, go, results = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    processes = [
        ctx.Process(
            target=sender,
            args=(i, port, team.token, start_at, warmup, seconds, ready, go, results),
            name=f"sender-{i}",
            daemon=True,
        )
        for i, team in enumerate(senders)
    ]
    try:
        for process in processes:
            process.start()
        for _ in processes:
            if not ready.acquire(timeout=120):
                raise RuntimeError("senders did not get ready")
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            books_before = _books(conn)
            conn.execute("CHECKPOINT")  # every phase starts without a pending checkpoint
            begin = time.time() + 0.5
            timeline = Timeline(begin, begin + warmup, begin + warmup + seconds)
            start_at.value = timeline.start
            reset_peak_rss(process_tree(stack.ingest[0].pid)())
            go.set()
            meter = CpuMeter(
                {
                    "ingest server": process_tree(stack.ingest[0].pid),
                    "postgres": process_tree(postmaster_pid(stack)),
                    "senders": processes_of(lambda: [p.pid for p in processes if p.pid]),
                    "bench (this)": processes_of(lambda: [os.getpid()]),
                }
            )
            sleep_until(timeline.w0)
            meter.start()
            sampler = WaitSampler(stack.database_url)
            sampler.start()
            wal_before = wal_counters(conn)
            print(f"bench: measuring {seconds:.0f}s…", file=sys.stderr, flush=True)
            sleep_until(timeline.w1)
            cpu = meter.stop()
            waits = sampler.stop()
            wal = wal_delta(wal_before, wal_counters(conn))
        sent = collect(results, processes)
    finally:
        stop_processes(processes)
    rss = {
        ("supervisor" if p.pid == stack.ingest[0].pid else f"worker {p.pid}"): peak_rss_mib(p.pid)
        for p in process_tree(stack.ingest[0].pid)()
    }
    rss["total"] = sum(rss.values())

    with psycopg.connect(stack.database_url) as conn:
        books_after = _books(conn)
        window: dict[int, int] = dict(
            conn.execute(_WINDOW_STORED, [_utc(timeline.w0), _utc(timeline.w1)]).fetchall()
        )
        dangling = _dangling_references(conn)
    team_of = {r["index"]: senders[r["index"]] for r in sent}
    teams = {
        team.name: _team_books(
            team,
            [r for r in sent if team_of[r["index"]] == team],
            {book: books_after[team.id][book] - books_before[team.id][book] for book in _BOOKS},
            int(window.get(team.id, 0)),
            seconds,
        )
        for team in stack.teams
    }
    stored_in_window = sum(t["stored_in_window"] for t in teams.values())
    for figures in teams.values():
        figures["share_of_stored"] = figures["stored_in_window"] / max(stored_in_window, 1)
    statuses = _sum_counters(r["statuses"] for r in sent)
    requests_measured = sum(v for k, v in statuses.items() if k.startswith("measured:"))
    idle = cpu["machine idle"] + cpu["machine iowait"]
    return {
        "senders": len(senders),
        "seconds": seconds,
        **{key: sum(t[key] for t in teams.values()) for key in _SUMMED},
        "stored_spans_per_s": stored_in_window / seconds,
        "stored_in_window": stored_in_window,
        "requests_per_s": requests_measured / seconds,
        "latency_ms": _latency_ms([x for r in sent for x in r["latencies"]]),
        "export_latency_ms": _latency_ms([x for r in sent for x in r["export_latencies"]]),
        "non_200": _non_200(statuses),
        "dangling_references": dangling,
        "consistent": all(t["consistent"] for t in teams.values()) and not dangling,
        "teams": teams,
        "peak_rss_mib": rss,
        "cpu_cores": cpu,
        "machine_idle_share": idle / (os.cpu_count() or 1),
        "cpu_us_per_row": cpu_per_row(
            cpu, ["ingest server", "postgres"], stored_in_window / seconds
        ),
        "sender_render_ms_per_request": 1e3
        * sum(r["render_seconds"] for r in sent)
        / max(1, sum(r["requests"] for r in sent)),
        "pg_backends_by_state": waits,
        "wal": wal_per_row(wal, stored_in_window, seconds),
    }


def _team_books(
    team: BenchTeam,
    sent: list[dict[str, Any]],
    books: dict[str, int],
    stored_in_window: int,
    seconds: float,
) -> dict[str, Any]:
    """One team's figures over a phase; consistent when every span acknowledged with 200 is a
    row of the span table and a span of an ingest batch, and no other row or batch appeared."""
    accepted = _sum_counters(r["accepted"] for r in sent)
    accepted_total = sum(accepted.values())
    statuses = _sum_counters(r["statuses"] for r in sent)
    return {
        "team_id": team.id,
        "senders": len(sent),
        "accepted_spans_per_s": accepted["measured"] / seconds,
        "stored_spans_per_s": stored_in_window / seconds,
        "stored_in_window": stored_in_window,
        "non_200": _non_200(statuses),
        "refused": sum(v for k, v in statuses.items() if k.split(":", 1)[1] in RETRYABLE),
        "retries": sum(r["retries"] for r in sent),
        "abandoned": sum(r["abandoned"] for r in sent),
        "accepted_total": accepted_total,
        "stored_rows_total": books["rows"],
        "batch_stored_total": books["batch_stored"],
        "duplicates_total": books["duplicates"],
        "rejected_total": books["rejected"],
        "consistent": books["rows"] == accepted_total == books["batch_stored"],
    }


def _books(conn: psycopg.Connection) -> dict[int, dict[str, int]]:
    """Rows of the span table and sums of the ingest batches, per team id (0 for none)."""
    books: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(_BOOKS, 0))
    for team_id, rows in conn.execute(_STORED_ROWS):
        books[team_id]["rows"] = int(rows)
    for team_id, stored, duplicates, rejected in conn.execute(_BATCH_TOTALS):
        books[team_id].update(
            batch_stored=int(stored), duplicates=int(duplicates), rejected=int(rejected)
        )
    return books


def _sum_counters(counters: Iterable[dict[str, int]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for counter in counters:
        total.update(counter)
    return total


def _non_200(statuses: Counter[str]) -> dict[str, int]:
    """Answers other than 200 by ``phase:status`` (warm-up, measured window, tail)."""
    return {k: v for k, v in statuses.items() if not k.endswith(":200")}


def _latency_ms(latencies: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(latencies, 50) * 1e3,
        "p90": percentile(latencies, 90) * 1e3,
        "p99": percentile(latencies, 99) * 1e3,
        "max": max(latencies, default=float("nan")) * 1e3,
        "mean": statistics.fmean(latencies) * 1e3 if latencies else float("nan"),
    }


def _dangling_references(conn: psycopg.Connection) -> list[str]:
    """Pipeline/stage ids in stored spans without their dictionary row.

    The span table has no foreign keys (for ingest speed), so the writer's id caches are the only
    guard; a cached id from a rolled-back transaction would leave spans no pipeline owns.
    """
    rows = conn.execute(
        f"""
        SELECT s.pipeline_id, s.stage_id, count(*)
        FROM {tables.SPAN} s
        LEFT JOIN {tables.PIPELINE} p ON p.id = s.pipeline_id
        LEFT JOIN {tables.STAGE} st ON st.id = s.stage_id AND st.pipeline_id = s.pipeline_id
        WHERE p.id IS NULL OR st.id IS NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        """  # noqa: S608 - constant table names
    ).fetchall()
    return [f"pipeline {p} stage {s}: {n} spans" for p, s, n in rows]


def _utc(moment: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(moment, dt.UTC)

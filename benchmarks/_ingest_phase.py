"""The ingest phase: sender processes POST distinct OTLP exports to ``python -m ingest`` while
CPU, backend states and WAL are measured; then the stored rows are checked against the acks."""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from _children import child_process, collect, sleep_until, stop_processes
from _meters import (
    CpuMeter,
    WaitSampler,
    cpu_per_row,
    peak_rss_mib,
    percentile,
    postmaster_pid,
    process_tree,
    processes_of,
    wal_counters,
    wal_delta,
    wal_per_row,
)
from _otlp_bodies import SPANS_PER_REQUEST, BodyTemplate
from _stack import BenchStack

from latencyboard.storage import tables

TEMPLATES_PER_SENDER = 8

_STORED_ROWS = f"SELECT count(*) FROM {tables.SPAN}"  # noqa: S608 - a constant name
_BATCH_TOTALS = (
    "SELECT coalesce(sum(stored_spans), 0), coalesce(sum(duplicate_spans), 0), "  # noqa: S608
    f"coalesce(sum(rejected_spans), 0) FROM {tables.INGEST_BATCH}"
)
_WINDOW_STORED = (
    f"SELECT coalesce(sum(stored_spans), 0) FROM {tables.INGEST_BATCH} "  # noqa: S608
    "WHERE received_at >= %s AND received_at < %s"
)


@dataclass(frozen=True)
class Timeline:
    """Wall-clock bounds shared by every process: warm-up from ``start``, measured [w0, w1)."""

    start: float
    w0: float
    w1: float

    def phase(self, moment: float) -> str:
        if moment < self.w0:
            return "warmup"
        return "measured" if moment < self.w1 else "tail"


def _sender(
    index: int,
    port: int,
    token: str,
    start_at: Any,
    warmup: float,
    seconds: float,
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    """One client process: its own templates and keep-alive connection, then send until w1."""
    child_process()
    seed = 1_000 + index
    now_ns = time.time_ns()
    templates = [
        BodyTemplate(random.Random(seed * 100 + i), now_ns)  # noqa: S311 (test data, not secrets)
        for i in range(TEMPLATES_PER_SENDER)
    ]
    rng = np.random.default_rng(seed)
    headers = {
        "content-type": "application/x-protobuf",
        "authorization": f"Bearer {token}",
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.connect()
    ready.release()
    go.wait()
    timeline = Timeline(start_at.value, start_at.value + warmup, start_at.value + warmup + seconds)
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    accepted: Counter[str] = Counter()
    render_seconds = 0.0
    sent = 0
    while time.time() < timeline.start:
        time.sleep(0.001)
    while time.time() < timeline.w1:
        before = time.perf_counter()
        body = templates[sent % len(templates)].render(rng)
        began = time.perf_counter()
        render_seconds += began - before
        sent += 1
        try:
            conn.request("POST", "/v1/traces", body, headers)
            response = conn.getresponse()
            response.read()
            status = str(response.status)
        except (OSError, http.client.HTTPException) as exc:
            status = type(exc).__name__
            conn.close()  # reconnects on the next request
        elapsed = time.perf_counter() - began
        phase = timeline.phase(time.time())
        statuses[f"{phase}:{status}"] += 1
        if status == "200":
            accepted[phase] += SPANS_PER_REQUEST
        if phase == "measured":
            latencies.append(elapsed)
    conn.close()
    results.put(
        {
            "index": index,
            "latencies": latencies,
            "statuses": dict(statuses),
            "accepted": dict(accepted),
            "requests": sent,
            "render_seconds": render_seconds,
        }
    )


def ingest_phase(stack: BenchStack, args: argparse.Namespace) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    port = stack.ingest[0].http_port
    start_at = ctx.Value("d", 0.0)
    ready, go, results = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    senders = [
        ctx.Process(
            target=_sender,
            args=(
                i,
                port,
                stack.token,
                start_at,
                args.warmup,
                args.seconds,
                ready,
                go,
                results,
            ),
            name=f"sender-{i}",
            daemon=True,
        )
        for i in range(args.senders)
    ]
    try:
        for sender in senders:
            sender.start()
        for _ in senders:
            if not ready.acquire(timeout=120):
                raise RuntimeError("senders did not get ready")
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")  # both phases start without a pending checkpoint
            begin = time.time() + 0.5
            timeline = Timeline(begin, begin + args.warmup, begin + args.warmup + args.seconds)
            start_at.value = timeline.start
            go.set()
            meter = CpuMeter(
                {
                    "ingest server": process_tree(stack.ingest[0].pid),
                    "postgres": process_tree(postmaster_pid(stack)),
                    "senders": processes_of(lambda: [s.pid for s in senders if s.pid]),
                    "bench (this)": processes_of(lambda: [os.getpid()]),
                }
            )
            sleep_until(timeline.w0)
            meter.start()
            sampler = WaitSampler(stack.database_url)
            sampler.start()
            wal_before = wal_counters(conn)
            print(f"bench: measuring {args.seconds:.0f}s…", file=sys.stderr, flush=True)
            sleep_until(timeline.w1)
            cpu = meter.stop()
            waits = sampler.stop()
            wal = wal_delta(wal_before, wal_counters(conn))
        sent = collect(results, senders)
    finally:
        stop_processes(senders)
    rss = {
        ("supervisor" if p.pid == stack.ingest[0].pid else f"worker {p.pid}"): peak_rss_mib(p.pid)
        for p in process_tree(stack.ingest[0].pid)()
    }
    rss["total"] = sum(rss.values())

    latencies = [x for r in sent for x in r["latencies"]]
    statuses: Counter[str] = Counter()
    accepted: Counter[str] = Counter()
    for r in sent:
        statuses.update(r["statuses"])
        accepted.update(r["accepted"])
    with psycopg.connect(stack.database_url) as conn:
        stored_rows = conn.execute(_STORED_ROWS).fetchone()[0]  # type: ignore[index]
        batch_sum, duplicates, rejected = conn.execute(_BATCH_TOTALS).fetchone()  # type: ignore[misc]
        window_stored = conn.execute(
            _WINDOW_STORED,
            [_utc(timeline.w0), _utc(timeline.w1)],
        ).fetchone()[0]  # type: ignore[index]
        dangling = _dangling_references(conn)
    accepted_total = sum(accepted.values())
    non_200 = {k: v for k, v in statuses.items() if not k.endswith(":200")}
    requests_measured = sum(v for k, v in statuses.items() if k.startswith("measured:"))
    return {
        "accepted_spans_per_s": accepted["measured"] / args.seconds,
        "stored_spans_per_s": int(window_stored) / args.seconds,
        "stored_in_window": int(window_stored),
        "requests_per_s": requests_measured / args.seconds,
        "latency_ms": {
            "p50": percentile(latencies, 50) * 1e3,
            "p90": percentile(latencies, 90) * 1e3,
            "p99": percentile(latencies, 99) * 1e3,
            "max": max(latencies, default=float("nan")) * 1e3,
            "mean": statistics.fmean(latencies) * 1e3 if latencies else float("nan"),
        },
        "non_200": non_200,
        "accepted_total": accepted_total,
        "stored_rows_total": int(stored_rows),
        "batch_stored_total": int(batch_sum),
        "duplicates_total": int(duplicates),
        "rejected_total": int(rejected),
        "dangling_references": dangling,
        "consistent": int(stored_rows) == accepted_total == int(batch_sum) and not dangling,
        "peak_rss_mib": rss,
        "cpu_cores": cpu,
        "cpu_us_per_row": cpu_per_row(
            cpu, ["ingest server", "postgres"], window_stored / args.seconds
        ),
        "sender_render_ms_per_request": 1e3
        * sum(r["render_seconds"] for r in sent)
        / max(1, sum(r["requests"] for r in sent)),
        "pg_backends_by_state": waits,
        "wal": wal_per_row(wal, int(window_stored), args.seconds),
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

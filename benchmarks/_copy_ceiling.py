"""The COPY ceiling: what this PostgreSQL absorbs from binary COPY clients that cost next to
nothing, into a day-partitioned copy of the span table with the same indexes."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from _children import RESULT_TIMEOUT, child_process, collect, stop_processes
from _meters import (
    CpuMeter,
    WaitSampler,
    cpu_per_row,
    percentile,
    postmaster_pid,
    process_tree,
    processes_of,
    wal_counters,
    wal_delta,
    wal_per_row,
)
from _otlp_bodies import SPANS_PER_REQUEST
from _stack import BenchStack
from psycopg import sql

from latencyboard.storage import copy_format, tables
from latencyboard.storage.partitions import DayPartition

COPY_TEMPLATE_BATCHES = 64
COPY_IN = "COPY bench_copy FROM STDIN (FORMAT BINARY)"
_NEWEST_SPAN = f"SELECT max(start_time) FROM {tables.SPAN}"  # noqa: S608 - a constant name


@dataclass
class CopyTemplate:
    """One binary COPY payload of 512 real span rows and where each row's trace_id sits."""

    payload: np.ndarray
    trace_pos: np.ndarray

    def render(self, rng: np.random.Generator) -> bytes:
        out = self.payload.copy()
        out[self.trace_pos] = rng.integers(1, 256, size=self.trace_pos.shape, dtype=np.uint8)
        return out.tobytes()


def _copy_templates(conn: psycopg.Connection, partition: str) -> list[CopyTemplate]:
    """Read stored rows back in binary COPY format and cut them into 512-row payloads."""
    columns = [
        name
        for (name,) in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            [tables.SPAN],
        )
    ]
    trace_column = columns.index("trace_id")
    limit = COPY_TEMPLATE_BATCHES * SPANS_PER_REQUEST
    data = bytearray()
    query = sql.SQL("COPY (SELECT * FROM {} LIMIT {}) TO STDOUT (FORMAT BINARY)")
    with conn.cursor().copy(query.format(sql.Identifier(partition), limit)) as copy:
        for chunk in copy:
            data += chunk
    header_extension = struct.unpack_from("!i", data, 15)[0]
    offset = 19 + header_extension
    rows: list[tuple[bytes, int]] = []  # (tuple bytes, trace_id offset within them)
    while True:
        (fields,) = struct.unpack_from("!h", data, offset)
        if fields == -1:
            break
        begin, position, trace_at = offset, offset + 2, -1
        for column in range(fields):
            (length,) = struct.unpack_from("!i", data, position)
            position += 4
            if column == trace_column:
                assert length == 16
                trace_at = position - begin
            position += max(length, 0)
        rows.append((bytes(data[begin:position]), trace_at))
        offset = position
    if len(rows) < SPANS_PER_REQUEST:
        raise RuntimeError(f"only {len(rows)} stored rows to build COPY batches from")
    templates = []
    for first in range(0, len(rows) - SPANS_PER_REQUEST + 1, SPANS_PER_REQUEST):
        payload = bytearray(copy_format.HEADER)
        offsets = []
        for row, at in rows[first : first + SPANS_PER_REQUEST]:
            offsets.append(len(payload) + at)
            payload += row
        payload += copy_format.TRAILER
        templates.append(
            CopyTemplate(
                np.frombuffer(bytes(payload), dtype=np.uint8).copy(),
                np.array(offsets)[:, None] + np.arange(16),
            )
        )
    return templates


def _create_copy_table(conn: psycopg.Connection, day: DayPartition) -> None:
    """``bench_copy``: the span table's columns, defaults, checks and indexes, one day
    partition."""
    conn.execute("DROP TABLE IF EXISTS bench_copy")
    # LIKE copies columns, defaults, CHECKs, the primary key and the indexes, not partitioning.
    conn.execute(
        f"CREATE TABLE bench_copy (LIKE {tables.SPAN} INCLUDING ALL) "
        "PARTITION BY RANGE (start_time)"
    )
    # DDL takes no bound parameters; the bounds are timestamps we formatted ourselves.
    conn.execute(
        sql.SQL(
            "CREATE TABLE bench_copy_p PARTITION OF bench_copy FOR VALUES FROM ({}) TO ({})"
        ).format(sql.Literal(day.lower.isoformat()), sql.Literal(day.upper.isoformat()))
    )
    ours = _index_shapes(conn, "bench_copy_p")
    theirs = _index_shapes(conn, day.name)
    if ours != theirs:
        raise RuntimeError(f"bench_copy indexes differ from {day.name}: {ours} != {theirs}")


def _index_shapes(conn: psycopg.Connection, table: str) -> list[str]:
    """Index definitions without index and table names, to compare two tables' indexes."""
    rows = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE tablename = %s ORDER BY indexdef", [table]
    ).fetchall()
    return sorted(
        definition.split(" ON ", 1)[1].replace(table, "T").split(" USING ", 1)[1]
        for (definition,) in rows
    )


def _copier(
    index: int,
    url: str,
    templates: list[CopyTemplate],
    batches: int,
    ready: Any,
    go: Any,
    results: Any,
    finish: Any,
) -> None:
    """One COPY client: ``batches`` pre-encoded 512-row payloads, one transaction each.

    Stays connected until ``finish`` so that the CPU of its backend can still be read.
    """
    child_process()
    rng = np.random.default_rng(9_000 + index)
    with psycopg.connect(url) as conn:
        bodies = [templates[(index + i) % len(templates)] for i in range(batches)]
        latencies = []
        ready.release()
        go.wait()
        started = time.time()
        for template in bodies:
            payload = template.render(rng)
            began = time.perf_counter()
            with conn.cursor() as cursor, cursor.copy(COPY_IN) as copy:
                copy.write(payload)
            conn.commit()
            latencies.append(time.perf_counter() - began)
        results.put(
            {
                "rows": batches * SPANS_PER_REQUEST,
                "started": started,
                "finished": time.time(),
                "latencies": latencies,
            }
        )
        finish.wait(RESULT_TIMEOUT)


def copy_phase(stack: BenchStack, args: argparse.Namespace, rows_wanted: int) -> dict[str, Any]:
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        newest = conn.execute(_NEWEST_SPAN).fetchone()[0]  # type: ignore[index]
        if newest is None:
            raise RuntimeError("no stored spans to model the COPY rows on")
        day = DayPartition.of(newest)
        templates = _copy_templates(conn, day.name)
        _create_copy_table(conn, day)
        conn.execute("CHECKPOINT")
        batches = max(1, -(-rows_wanted // SPANS_PER_REQUEST))
        shares = [
            batches // args.copy_workers + (i < batches % args.copy_workers)
            for i in range(args.copy_workers)
        ]
        ctx = mp.get_context("fork")
        ready, go, finish, results = ctx.Semaphore(0), ctx.Event(), ctx.Event(), ctx.Queue()
        copiers = [
            ctx.Process(
                target=_copier,
                args=(i, stack.database_url, templates, share, ready, go, results, finish),
                name=f"copier-{i}",
                daemon=True,
            )
            for i, share in enumerate(shares)
        ]
        try:
            for copier in copiers:
                copier.start()
            for _ in copiers:
                if not ready.acquire(timeout=60):
                    raise RuntimeError("COPY workers did not get ready")
            meter = CpuMeter(
                {
                    "postgres": process_tree(postmaster_pid(stack)),
                    "copy clients": processes_of(lambda: [c.pid for c in copiers if c.pid]),
                    "ingest server (idle)": process_tree(stack.ingest[0].pid),
                }
            )
            meter.start()
            sampler = WaitSampler(stack.database_url)
            sampler.start()
            wal_before = wal_counters(conn)
            go.set()
            # Generous: at 1,000 rows/s something is broken, but let it report.
            done = collect(results, copiers, RESULT_TIMEOUT + rows_wanted / 1_000)
            cpu = meter.stop()  # while the copiers' backends still exist
            waits = sampler.stop()
            wal = wal_delta(wal_before, wal_counters(conn))
            finish.set()
        finally:
            stop_processes(copiers)
        copied = conn.execute("SELECT count(*) FROM bench_copy").fetchone()[0]  # type: ignore[index]
        conn.execute("DROP TABLE bench_copy")
    rows = sum(d["rows"] for d in done)
    seconds = max(d["finished"] for d in done) - min(d["started"] for d in done)
    latencies = [x for d in done for x in d["latencies"]]
    return {
        "rows": rows,
        "rows_stored": int(copied),
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "batch_latency_ms": {
            "p50": percentile(latencies, 50) * 1e3,
            "p99": percentile(latencies, 99) * 1e3,
        },
        "cpu_cores": cpu,
        "cpu_us_per_row": cpu_per_row(cpu, ["postgres", "copy clients"], rows / seconds),
        "pg_backends_by_state": waits,
        "wal": wal_per_row(wal, rows, seconds),
    }

"""Sustained OTLP/HTTP ingest throughput against the raw COPY ceiling of the same PostgreSQL.

Run: ``python benchmarks/bench_ingest.py [--seconds 60] [--senders 4] [--threads N]``.

Self-contained: starts a throwaway PostgreSQL 16 (fsync on, as in production), migrates, issues
an ingest token and starts ``python -m ingest``. Then, in one run so that the figures share the
machine's momentary noise and can be compared as ratios:

1. Ingest phase: ``--senders`` processes POST pre-encoded 512-span protobuf exports over
   keep-alive connections, ``--warmup`` seconds unmeasured, then ``--seconds`` measured. Every
   span is distinct: each request is a template whose trace/span ids and timestamps are patched
   in place (numpy scatter, 0.2-0.4 ms) with fresh random ids and "now". Afterwards the rows in
   ``spans_span`` must equal the spans acknowledged with 200, and every stored span's pipeline
   and stage must exist, else the run fails loudly.
2. COPY ceiling: as many rows as were stored in the measured window, copied as 512-row binary
   COPY batches, one commit each, from ``--copy-workers`` processes, into a day-partitioned copy
   of ``spans_span`` with the same indexes. The rows are real stored rows (read back with COPY
   TO) with fresh trace ids, pre-encoded, so the clients cost next to nothing and the figure is
   what this PostgreSQL can absorb.

Prints accepted and stored spans/s, stored/ceiling, request latency percentiles, the ingest
server's peak RSS, non-200 counts, the CPU split per component and CPU microseconds per span
(the figure that other tenants' load barely moves), PostgreSQL backend states and wait events
sampled in the measured window, and WAL volume; writes the same to ``var/bench/ingest.json`` and
keeps the servers' logs in ``var/bench/ingest-logs/``. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as dt
import http.client
import json
import multiprocessing as mp
import os
import queue
import random
import signal
import statistics
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg
from _stack import ROOT, BenchStack, interrupt_on_sigterm  # puts the repo on sys.path
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from psycopg import sql

from latencyboard.spans.partitions import DayPartition

SPANS_PER_REQUEST = 512
TEMPLATES_PER_SENDER = 8
COPY_TEMPLATE_BATCHES = 64
WAIT_SAMPLE_SECONDS = 0.1
RESULT_TIMEOUT = 120.0
COPY_IN = "COPY bench_copy FROM STDIN (FORMAT BINARY)"
JSON_PATH = ROOT / "var" / "bench" / "ingest.json"
LOG_DIR = ROOT / "var" / "bench" / "ingest-logs"

# service -> (version, route, model, typical model_forward ms)
SERVICES = {
    "fraud-scorer": ("2.14.1", "/v1/score", "xgb-fraud", 6.0),
    "recommender": ("5.3.0", "/v2/recommendations", "two-tower-recsys", 28.0),
    "clinical-alerts": ("1.8.7", "/alerts/evaluate", "sepsis-lstm", 45.0),
}
# stage -> typical duration in ms (model_forward comes from the service)
STAGES = {
    "queue_wait": 2.0,
    "feature_hydration": 9.0,
    "preprocess": 3.0,
    "model_forward": 0.0,
    "postprocess": 1.5,
    "serialize": 0.4,
}
SERVER, INTERNAL = Span.SpanKind.SPAN_KIND_SERVER, Span.SpanKind.SPAN_KIND_INTERNAL
STATUS_ERROR = Status.StatusCode.STATUS_CODE_ERROR
_PDEATHSIG = 1
_PGCOPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_PGCOPY_TRAILER = struct.pack("!h", -1)


def _child_process() -> None:
    """Signal set-up of sender and COPY processes (forked, so they inherit ours).

    They die if the benchmark is killed outright (PR_SET_PDEATHSIG); Ctrl-C goes to the whole
    foreground group, but only the parent reacts and stops them, by plain SIGTERM.
    """
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PDEATHSIG, signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _attr(key: str, value: str | bool | int | float) -> KeyValue:
    if isinstance(value, bool):  # before int: bool is an int
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


# --- request bodies ----------------------------------------------------------------------------


class BodyTemplate:
    """A pre-encoded 512-span export plus the byte offsets of its ids and timestamps.

    ``render`` copies the bytes and scatters fresh random ids (children keep pointing at their
    root's new span id) and shifts every timestamp by the time since the template was built,
    so each request is distinct, realistic and costs the sender 0.2-0.4 ms instead of the ~20 ms
    of building and encoding a fresh message (which would make the senders the bottleneck).
    """

    def __init__(self, rng: random.Random, now_ns: int) -> None:
        self.base_ns = now_ns
        request, spans, trace_of, parent_of = self._build(rng, now_ns)
        body = request.SerializeToString()
        self.template = np.frombuffer(body, dtype=np.uint8).copy()
        self.traces = max(trace_of) + 1
        self.trace_slot = np.array(trace_of)
        children = [i for i, parent in enumerate(parent_of) if parent is not None]
        self.parent_slot = np.array([parent_of[i] for i in children])
        trace_at, span_at, parent_at, time_at = [], [], [], []
        cursor = 0
        for i, span in enumerate(spans):
            # Tag + value patterns: ids are random and timestamps carry random nanoseconds,
            # so each pattern occurs once in its span (checked below by decoding a render).
            start = body.index(b"\x0a\x10" + span.trace_id, cursor) + 2
            trace_at.append(start)
            found = [start + 16]
            span_at.append(body.index(b"\x12\x08" + span.span_id, start) + 2)
            found.append(span_at[-1] + 8)
            if parent_of[i] is not None:
                parent_at.append(body.index(b"\x22\x08" + span.parent_span_id, start) + 2)
                found.append(parent_at[-1] + 8)
            for tag, value in (
                (b"\x39", span.start_time_unix_nano),
                (b"\x41", span.end_time_unix_nano),
            ):
                time_at.append(body.index(tag + struct.pack("<Q", value), start) + 1)
                found.append(time_at[-1] + 8)
            cursor = max(found)
        assert len(children) == len(parent_at)
        self.trace_pos = np.array(trace_at)[:, None] + np.arange(16)
        self.span_pos = np.array(span_at)[:, None] + np.arange(8)
        self.parent_pos = np.array(parent_at)[:, None] + np.arange(8)
        self.time_pos = np.array(time_at)[:, None] + np.arange(8)
        self.times = self.template[self.time_pos].copy().view("<u8").ravel()
        self._check(spans, trace_of, parent_of)

    @staticmethod
    def _build(
        rng: random.Random, now_ns: int
    ) -> tuple[ExportTraceServiceRequest, list[Span], list[int], list[int | None]]:
        """Traces of 1 SERVER root + 6 stage children until 512 spans, grouped by service."""
        by_service: dict[str, list[list[Span]]] = {name: [] for name in SERVICES}
        count = 0
        while count < SPANS_PER_REQUEST:
            service = rng.choice(list(SERVICES))
            trace = _trace(rng, service, now_ns, SPANS_PER_REQUEST - count)
            by_service[service].append(trace)
            count += len(trace)
        request = ExportTraceServiceRequest()
        spans: list[Span] = []
        trace_of: list[int] = []
        parent_of: list[int | None] = []
        for service, traces in by_service.items():
            if not traces:
                continue
            version = SERVICES[service][0]
            request.resource_spans.append(
                ResourceSpans(
                    resource=Resource(
                        attributes=[
                            _attr("service.name", service),
                            _attr("service.version", version),
                            _attr("deployment.environment.name", "production"),
                        ]
                    ),
                    scope_spans=[
                        ScopeSpans(
                            scope=InstrumentationScope(
                                name="opentelemetry.instrumentation.fastapi", version="0.48b0"
                            ),
                            spans=[span for trace in traces for span in trace],
                        )
                    ],
                )
            )
            for trace in traces:
                root, number = len(spans), trace_of[-1] + 1 if trace_of else 0
                for position, span in enumerate(trace):
                    trace_of.append(number)
                    parent_of.append(None if position == 0 else root)
                    spans.append(span)
        # Re-read the spans from the message: the offsets must follow its serialisation order.
        ordered = [
            span
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        assert [s.span_id for s in ordered] == [s.span_id for s in spans]
        return request, ordered, trace_of, parent_of

    def _check(self, spans: list[Span], trace_of: list[int], parent_of: list[int | None]) -> None:
        """Render once and decode: every patched field must hold exactly what was scattered."""
        body, traces, ids = self._render(np.random.default_rng(0), self.base_ns + 10**9)
        decoded = [
            span
            for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        assert len(decoded) == len(spans) == SPANS_PER_REQUEST
        for i, (old, new) in enumerate(zip(spans, decoded, strict=True)):
            assert new.trace_id == traces[trace_of[i]].tobytes()
            assert new.span_id == ids[i].tobytes()
            parent = parent_of[i]
            assert new.parent_span_id == (b"" if parent is None else ids[parent].tobytes())
            assert new.start_time_unix_nano == old.start_time_unix_nano + 10**9
            assert new.end_time_unix_nano == old.end_time_unix_nano + 10**9
            assert new.name == old.name
            assert new.attributes == old.attributes

    def _render(
        self, rng: np.random.Generator, now_ns: int
    ) -> tuple[bytes, np.ndarray, np.ndarray]:
        out = self.template.copy()
        traces = rng.integers(1, 256, size=(self.traces, 16), dtype=np.uint8)
        ids = rng.integers(1, 256, size=(SPANS_PER_REQUEST, 8), dtype=np.uint8)
        out[self.trace_pos] = traces[self.trace_slot]
        out[self.span_pos] = ids
        out[self.parent_pos] = ids[self.parent_slot]
        shifted = (self.times + np.uint64(now_ns - self.base_ns)).astype("<u8")
        out[self.time_pos] = shifted.view(np.uint8).reshape(-1, 8)
        return out.tobytes(), traces, ids

    def render(self, rng: np.random.Generator) -> bytes:
        return self._render(rng, time.time_ns())[0]


def _trace(rng: random.Random, service: str, now_ns: int, room: int) -> list[Span]:
    """One inference request: a SERVER root and its six stages, back to back, ended < 30 s ago.

    With less ``room`` than a full trace, only the root (a request served from cache).
    """
    _version, route, model, forward_ms = SERVICES[service]
    stages = list(STAGES) if room >= 1 + len(STAGES) else []
    durations = [
        rng.lognormvariate(0, 0.5) * (forward_ms if name == "model_forward" else typical) * 1e6
        for name, typical in STAGES.items()
        if name in stages
    ]
    total = int(sum(durations)) + rng.randrange(100_000, 2_000_000)
    # Random nanoseconds in every timestamp keep each one unique within a body.
    end = now_ns - rng.randrange(1, 30 * 10**9)
    start = end - total
    trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
    cache_hit = not stages or rng.random() < 0.2
    failed = rng.random() < 0.005
    batch = rng.choice([1, 1, 2, 4, 8, 16])
    common = [
        _attr("model.name", model),
        _attr("model.version", f"{model}-{rng.randrange(40, 44)}"),
        _attr("cache_hit", cache_hit),
        _attr("http.route", route),
        _attr("inference.batch_size", batch),
    ]
    root = Span(
        trace_id=trace_id,
        span_id=root_id,
        name=f"POST {route}",
        kind=SERVER,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=[
            *common,
            _attr("http.request.method", "POST"),
            _attr("http.response.status_code", 500 if failed else 200),
            _attr("tenant.id", f"tenant-{rng.randrange(1, 200):03d}"),
        ],
        status=Status(code=STATUS_ERROR, message="model_forward failed") if failed else None,
    )
    spans = [root]
    cursor = start + rng.randrange(10_000, 200_000)
    for name, duration in zip(stages, durations, strict=True):
        child_end = cursor + int(duration)
        error = failed and name == "model_forward"
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=rng.randbytes(8),
                parent_span_id=root_id,
                name=name,
                kind=INTERNAL,
                start_time_unix_nano=cursor,
                end_time_unix_nano=child_end,
                attributes=[
                    _attr("inference.stage", name),
                    *common,
                    _attr("device", "cpu" if name != "model_forward" else "cuda:0"),
                    _attr("queue.depth", rng.randrange(0, 64) if name == "queue_wait" else 0),
                ],
                status=Status(code=STATUS_ERROR, message="CUDA error: out of memory")
                if error
                else None,
            )
        )
        cursor = child_end
    return spans


# --- senders -----------------------------------------------------------------------------------


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
    _child_process()
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


# --- measurement helpers -----------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values), q))


class CpuMeter:
    """CPU seconds per component between two snapshots, and the machine's total split."""

    def __init__(self, groups: dict[str, Callable[[], Iterable[psutil.Process]]]) -> None:
        self.groups = groups
        self._start: dict[str, dict[int, float]] = {}
        self._machine = psutil.cpu_times()
        self._wall = time.monotonic()

    def _sample(self) -> dict[str, dict[int, float]]:
        sample: dict[str, dict[int, float]] = {}
        for name, processes in self.groups.items():
            times = {}
            for process in processes():
                try:
                    cpu = process.cpu_times()
                    times[process.pid] = cpu.user + cpu.system
                except psutil.NoSuchProcess:
                    pass
            sample[name] = times
        return sample

    def start(self) -> None:
        self._start = self._sample()
        self._machine = psutil.cpu_times()
        self._wall = time.monotonic()

    def stop(self) -> dict[str, float]:
        """Cores used per component (CPU seconds / wall seconds) since ``start``."""
        end, machine = self._sample(), psutil.cpu_times()
        wall = time.monotonic() - self._wall
        cores: dict[str, float] = {}
        for name, times in end.items():
            before = self._start.get(name, {})
            # A process born inside the window counts from zero.
            used = sum(t - before.get(pid, 0.0) for pid, t in times.items())
            cores[name] = used / wall
        delta = {f: getattr(machine, f) - getattr(self._machine, f) for f in machine._fields}
        # guest time is already inside user time; idle and iowait are not work.
        idle = ("idle", "iowait", "guest", "guest_nice")
        busy = sum(v for f, v in delta.items() if f not in idle)
        cores["machine busy"] = busy / wall
        cores["machine iowait"] = delta.get("iowait", 0.0) / wall
        cores["machine idle"] = delta["idle"] / wall
        cores["machine steal"] = delta.get("steal", 0.0) / wall
        cores["other (not ours)"] = cores["machine busy"] - sum(cores[name] for name in end)
        return cores


def _postmaster_pid(stack: BenchStack) -> int:
    assert stack.postgres.process is not None
    return stack.postgres.process.pid


def _process_tree(pid: int) -> Callable[[], list[psutil.Process]]:
    def processes() -> list[psutil.Process]:
        try:
            root = psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    return processes


def _processes(pids: Callable[[], Iterable[int]]) -> Callable[[], list[psutil.Process]]:
    def processes() -> list[psutil.Process]:
        found = []
        for pid in pids():
            with contextlib.suppress(psutil.NoSuchProcess):
                found.append(psutil.Process(pid))
        return found

    return processes


class WaitSampler(threading.Thread):
    """Samples what PostgreSQL client backends are doing (state / wait event) every 0.1 s."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True, name="wait-sampler")
        self.url = url
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._done = threading.Event()

    def run(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self._done.wait(WAIT_SAMPLE_SECONDS):
                    self._sample(conn)
        except psycopg.Error:
            pass  # diagnostics only: PostgreSQL going away (Ctrl-C) must not add a traceback

    def _sample(self, conn: psycopg.Connection) -> None:
        rows = conn.execute(
            """
            SELECT state, wait_event_type, wait_event FROM pg_stat_activity
            WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
              AND datname = current_database()
            """
        ).fetchall()
        self.samples += 1
        for state, wait_type, wait in rows:
            if state != "active":
                key = state or "?"
            elif wait_type is None:
                key = "active: CPU"
            else:
                key = f"active: {wait_type}:{wait}"
            self.counts[key] += 1

    def stop(self) -> dict[str, float]:
        """Mean number of backends in each state (backend-seconds per second)."""
        self._done.set()
        self.join(5)
        samples = max(self.samples, 1)
        return {key: count / samples for key, count in self.counts.most_common()}


def _wal(conn: psycopg.Connection) -> dict[str, float]:
    row = conn.execute(
        "SELECT wal_records, wal_fpi, wal_bytes, wal_write, wal_sync FROM pg_stat_wal"
    ).fetchone()
    assert row is not None
    return dict(zip(("records", "fpi", "bytes", "writes", "syncs"), map(float, row), strict=True))


def _wal_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before[key] for key in before}


def _peak_rss_mib(pid: int) -> float:
    """VmHWM: the process's peak resident set since it started."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stop_processes(processes: Sequence[mp.process.BaseProcess]) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()


def _collect(
    results: Any, processes: Sequence[mp.process.BaseProcess], timeout: float = RESULT_TIMEOUT
) -> list[dict[str, Any]]:
    """One result per process from the queue; a child that died without one fails the run.

    Read before joining: a child blocks on exit until its queued result is consumed.
    """
    count = len(processes)
    collected: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(collected) < count:
        try:
            collected.append(results.get(timeout=1))
        except queue.Empty:
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{len(collected)}/{count} results; exit codes "
                    f"{[p.exitcode for p in processes]}"
                ) from None
    return collected


def _sleep_until(moment: float) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 0.5))


# --- ingest phase ------------------------------------------------------------------------------


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
                    "ingest server": _process_tree(stack.ingest[0].pid),
                    "postgres": _process_tree(_postmaster_pid(stack)),
                    "senders": _processes(lambda: [s.pid for s in senders if s.pid]),
                    "bench (this)": _processes(lambda: [os.getpid()]),
                }
            )
            _sleep_until(timeline.w0)
            meter.start()
            sampler = WaitSampler(stack.database_url)
            sampler.start()
            wal_before = _wal(conn)
            print(f"bench: measuring {args.seconds:.0f}s…", file=sys.stderr, flush=True)
            _sleep_until(timeline.w1)
            cpu = meter.stop()
            waits = sampler.stop()
            wal = _wal_delta(wal_before, _wal(conn))
        sent = _collect(results, senders)
    finally:
        _stop_processes(senders)
    rss = {
        ("supervisor" if p.pid == stack.ingest[0].pid else f"worker {p.pid}"): _peak_rss_mib(p.pid)
        for p in _process_tree(stack.ingest[0].pid)()
    }
    rss["total"] = sum(rss.values())

    latencies = [x for r in sent for x in r["latencies"]]
    statuses: Counter[str] = Counter()
    accepted: Counter[str] = Counter()
    for r in sent:
        statuses.update(r["statuses"])
        accepted.update(r["accepted"])
    with psycopg.connect(stack.database_url) as conn:
        stored_rows = conn.execute("SELECT count(*) FROM spans_span").fetchone()[0]  # type: ignore[index]
        batch_sum, duplicates, rejected = conn.execute(
            "SELECT coalesce(sum(stored_spans), 0), coalesce(sum(duplicate_spans), 0), "
            "coalesce(sum(rejected_spans), 0) FROM spans_ingestbatch"
        ).fetchone()  # type: ignore[misc]
        window_stored = conn.execute(
            "SELECT coalesce(sum(stored_spans), 0) FROM spans_ingestbatch "
            "WHERE received_at >= %s AND received_at < %s",
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
            "p50": _percentile(latencies, 50) * 1e3,
            "p90": _percentile(latencies, 90) * 1e3,
            "p99": _percentile(latencies, 99) * 1e3,
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
        "cpu_us_per_row": _cpu_per_row(
            cpu, ["ingest server", "postgres"], window_stored / args.seconds
        ),
        "sender_render_ms_per_request": 1e3
        * sum(r["render_seconds"] for r in sent)
        / max(1, sum(r["requests"] for r in sent)),
        "pg_backends_by_state": waits,
        "wal": _per_span(wal, int(window_stored), args.seconds),
    }


def _dangling_references(conn: psycopg.Connection) -> list[str]:
    """Pipeline/stage ids in stored spans without their dictionary row.

    spans_span has no foreign keys (for ingest speed), so the writer's id caches are the only
    guard; a cached id from a rolled-back transaction would leave spans no pipeline owns.
    """
    rows = conn.execute(
        """
        SELECT s.pipeline_id, s.stage_id, count(*)
        FROM spans_span s
        LEFT JOIN pipelines_pipeline p ON p.id = s.pipeline_id
        LEFT JOIN pipelines_stage st ON st.id = s.stage_id AND st.pipeline_id = s.pipeline_id
        WHERE p.id IS NULL OR st.id IS NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        """
    ).fetchall()
    return [f"pipeline {p} stage {s}: {n} spans" for p, s, n in rows]


def _utc(moment: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(moment, dt.UTC)


def _cpu_per_row(cpu: dict[str, float], names: list[str], rows_per_s: float) -> dict[str, float]:
    """CPU microseconds per stored row: unlike rows/s, barely moved by other tenants' load."""
    return {name: cpu[name] / max(rows_per_s, 1e-9) * 1e6 for name in names}


def _per_span(wal: dict[str, float], rows: int, seconds: float) -> dict[str, float]:
    return {
        "bytes_per_row": wal["bytes"] / max(rows, 1),
        "records_per_row": wal["records"] / max(rows, 1),
        "fpi_per_s": wal["fpi"] / seconds,
        "mib_per_s": wal["bytes"] / seconds / 2**20,
        "syncs_per_s": wal["syncs"] / seconds,
        "writes_per_s": wal["writes"] / seconds,
    }


# --- COPY ceiling ------------------------------------------------------------------------------


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
            "SELECT attname FROM pg_attribute WHERE attrelid = 'spans_span'::regclass "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
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
        payload = bytearray(_PGCOPY_SIGNATURE)
        offsets = []
        for row, at in rows[first : first + SPANS_PER_REQUEST]:
            offsets.append(len(payload) + at)
            payload += row
        payload += _PGCOPY_TRAILER
        templates.append(
            CopyTemplate(
                np.frombuffer(bytes(payload), dtype=np.uint8).copy(),
                np.array(offsets)[:, None] + np.arange(16),
            )
        )
    return templates


def _create_copy_table(conn: psycopg.Connection, day: DayPartition) -> None:
    """``bench_copy``: spans_span's columns, defaults, checks and indexes, one day partition."""
    conn.execute("DROP TABLE IF EXISTS bench_copy")
    # LIKE copies columns, defaults, CHECKs, the primary key and the indexes, not partitioning.
    conn.execute(
        "CREATE TABLE bench_copy (LIKE spans_span INCLUDING ALL) PARTITION BY RANGE (start_time)"
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
    _child_process()
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
        newest = conn.execute("SELECT max(start_time) FROM spans_span").fetchone()[0]  # type: ignore[index]
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
                    "postgres": _process_tree(_postmaster_pid(stack)),
                    "copy clients": _processes(lambda: [c.pid for c in copiers if c.pid]),
                    "ingest server (idle)": _process_tree(stack.ingest[0].pid),
                }
            )
            meter.start()
            sampler = WaitSampler(stack.database_url)
            sampler.start()
            wal_before = _wal(conn)
            go.set()
            # Generous: at 1,000 rows/s something is broken, but let it report.
            done = _collect(results, copiers, RESULT_TIMEOUT + rows_wanted / 1_000)
            cpu = meter.stop()  # while the copiers' backends still exist
            waits = sampler.stop()
            wal = _wal_delta(wal_before, _wal(conn))
            finish.set()
        finally:
            _stop_processes(copiers)
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
            "p50": _percentile(latencies, 50) * 1e3,
            "p99": _percentile(latencies, 99) * 1e3,
        },
        "cpu_cores": cpu,
        "cpu_us_per_row": _cpu_per_row(cpu, ["postgres", "copy clients"], rows / seconds),
        "pg_backends_by_state": waits,
        "wal": _per_span(wal, rows, seconds),
    }


# --- report ------------------------------------------------------------------------------------


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
            "\n!!! MISMATCH: spans_span holds "
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
    command = "python benchmarks/bench_ingest.py " + " ".join(sys.argv[1:])
    figures: dict[str, Any] = {
        "config": {
            "command": command.strip(),
            "seconds": args.seconds,
            "warmup": args.warmup,
            "senders": args.senders,
            "threads": args.threads,
            "ingest_processes": args.processes,
            "copy_workers": args.copy_workers,
            "spans_per_request": SPANS_PER_REQUEST,
            "cpus": os.cpu_count(),
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
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
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"  figures written to {args.json}")
    return 0 if figures["ingest"]["consistent"] else 1


if __name__ == "__main__":
    sys.exit(main())

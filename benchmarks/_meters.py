"""Measurement instruments of end-to-end benchmarks: CPU per component, PostgreSQL backend
states, WAL volume and peak RSS, plus the per-row figures derived from them."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import psutil
import psycopg
from _stack import BenchStack

WAIT_SAMPLE_SECONDS = 0.1


def percentile(values: Sequence[float], q: float) -> float:
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


def postmaster_pid(stack: BenchStack) -> int:
    assert stack.postgres.process is not None
    return stack.postgres.process.pid


def process_tree(pid: int) -> Callable[[], list[psutil.Process]]:
    def processes() -> list[psutil.Process]:
        try:
            root = psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    return processes


def processes_of(pids: Callable[[], Iterable[int]]) -> Callable[[], list[psutil.Process]]:
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


def wal_counters(conn: psycopg.Connection) -> dict[str, float]:
    row = conn.execute(
        "SELECT wal_records, wal_fpi, wal_bytes, wal_write, wal_sync FROM pg_stat_wal"
    ).fetchone()
    assert row is not None
    return dict(zip(("records", "fpi", "bytes", "writes", "syncs"), map(float, row), strict=True))


def wal_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before[key] for key in before}


def peak_rss_mib(pid: int) -> float:
    """VmHWM: the process's peak resident set since it started."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss(processes: Iterable[psutil.Process]) -> None:
    """Start each process's VmHWM again from its current RSS, so a phase reports its own peak."""
    for process in processes:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            Path(f"/proc/{process.pid}/clear_refs").write_text("5")


def cpu_per_row(cpu: dict[str, float], names: list[str], rows_per_s: float) -> dict[str, float]:
    """CPU microseconds per stored row: unlike rows/s, barely moved by other tenants' load."""
    return {name: cpu[name] / max(rows_per_s, 1e-9) * 1e6 for name in names}


def wal_per_row(wal: dict[str, float], rows: int, seconds: float) -> dict[str, float]:
    return {
        "bytes_per_row": wal["bytes"] / max(rows, 1),
        "records_per_row": wal["records"] / max(rows, 1),
        "fpi_per_s": wal["fpi"] / seconds,
        "mib_per_s": wal["bytes"] / seconds / 2**20,
        "syncs_per_s": wal["syncs"] / seconds,
        "writes_per_s": wal["writes"] / seconds,
    }

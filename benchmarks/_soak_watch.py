"""What the soak watches and does: the fold's lag, memory and API samples, the restart
watchdog, the three faults and the final books, all against the stack's own database."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import psycopg
from _soak_stack import ApiClient, Child, memory_mib
from _stack import BenchStack

from latencyboard.local.embedded import EmbeddedRedis
from latencyboard.storage import tables

CAUGHT_UP_LAG_SECONDS = 6.0  # one fold period and a little
_OLDEST_UNFOLDED = (
    "SELECT coalesce(extract(epoch FROM now() - min(received_at)), 0)::float8"  # noqa: S608
    f" FROM {tables.INGEST_BATCH} WHERE rolled_up_at IS NULL"
)
UNFOLDED = f"SELECT count(*) FROM {tables.INGEST_BATCH} WHERE rolled_up_at IS NULL"  # noqa: S608


def query(url: str, sql: str) -> Any:
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(sql).fetchone()
        return row[0] if row else None


def fold_lag_seconds(url: str) -> float:
    """Age of the oldest acknowledged batch the fold has not claimed yet (0 when none)."""
    return float(
        query(
            url,
            _OLDEST_UNFOLDED,
        )
    )


class Sampler(threading.Thread):
    """Every ``every`` seconds: PSS per component, fold lag, one API read (status, ms)."""

    def __init__(
        self, groups: dict[str, Any], url: str, api: ApiClient, pipeline: int, every: float
    ) -> None:
        super().__init__(daemon=True, name="soak-sampler")
        self.groups, self.url, self.api, self.every = groups, url, api, every
        self.path = f"/api/pipelines/{pipeline}/percentiles/?window=1h&step=1m"
        self.samples: list[dict[str, Any]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.every):
            sample: dict[str, Any] = {"t": time.time()}
            sample["pss"] = {
                name: round(memory_mib(tree()), 1) for name, tree in self.groups.items()
            }
            try:
                sample["fold_lag_s"] = fold_lag_seconds(self.url)
            except psycopg.OperationalError:
                sample["fold_lag_s"] = None
            began = time.perf_counter()
            try:
                status, _ = self.api.get(self.path)
            except OSError as exc:
                status = type(exc).__name__
            sample["api"] = (status, round((time.perf_counter() - began) * 1000, 1))
            self.samples.append(sample)


def memory_growth(
    samples: list[dict[str, Any]], after: float, window: float
) -> dict[str, dict[str, float]]:
    """Per component: PSS at the end of the warm-up, at the end, the peak, and the growth of
    its level: the median of the last ``window`` seconds over that of the first.

    The level, not the two single samples, says whether memory grows: a sample taken while
    the worker runs a stage-share step sees that step's arrays (~100 MB for a few seconds),
    which the next task no longer holds. Both are kept (``growth`` is sample to sample).
    """
    steady = [s for s in samples if s["t"] >= after]
    first_window = [s for s in steady if s["t"] < steady[0]["t"] + window]
    last_window = [s for s in steady if s["t"] > steady[-1]["t"] - window]
    growth = {}
    for name in steady[0]["pss"]:
        first, last = steady[0]["pss"][name], steady[-1]["pss"][name]
        level_from = statistics.median(s["pss"][name] for s in first_window)
        level_to = statistics.median(s["pss"][name] for s in last_window)
        growth[name] = {
            "after_warmup_mib": first,
            "end_mib": last,
            "peak_mib": max(s["pss"][name] for s in steady),
            "growth": round((last - first) / first, 3) if first else 0.0,
            "first_median_mib": level_from,
            "last_median_mib": level_to,
            "level_growth": round((level_to - level_from) / level_from, 3) if level_from else 0.0,
        }
    return growth


def wait_for_fold(url: str, timeout: float, lag: float = 0.0) -> float | None:
    """Seconds until the oldest unfolded batch is at most ``lag`` seconds old (0: none left;
    under load some batch is always a few seconds from its fold, so faults wait for a lag)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if (lag == 0 and query(url, UNFOLDED) == 0) or (lag and fold_lag_seconds(url) <= lag):
            return time.monotonic() - began
        time.sleep(1)
    return None


def seconds(value: float | None) -> float | str:
    return round(value, 1) if value is not None else "not within 300 s"


class Watchdog(threading.Thread):
    """Restarts a product process that exits, as the compose file's ``restart: unless-stopped``
    does in production, and counts the restarts."""

    def __init__(self, children: list[Child], env: dict[str, str]) -> None:
        super().__init__(daemon=True, name="soak-watchdog")
        self.children, self.env = children, env
        self.restarts: list[tuple[float, str, int | None]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(1.0):
            for child in self.children:
                if child.process is not None and not child.alive():
                    self.restarts.append((time.time(), child.name, child.process.returncode))
                    child.start(self.env)

    def during(self, t0: float, t1: float) -> list[str]:
        return [f"{name} (exit {code})" for at, name, code in self.restarts if t0 <= at < t1]


def faults(
    stack: BenchStack, redis: EmbeddedRedis, worker: Child, outage: float
) -> list[dict[str, Any]]:
    """Redis down, worker SIGKILLed mid-fold, PostgreSQL restarted; the time span of each."""
    steps = []
    url = stack.database_url

    t0 = time.time()
    redis.stop()
    time.sleep(outage)
    lag_at_return = fold_lag_seconds(url)
    redis.start()
    catch_up = wait_for_fold(url, 300, CAUGHT_UP_LAG_SECONDS)
    steps.append(
        {
            "fault": f"redis stopped for {outage:.0f}s",
            "t0": t0,
            "t1": t0 + outage,
            "fold_lag_when_redis_returned_s": round(lag_at_return, 1),
            "fold_caught_up_s_after_return": seconds(catch_up),
        }
    )

    time.sleep(10)
    t0 = time.time()
    while fold_lag_seconds(url) == 0 and time.time() - t0 < 30:
        time.sleep(0.05)  # SIGKILL while batches are pending, so a fold is likely under way
    worker.kill()  # the watchdog starts it again within a second
    time.sleep(10)  # the worker boots and rejoins the broker meanwhile
    catch_up = wait_for_fold(url, 300, CAUGHT_UP_LAG_SECONDS)
    if catch_up is not None:
        catch_up += 10
    steps.append(
        {
            "fault": "celery worker SIGKILLed mid-fold",
            "t0": t0,
            "t1": time.time(),
            "fold_caught_up_s_after_kill": seconds(catch_up),
        }
    )

    time.sleep(10)
    t0 = time.time()
    stack.postgres.stop()
    time.sleep(10)
    stack.postgres.start()
    catch_up = wait_for_fold(url, 300, CAUGHT_UP_LAG_SECONDS)
    steps.append(
        {
            "fault": "postgresql stopped for 10 s",
            "t0": t0,
            "t1": time.time(),
            "fold_caught_up_s_after_restart": seconds(catch_up),
        }
    )
    return steps


def books(url: str, acknowledged: int) -> dict[str, int]:
    return {
        "acknowledged": acknowledged,
        "stored": query(url, f"SELECT count(*) FROM {tables.SPAN}"),  # noqa: S608
        "folded_batch_spans": query(
            url,
            f"SELECT coalesce(sum(stored_spans), 0) FROM {tables.INGEST_BATCH}"  # noqa: S608
            " WHERE rolled_up_at IS NOT NULL",
        ),
        "unfolded_batches": query(url, UNFOLDED),
        "database_mib": query(url, "SELECT pg_database_size(current_database()) / 1048576"),
    }

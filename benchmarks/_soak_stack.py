"""The rest of the product around a ``BenchStack`` for the soak: web, Celery worker and beat,
a logged-in API client, paced senders, and the samplers that watch them.

Every process is a child of the benchmark in its own process group that dies with it; the
senders are forked and report, per wall-clock second, how many spans were acknowledged and
which statuses they saw, so each phase (capacity, soak, every fault) is read from one record.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import multiprocessing as mp
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from _children import child_process
from _otlp_bodies import SPANS_PER_REQUEST, BodyTemplate
from _stack import ROOT, STOP_TIMEOUT, BenchStack, tail

from latencyboard.local.embedded import die_with_parent, free_port

TEMPLATES_PER_SENDER = 4
USER_SCRIPT = """
from django.contrib.auth import get_user_model
from latencyboard.teams.models import Membership, Team
user = get_user_model().objects.create_user({username!r}, password={password!r})
Membership.objects.create(user=user, team=Team.objects.get(id={team_id}), role="viewer")
"""


@dataclass
class Child:
    """One long-running product process (web, worker, beat), restartable for fault steps."""

    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self, env: dict[str, str]) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def kill(self) -> None:
        """SIGKILL the whole group at once: what an OOM kill or a lost host does."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_TIMEOUT)
        self.kill()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tree(self) -> list[psutil.Process]:
        if self.process is None:
            return []
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


def product_children(stack: BenchStack, web_port: int) -> list[Child]:
    python = sys.executable
    celery = [python, "-m", "celery", "-A", "latencyboard"]
    return [
        Child(
            "web",
            [
                python,
                "-m",
                "uvicorn",
                "latencyboard.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(web_port),
                "--lifespan",
                "off",
                "--no-access-log",
            ],
            stack.root / "web.log",
        ),
        Child(
            "worker",
            [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2", "-n", "soak@%h"],
            stack.root / "worker.log",
        ),
        Child("beat", [*celery, "beat", "--loglevel", "INFO"], stack.root / "beat.log"),
    ]


class ApiClient:
    """A logged-in viewer of the stack's team (or of ``team_id``), reading pages over HTTP."""

    def __init__(
        self, stack: BenchStack, port: int, username: str = "soak", team_id: int | None = None
    ) -> None:
        self.port = port
        password = f"soak-{random.getrandbits(64):x}"
        script = USER_SCRIPT.format(
            username=username, password=password, team_id=team_id or stack.team_id
        )
        stack.manage("shell", "-c", script)
        self.cookies: dict[str, str] = {}
        self._wait_ready()
        _, body = self.get("/login/")
        csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', body)
        if csrf is None:
            raise RuntimeError("no CSRF token on the login page")
        form = urllib.parse.urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": csrf[1].decode()}
        )
        status, _ = self.request(
            "POST", "/login/", form.encode(), "application/x-www-form-urlencoded"
        )
        if status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"login failed ({status})")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if self.get("/healthz")[0] == 200:
                    return
            time.sleep(0.3)
        raise TimeoutError("web did not answer within 60 s")

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str | None = None
    ) -> tuple[int, bytes]:
        headers = {"host": "localhost", "referer": f"http://localhost:{self.port}/login/"}
        if self.cookies:
            headers["cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if content_type:
            headers["content-type"] = content_type
            headers["x-csrftoken"] = self.cookies.get("csrftoken", "")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body, headers)
            response = conn.getresponse()
            data = response.read()
            for header, value in response.getheaders():
                if header.lower() == "set-cookie":
                    name, _, rest = value.partition("=")
                    self.cookies[name] = rest.split(";", 1)[0]
            return response.status, data
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, bytes]:
        return self.request("GET", path)

    def pipeline_ids(self) -> list[int]:
        status, body = self.get("/api/pipelines/")
        if status != 200:
            return []
        data = json.loads(body)
        rows = data["results"] if isinstance(data, dict) else data
        return [row["id"] for row in rows]


def sender(
    index: int,
    port: int,
    token: str,
    start: float,
    end: Any,
    rate: Any,
    results: Any,
) -> None:
    """POST distinct 512-span exports until ``end``; ``rate`` (requests/s; 0 = flat out, below
    0 = paused) may change while it runs. Reports per-second acknowledged spans and statuses."""
    child_process()
    now_ns = time.time_ns()
    templates = [
        BodyTemplate(random.Random(7_000 + index * 100 + i), now_ns)  # noqa: S311 (test data)
        for i in range(TEMPLATES_PER_SENDER)
    ]
    rng = np.random.default_rng(7_000 + index)
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {token}"}
    acked: Counter[int] = Counter()
    statuses: dict[int, Counter[str]] = defaultdict(Counter)
    latencies: list[tuple[int, float]] = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while time.time() < start:
        time.sleep(0.01)
    next_at = time.monotonic()
    sent = 0
    while time.time() < end.value:
        per_second = rate.value
        if per_second < 0:
            time.sleep(0.1)
            next_at = time.monotonic()
            continue
        if per_second > 0:
            next_at += 1.0 / per_second
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:
                next_at = time.monotonic()  # fell behind (an outage): no catch-up burst
        body = templates[sent % len(templates)].render(rng)
        sent += 1
        began = time.perf_counter()
        try:
            conn.request("POST", "/v1/traces", body, headers)
            response = conn.getresponse()
            response.read()
            status = str(response.status)
        except (OSError, http.client.HTTPException) as exc:
            status = type(exc).__name__
            conn.close()
            time.sleep(0.2)
        second = int(time.time())
        statuses[second][status] += 1
        if status == "200":
            acked[second] += SPANS_PER_REQUEST
            latencies.append((second, time.perf_counter() - began))
    conn.close()
    results.put(
        {
            "acked": dict(acked),
            "statuses": {s: dict(c) for s, c in statuses.items()},
            "latencies": latencies,
        }
    )


@dataclass
class Senders:
    """Sender processes sharing an end time and a per-sender request rate."""

    count: int
    port: int
    token: str
    end: Any = field(init=False)
    rate: Any = field(init=False)
    processes: list[mp.process.BaseProcess] = field(default_factory=list, init=False)
    results: Any = field(init=False)

    def start(self, until: float, requests_per_s: float) -> None:
        ctx = mp.get_context("fork")
        self.end = ctx.Value("d", until)
        self.rate = ctx.Value("d", requests_per_s / self.count)
        self.results = ctx.Queue()
        start = time.time() + 2.0  # every sender builds its templates first
        for index in range(self.count):
            process = ctx.Process(
                target=sender,
                args=(index, self.port, self.token, start, self.end, self.rate, self.results),
                daemon=True,
            )
            process.start()
            self.processes.append(process)
        time.sleep(max(0.0, start - time.time()))

    def set_rate(self, requests_per_s: float) -> None:
        """Requests per second in all (0: flat out; below 0: paused)."""
        self.rate.value = requests_per_s / self.count


def merge_results(results: list[dict[str, Any]]) -> dict[str, Any]:
    acked: Counter[int] = Counter()
    statuses: dict[int, Counter[str]] = defaultdict(Counter)
    latencies: list[tuple[int, float]] = []
    for result in results:
        acked.update(result["acked"])
        for second, counts in result["statuses"].items():
            statuses[second].update(counts)
        latencies.extend(result["latencies"])
    return {"acked": acked, "statuses": statuses, "latencies": latencies}


def window(record: dict[str, Any], t0: float, t1: float) -> dict[str, Any]:
    """Acknowledged spans, statuses and latencies of the seconds in [t0, t1)."""
    seconds = range(int(t0), int(t1))
    statuses: Counter[str] = Counter()
    for second in seconds:
        statuses.update(record["statuses"].get(second, {}))
    latencies = [lat for second, lat in record["latencies"] if t0 <= second < t1]
    return {
        "acked_spans": sum(record["acked"].get(second, 0) for second in seconds),
        "statuses": dict(statuses),
        "latency_p99_ms": round(float(np.percentile(latencies, 99)) * 1000, 1)
        if latencies
        else None,
    }


def memory_mib(processes: list[psutil.Process]) -> float:
    """Proportional set size of a process tree: shared pages (PostgreSQL's shared buffers,
    forked workers' copy-on-write pages) split among their sharers, so the sum is real."""
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += process.memory_full_info().pss
    return total / 2**20


def free_ports(count: int) -> list[int]:
    return [free_port() for _ in range(count)]


def log_tail(child: Child) -> str:
    return tail(child.log_path)

"""Helpers for tests that start product processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from latencyboard.local.embedded import port_is_open

ROOT = Path(__file__).resolve().parents[1]
# Browser tests' screenshots, to look at after a run: in the checkout, so that users who run
# the suite on one machine never share (or fight over) a folder.
SCREENSHOTS = ROOT / "var" / "test" / "screenshots"
PYTHON = sys.executable

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.05,
    message: str | Callable[[], str] = "",
) -> T:
    """The first true value ``condition()`` returns, asking every ``interval`` seconds.

    AssertionError once ``timeout`` seconds pass without one, with the last value and
    ``message`` (or what it returns, read only then: a process's log, say).
    """
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            said = message() if callable(message) else message
            raise AssertionError(f"not within {timeout:g} s (last {value!r}): {said}")
        time.sleep(interval)
    return value


@dataclass
class RunningProcess:
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_process(
    argv: list[str], env: dict[str, str], log_path: Path, ready_port: int | None = None
) -> RunningProcess:
    """Start a product process and wait until ``ready_port`` accepts connections."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    running = RunningProcess(process, log_path)
    if ready_port is None:
        return running
    port = ready_port

    def listening() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"exited with code {process.returncode}")
        return port_is_open(port)

    try:
        wait_until(listening, timeout=60, message=f"no listener on port {port}")
    except AssertionError as error:
        stop_process(running)
        raise RuntimeError(f"{argv} did not start: {error}\n{running.log()}") from None
    return running


def stop_process(running: RunningProcess, timeout: float = 20) -> None:
    if running.process.poll() is None:
        running.process.terminate()
        try:
            running.process.wait(timeout)
        except subprocess.TimeoutExpired:
            running.process.kill()
            running.process.wait()


class Lines:
    """A command's ``stdout``, kept as its lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines += text.splitlines()

    def flush(self) -> None:
        pass


def start_worker(
    env: dict[str, str], log_path: Path, *options: str, pool: str = "solo"
) -> RunningProcess:
    """A Celery worker (no beat) with ``options`` (queues, concurrency…), once it is ready."""
    argv = [PYTHON, "-m", "celery", "-A", "latencyboard", "worker", "--pool", pool, *options]
    argv += ["--loglevel", "INFO", "--without-heartbeat", "--without-gossip", "--without-mingle"]
    running = start_process(argv, env, log_path)
    wait_until(lambda: "ready." in running.log(), timeout=60, message=running.log)
    return running

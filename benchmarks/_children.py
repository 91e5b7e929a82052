"""Forked helper processes of a benchmark (senders, COPY clients): set-up, results, stopping."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import queue
import signal
import time
from collections.abc import Sequence
from typing import Any

RESULT_TIMEOUT = 120.0
_PDEATHSIG = 1


def child_process() -> None:
    """Signal set-up of sender and COPY processes (forked, so they inherit ours).

    They die if the benchmark is killed outright (PR_SET_PDEATHSIG); Ctrl-C goes to the whole
    foreground group, but only the parent reacts and stops them, by plain SIGTERM.
    """
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PDEATHSIG, signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_processes(processes: Sequence[mp.process.BaseProcess]) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()


def collect(
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


def sleep_until(moment: float) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 0.5))

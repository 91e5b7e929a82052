"""Demo data for end-to-end benchmarks: ``backfill_demo`` into the stack, and the rollup fold
run until no batch is pending (as a worker would have by the time anyone looks)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from _stack import ROOT, BenchStack

if TYPE_CHECKING:
    from latencyboard.rollups.services import FoldResult


def demo_scale(spans: int, days: int) -> str:
    """The ``backfill_demo --scale`` that writes about ``spans`` spans over ``days``."""
    from latencyboard.demo import synthetic
    from latencyboard.demo.profiles import PIPELINES

    return f"{spans / synthetic.expected_spans(PIPELINES, days, 1.0):.6f}"


def backfill_demo(stack: BenchStack, days: int, scale: str, seed: int = 1) -> float:
    """``manage.py backfill_demo`` for the stack's team, as pending batches; seconds taken."""
    started = time.perf_counter()
    subprocess.run(
        [
            *(sys.executable, "manage.py", "backfill_demo", "--team", stack.team_name),
            *("--days", str(days), "--scale", scale, "--seed", str(seed)),
        ],
        cwd=ROOT,
        env=stack.env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def pending_folds() -> Iterator[tuple[FoldResult, float]]:
    """``fold_pending_batches`` until nothing is pending: each fold and its seconds."""
    from django.utils import timezone

    from latencyboard.rollups.services import fold_pending_batches

    while True:
        started = time.perf_counter()
        result = fold_pending_batches(timezone.now())
        if not result.batches:
            return
        yield result, time.perf_counter() - started

"""Exact SLA counters from span arrays (pure: numpy, no Django).

The rollup worker folds new spans into per-minute counters with this in the same transaction
as the rollup rows, and objective creation back-fills with the same rule, so both agree
to the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class ObjectiveSpec:
    objective_id: int
    pipeline_id: int
    stage_id: int | None  # None: end to end, i.e. the pipeline's root spans
    threshold_ms: float


@dataclass(frozen=True, slots=True)
class MinuteCount:
    objective_id: int
    minute: int  # minute index: Unix seconds // 60
    good: int
    total: int


def count_minutes(
    objectives: Sequence[ObjectiveSpec],
    pipeline_ids: NDArray[np.int64],
    stage_ids: NDArray[np.int64],
    is_root: NDArray[np.bool_],
    minutes: NDArray[np.int64],
    duration_ms: NDArray[np.float64],
) -> list[MinuteCount]:
    """Per objective and minute: how many matching spans there were and how many were good.

    A span is *good* when its duration is at most the threshold (``<=``: a request that takes
    exactly the budget met it).
    """
    counts: list[MinuteCount] = []
    for objective in objectives:
        match = pipeline_ids == objective.pipeline_id
        if objective.stage_id is None:
            match &= is_root
        else:
            match &= stage_ids == objective.stage_id
        if not match.any():
            continue
        matched_minutes = minutes[match]
        good = duration_ms[match] <= objective.threshold_ms
        unique, inverse = np.unique(matched_minutes, return_inverse=True)
        totals = np.bincount(inverse, minlength=len(unique))
        goods = np.bincount(inverse, weights=good, minlength=len(unique)).astype(np.int64)
        counts.extend(
            MinuteCount(objective.objective_id, int(m), int(g), int(t))
            for m, g, t in zip(unique, goods, totals, strict=True)
        )
    return counts

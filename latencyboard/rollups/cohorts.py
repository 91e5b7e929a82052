"""Folding spans into cohort sketches: one per (pipeline, stage, minute, attribute, value)
(pure: numpy and the sketch module, no Django).

The fold reads the spans of its batches already grouped by PostgreSQL into
:class:`CohortGroup` (one per pipeline, stage, root or not, minute, attribute and value,
with its durations as one binary string); :func:`fold_cohort_minutes` turns them into
sketches, a root span counting for its stage and end to end as in
:func:`latencyboard.rollups.folding.fold_minutes`.

The cardinality cap (:func:`admit_values`) keeps at most ``cap`` values of an attribute per
pipeline and UTC day apart; spans of further values count as :data:`OTHER`. Values already
stored that day keep their place, so a value never moves between its own row and ``other``
within a day; among new values the most frequent in the fold win.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from latencyboard.sketches.sketch import Sketch, merge_many, sketches_by_group
from latencyboard.storage import cohort_rows

OTHER: Final = "other"
"""The value standing for every value past the cap, in one row per stage and bucket."""
DAY_SECONDS: Final = 86_400

DayKey = tuple[int, str, int]  # pipeline, attribute, day (Unix seconds of its midnight)


@dataclass(frozen=True, slots=True)
class CohortGroup:
    """Spans of one pipeline, stage, minute and attribute value, as PostgreSQL grouped them;
    ``durations`` is their ``int8send(duration_ns)`` concatenated."""

    pipeline_id: int
    stage_id: int
    is_root: bool
    minute: int  # Unix seconds // 60
    attribute: str
    value: str
    error_count: int
    durations: bytes


@dataclass(frozen=True, slots=True)
class CohortFold:
    """Latency of one stage (None: end to end) of one cohort over one bucket."""

    pipeline_id: int
    attribute: str
    value: str
    stage_id: int | None
    bucket: int  # start, Unix seconds
    error_count: int
    sketch: Sketch

    @property
    def key(self) -> tuple[int, str, str, int | None, int]:
        return (self.pipeline_id, self.attribute, self.value, self.stage_id, self.bucket)


def day_of(minute: int) -> int:
    """The Unix seconds of the UTC midnight starting the day of ``minute`` (Unix // 60)."""
    return minute * 60 // DAY_SECONDS * DAY_SECONDS


def admit_values(
    groups: Sequence[CohortGroup], stored: Mapping[DayKey, set[str]], cap: int
) -> dict[tuple[DayKey, str], str]:
    """The value each (pipeline, attribute, day) and value of ``groups`` is stored under:
    itself while the day has fewer than ``cap`` values (``stored`` holds those already in
    the rollups), else :data:`OTHER`. New values are admitted most spans first."""
    spans: dict[DayKey, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for group in groups:
        day = (group.pipeline_id, group.attribute, day_of(group.minute))
        spans[day][group.value] += len(group.durations) // 8
    stored_as: dict[tuple[DayKey, str], str] = {}
    for day, counts in spans.items():
        kept = stored.get(day, set()) - {OTHER}
        free = max(cap - len(kept), 0)
        new = sorted((v for v in counts if v not in kept), key=lambda v: (-counts[v], v))
        admitted = kept | set(new[:free])
        for value in counts:
            stored_as[(day, value)] = value if value in admitted else OTHER
    return stored_as


def fold_cohort_minutes(
    groups: Sequence[CohortGroup], stored_as: Mapping[tuple[DayKey, str], str]
) -> list[CohortFold]:
    """One fold per (pipeline, attribute, stored value, stage, minute), plus end to end for
    root spans; sorted by that key with end to end first, the order rows are locked in.

    Grouped with numpy: a fold holds hundreds of thousands of groups, and Python work per
    group and key is most of what cohorts add to a fold."""
    if not groups:
        return []
    # Each (attribute, stored value) as its rank in sort order, so sorting by rank sorts by
    # the strings.
    cohorts = [
        (g.attribute, stored_as[((g.pipeline_id, g.attribute, day_of(g.minute)), g.value)])
        for g in groups
    ]
    names = sorted(set(cohorts))
    rank_of = {name: rank for rank, name in enumerate(names)}
    rank = np.fromiter((rank_of[c] for c in cohorts), np.int64, len(cohorts))
    pipeline = np.fromiter((g.pipeline_id for g in groups), np.int64, len(groups))
    stage = np.fromiter((g.stage_id for g in groups), np.int64, len(groups))
    minute = np.fromiter((g.minute for g in groups), np.int64, len(groups))
    root = np.fromiter((g.is_root for g in groups), np.bool_, len(groups))
    errors = np.fromiter((g.error_count for g in groups), np.int64, len(groups))
    lengths = np.fromiter((len(g.durations) for g in groups), np.int64, len(groups)) // 8
    durations = cohort_rows.durations_ms(b"".join([g.durations for g in groups]))
    # A root group counts again end to end: stage 0 while grouping (database ids start at 1).
    member = np.concatenate([np.arange(len(groups)), np.flatnonzero(root)])
    stage = np.concatenate([stage, np.zeros(np.count_nonzero(root), dtype=np.int64)])
    order = np.lexsort((minute[member], stage, rank[member], pipeline[member]))
    member, stage = member[order], stage[order]
    key = np.stack([pipeline[member], rank[member], stage, minute[member]])
    starts = np.ones(member.size, dtype=bool)
    starts[1:] = (key[:, 1:] != key[:, :-1]).any(axis=0)
    fold_of = np.cumsum(starts) - 1
    # Every member group's durations, each tagged with its fold.
    first = np.cumsum(lengths) - lengths
    picked = np.repeat(
        first[member] - (np.cumsum(lengths[member]) - lengths[member]), lengths[member]
    )
    picked += np.arange(picked.size)
    sketches = sketches_by_group(np.repeat(fold_of, lengths[member]), durations[picked])
    error_counts = np.bincount(fold_of, weights=errors[member]).astype(np.int64).tolist()
    heads = key[:, starts].tolist()
    return [
        CohortFold(p, names[r][0], names[r][1], s or None, m * 60, e, sketches[g])
        for g, (p, r, s, m, e) in enumerate(zip(*heads, error_counts, strict=True))
    ]


def combine(
    rows: Iterable[tuple[int, str, str, int | None, int, int, bytes]],
) -> list[CohortFold]:
    """Merge rows ``(pipeline, attribute, value, stage, bucket, error_count, sketch)`` that
    share all but their counts and sketches, as compaction does; ``rows`` sorted by key."""
    folds = []
    for key, members in itertools.groupby(rows, key=lambda row: row[:5]):
        group = list(members)
        pipeline_id, attribute, value, stage_id, bucket = key
        folds.append(
            CohortFold(
                pipeline_id,
                attribute,
                value,
                stage_id,
                bucket,
                sum(row[5] for row in group),
                merge_many(row[6] for row in group),
            )
        )
    return folds

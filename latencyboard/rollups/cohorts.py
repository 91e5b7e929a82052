"""Folding spans into cohort sketches: one per (pipeline, stage, minute, attribute, value)
(pure: numpy and the sketch module, no Django).

A span's cohort value is read from its template and resource, stored once and shared by many
spans, unless its own attributes hold the attribute (then PostgreSQL reads the value and
groups those spans, :class:`CohortGroup`). :func:`from_templates` and :func:`from_groups`
turn both into :class:`CohortSpans`, one entry per span and cohort attribute it has a value
of; :func:`fold_cohort_minutes` groups the entries into sketches, a root span counting for
its stage and end to end as in :func:`latencyboard.rollups.folding.fold_minutes`.

The cardinality cap (:func:`admit_values`) keeps at most ``cap`` values of an attribute per
pipeline and UTC day apart; spans of further values count as :data:`OTHER`. Values already
stored that day keep their place, so a value never moves between its own row and ``other``
within a day; among new values the most frequent in the fold win.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from latencyboard.sketches.sketch import Sketch, merge_many, sketches_by_group
from latencyboard.spans.columns import SpanColumns
from latencyboard.storage import cohort_rows
from latencyboard.windows import DAY, MINUTE, SECOND

OTHER: Final = "other"
"""The value standing for every value past the cap, in one row per stage and bucket."""
DAY_SECONDS: Final = DAY // SECOND
_DAY_MINUTES: Final = DAY // MINUTE

DayKey = tuple[int, str, int]  # pipeline, attribute, day (Unix seconds of its midnight)
Name = tuple[str, str]  # attribute, value
IntArray = npt.NDArray[np.int64]
_COLUMNS: Final = tuple(field.name for field in dataclasses.fields(SpanColumns))


@dataclass(frozen=True, slots=True)
class CohortGroup:
    """Spans of one pipeline, stage, minute and attribute value, as PostgreSQL grouped them;
    ``spans`` is their :data:`latencyboard.storage.cohort_rows.COHORT_SPAN` concatenated."""

    pipeline_id: int
    stage_id: int
    is_root: bool
    minute: int  # Unix seconds // 60
    attribute: str
    value: str
    spans: bytes


@dataclass(frozen=True, slots=True)
class CohortSpans:
    """One entry per span and cohort attribute the span has a value of: the span's columns,
    and the index of its (attribute, value) in ``names``."""

    spans: SpanColumns
    name: IntArray
    names: tuple[Name, ...]

    def __len__(self) -> int:
        return len(self.name)


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


def from_templates(
    spans: SpanColumns,
    template_id: IntArray,
    keys_of: Mapping[int, Collection[str]],
    values: Mapping[tuple[int, str], str],
) -> CohortSpans:
    """The cohort entries of spans whose own attributes hold no cohort attribute: for each
    attribute in ``keys_of[pipeline]``, the value its template (or the template's resource)
    has, ``values[(template_id, attribute)]``; none where missing (template 0: no template)."""
    keys = sorted({key for pipeline_keys in keys_of.values() for key in pipeline_keys})
    if not keys or not len(spans):
        return CohortSpans(spans.select(np.zeros(len(spans), np.bool_)), _ints([]), ())
    templates, template_of = np.unique(template_id, return_inverse=True)
    pipelines, pipeline_of = np.unique(spans.pipeline_id, return_inverse=True)
    index: dict[Name, int] = {}
    code = np.full((len(templates), len(keys)), -1, dtype=np.int64)
    for row, template in enumerate(templates.tolist()):
        for column, key in enumerate(keys):
            value = values.get((template, key))
            if value is not None:
                code[row, column] = index.setdefault((key, value), len(index))
    has = np.array([[key in keys_of.get(p, ()) for key in keys] for p in pipelines.tolist()])
    codes = np.where(has[pipeline_of], code[template_of], -1)
    span, key_of_span = np.nonzero(codes >= 0)
    return CohortSpans(_take(spans, span), codes[span, key_of_span], tuple(index))


def from_groups(groups: Sequence[CohortGroup]) -> CohortSpans:
    """The cohort entries of spans PostgreSQL grouped by value."""
    index: dict[Name, int] = {}
    name = [index.setdefault((g.attribute, g.value), len(index)) for g in groups]
    records = cohort_rows.cohort_spans(b"".join([g.spans for g in groups]))
    lengths = np.fromiter((len(g.spans) for g in groups), np.int64, len(groups))
    lengths //= cohort_rows.COHORT_SPAN_BYTES

    def each(values: Iterable[int | bool], dtype: type) -> npt.NDArray[Any]:
        return np.repeat(np.fromiter(values, dtype, len(groups)), lengths)

    return CohortSpans(
        SpanColumns(
            pipeline_id=each((g.pipeline_id for g in groups), np.int64),
            stage_id=each((g.stage_id for g in groups), np.int64),
            is_root=each((g.is_root for g in groups), np.bool_),
            minute=each((g.minute for g in groups), np.int64),
            duration_ms=records.duration_ms,
            is_error=records.is_error,
        ),
        each(name, np.int64),
        tuple(index),
    )


def joined(parts: Sequence[CohortSpans]) -> CohortSpans:
    """The entries of all ``parts``, their names merged."""
    index: dict[Name, int] = {}
    names = []
    for part in parts:
        remap = _ints([index.setdefault(n, len(index)) for n in part.names])
        names.append(remap[part.name] if len(part.names) else part.name)
    columns = [np.concatenate([getattr(part.spans, field) for part in parts]) for field in _COLUMNS]
    return CohortSpans(SpanColumns(*columns), np.concatenate(names), tuple(index))


@dataclass(frozen=True, slots=True)
class CohortDays:
    """The distinct (pipeline, name, day) of some entries: ``keys`` as (pipeline, attribute,
    day, value), the spans of each, and each entry's index into them."""

    keys: list[tuple[DayKey, str]]
    spans: list[int]
    of_entry: IntArray


def cohort_days(entries: CohortSpans) -> CohortDays:
    """The (pipeline, attribute, day, value) of each entry, found with one sort."""
    pipelines, pipeline_of = np.unique(entries.spans.pipeline_id, return_inverse=True)
    days, day_of_entry = np.unique(entries.spans.minute // _DAY_MINUTES, return_inverse=True)
    width = len(entries.names) * len(days)
    key = pipeline_of * width + entries.name * len(days) + day_of_entry
    distinct, of_entry, count = np.unique(key, return_inverse=True, return_counts=True)
    keys = []
    for pipeline, name, day in zip(
        pipelines[distinct // width].tolist(),
        (distinct % width // len(days)).tolist(),
        (days[distinct % len(days)] * DAY_SECONDS).tolist(),
        strict=True,
    ):
        attribute, value = entries.names[name]
        keys.append(((pipeline, attribute, day), value))
    return CohortDays(keys, count.tolist(), of_entry)


def value_counts(days: CohortDays) -> dict[DayKey, dict[str, int]]:
    """Spans of each value of each (pipeline, attribute, day)."""
    counts: dict[DayKey, dict[str, int]] = defaultdict(dict)
    for (day, value), n in zip(days.keys, days.spans, strict=True):
        counts[day][value] = n
    return counts


def admit_values(
    counts: Mapping[DayKey, Mapping[str, int]], stored: Mapping[DayKey, set[str]], cap: int
) -> dict[tuple[DayKey, str], str]:
    """The value each (pipeline, attribute, day) and value of ``counts`` (spans per value) is
    stored under: itself while the day has fewer than ``cap`` values (``stored`` holds those
    already in the rollups), else :data:`OTHER`. New values are admitted most spans first."""
    stored_as: dict[tuple[DayKey, str], str] = {}
    for day, of_value in counts.items():
        kept = stored.get(day, set()) - {OTHER}
        free = max(cap - len(kept), 0)
        new = sorted((v for v in of_value if v not in kept), key=lambda v: (-of_value[v], v))
        admitted = kept | set(new[:free])
        for value in of_value:
            stored_as[(day, value)] = value if value in admitted else OTHER
    return stored_as


CohortKey = tuple[int, str, str, int | None, int]  # pipeline, attribute, value, stage, bucket
MinuteKey = tuple[int, int | None, int]  # pipeline, stage (None: end to end), bucket start


@dataclass(frozen=True, slots=True)
class CohortMinutes:
    """A fold's cohort groups, one per (pipeline, attribute, stored value, stage, minute) plus
    end to end for root spans, sorted by that key with end to end first (the order rows are
    locked in); their sketches are made for the groups a fold stores (:meth:`folds`)."""

    keys: list[CohortKey]
    counts: list[int]
    errors: list[int]
    group_of: IntArray  # each member's group, members sorted by group
    duration_ms: npt.NDArray[np.float64]

    @classmethod
    def none(cls) -> CohortMinutes:
        return cls([], [], [], _ints([]), np.zeros(0))

    def __len__(self) -> int:
        return len(self.keys)

    def folds(self, wanted: Sequence[bool]) -> list[CohortFold]:
        """The folds of the groups ``wanted`` (one flag per group), in order, with their
        sketches."""
        members = np.asarray(wanted, dtype=np.bool_)[self.group_of]
        sketches = sketches_by_group(self.group_of[members], self.duration_ms[members])
        return [
            CohortFold(*key, errors, sketches[group])
            for group, (key, errors, keep) in enumerate(
                zip(self.keys, self.errors, wanted, strict=True)
            )
            if keep
        ]


def fold_cohort_minutes(
    entries: CohortSpans, days: CohortDays, stored_as: Mapping[tuple[DayKey, str], str]
) -> CohortMinutes:
    """The cohort groups of ``entries``; ``days`` are the entries' :func:`cohort_days`."""
    if not len(entries):
        return CohortMinutes.none()
    spans = entries.spans
    # Each entry's stored (attribute, value), as its rank in sort order.
    stored = [(key[0][1], stored_as[key]) for key in days.keys]
    names = sorted(set(stored))
    rank_of = {name: rank for rank, name in enumerate(names)}
    rank = _ints([rank_of[name] for name in stored])[days.of_entry]
    # A root entry counts again end to end: stage 0 while grouping (database ids start at 1).
    root = np.flatnonzero(spans.is_root)
    member = np.concatenate([np.arange(len(entries)), root])
    stage = np.concatenate([spans.stage_id, np.zeros(len(root), dtype=np.int64)])
    columns = [spans.pipeline_id[member], rank[member], stage, spans.minute[member]]
    order = _sorted_by(columns)
    member = member[order]
    key = np.stack([column[order] for column in columns])
    starts = np.ones(member.size, dtype=np.bool_)
    starts[1:] = (key[:, 1:] != key[:, :-1]).any(axis=0)
    group_of = np.cumsum(starts) - 1
    counts = np.bincount(group_of).tolist()
    errors = np.bincount(group_of, weights=spans.is_error[member]).astype(np.int64).tolist()
    heads = key[:, starts].tolist()
    keys: list[CohortKey] = [
        (p, names[r][0], names[r][1], s or None, m * 60) for p, r, s, m in zip(*heads, strict=True)
    ]
    return CohortMinutes(keys, counts, errors, group_of, spans.duration_ms[member])


def sole_values(
    groups: CohortMinutes, counts: Mapping[MinuteKey, int]
) -> dict[MinuteKey, dict[str, str]]:
    """For each rollup key, the cohort attributes that one value covers all of: a single
    group of the attribute there, counting all ``counts[key]`` spans the fold adds to the
    key's rollup row. Those groups equal the rollup's and are not stored apart
    (``Rollup.cohorts``)."""
    only: dict[tuple[MinuteKey, str], tuple[str, int] | None] = {}
    for (pipeline, attribute, value, stage, bucket), n in zip(
        groups.keys, groups.counts, strict=True
    ):
        at = ((pipeline, stage, bucket), attribute)
        only[at] = None if at in only else (value, n)
    sole: dict[MinuteKey, dict[str, str]] = defaultdict(dict)
    for (key, attribute), single in only.items():
        if single is not None and single[1] == counts.get(key):
            sole[key][attribute] = single[0]
    return dict(sole)


def still_sole(stored: Mapping[str, str], added: Mapping[str, str]) -> dict[str, str]:
    """The attributes of a rollup row's ``cohorts`` that the spans ``added`` to it all carry
    with the same value: the row still stands for those cohorts."""
    return {key: value for key, value in stored.items() if added.get(key) == value}


def to_store(
    groups: CohortMinutes,
    elided: Mapping[MinuteKey, Mapping[str, str]],
    materialized: Sequence[CohortFold] = (),
) -> list[CohortFold]:
    """The cohort rows a fold writes: the ``groups`` but those a rollup row stands for
    (``elided``), with the cohort rows rollup rows stopped standing for (``materialized``)
    merged in; sorted by key with end to end first, the order rows are locked in."""
    stored = groups.folds([elided.get((p, s, b), {}).get(a) != v for p, a, v, s, b in groups.keys])
    if not materialized:
        return stored
    kept: dict[CohortKey, CohortFold] = {}
    for fold in itertools.chain(stored, materialized):
        same = kept.get(fold.key)
        kept[fold.key] = (
            fold
            if same is None
            else dataclasses.replace(
                same,
                error_count=same.error_count + fold.error_count,
                sketch=merge_many([same.sketch, fold.sketch]),
            )
        )
    return sorted(kept.values(), key=_lock_order)


def _lock_order(fold: CohortFold) -> tuple[Any, ...]:
    stage = fold.stage_id
    return (fold.pipeline_id, fold.attribute, fold.value, stage or 0, fold.bucket)


def _sorted_by(columns: Sequence[IntArray]) -> IntArray:
    """The order that sorts by ``columns``, the first most significant: one sort of a single
    key (each column's dense rank, packed) where it fits in 63 bits, else a lexsort."""
    ranks, widths = [], []
    for column in columns:
        low = int(column.min())
        ranks.append(column - low)
        widths.append(int(column.max()) - low + 1)
    if np.prod(widths, dtype=object) >= 2**63:
        return np.lexsort(columns[::-1])
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for rank, width in zip(ranks, widths, strict=True):
        key = key * width + rank
    return np.argsort(key, kind="stable")


def _take(spans: SpanColumns, index: IntArray) -> SpanColumns:
    return SpanColumns(*(getattr(spans, field)[index] for field in _COLUMNS))


def _ints(values: Sequence[int]) -> IntArray:
    return np.array(values, dtype=np.int64)


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

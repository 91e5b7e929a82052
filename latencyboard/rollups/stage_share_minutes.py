"""Where a request's time goes, stage by stage: self times summed per minute (pure: numpy only).

The stage-share worker reads one pipeline's spans of some complete traces
(:func:`latencyboard.storage.stage_share_rows.trace_spans`) and turns them into one
:class:`StageMinute` per (minute, stage) (:func:`stage_minutes`): the sums behind "mean self
time per request" over all requests and, per root-duration bucket, over the slowest 1% of
any window.

Definitions, all within one pipeline (a trace's spans of other pipelines are not read):

- A *request* is a root span (``is_root``: no parent, or SERVER kind) with the spans below it,
  down to but not including other root spans. Its minute is the minute its root started in.
- A span's *self time* is its duration minus the union of its direct children's intervals,
  each clipped to the span: children that overlap each other are subtracted once, children
  partly outside their parent only for the part inside, children wholly outside not at all.
  With children one after another inside their parent this is the duration minus the
  children's durations, and a request's self times add up to its root's duration exactly.
  Children that run concurrently (or outlive their parent) each keep their own self time, so
  the self times then add up to more than the root's wall-clock time.
- A root nested under a span of the same pipeline (a service calling itself) is not
  subtracted from its parent, just as a call into another pipeline is not: from the caller's
  side that time is the calling span's own. The nested root is a request of its own.
- An *orphan* is a span whose parent was never received (lost, stored after the grace
  period, or never instrumented). Nothing is subtracted for it from any ancestor, and its self
  time, its full duration less its own children, goes to its own stage, in the request of its
  trace's earliest root (ties: the lowest span id). Spans hanging under a cycle of parent ids
  count as orphans too. In a trace without a root they count nowhere.
- Each minute's requests are also counted per root-duration bucket (the sketch's buckets),
  with their root durations and each stage's self time per bucket: what lets a window of
  any length find its own slowest 1% (``rollups.tails``) from sums of rows.
- A span id stored twice in one trace (with two start times) counts once, as either copy.

Everything is done on whole arrays, never one Python step per span or trace: a backlog can
be millions of spans. The sorts over all spans are on single int64 keys, several times
faster in numpy than a ``lexsort`` of the same columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from latencyboard.rollups import critical_path, tails
from latencyboard.storage.stage_share_rows import StageMinute, TraceSpans
from latencyboard.windows import MINUTE, duration_ns

_NS_PER_MINUTE: Final = duration_ns(MINUTE)
_NS_PER_MS: Final = 10**6
_KEY_BITS: Final = 17  # every bucket key less ZERO_KEY is below 2**17

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def self_time_ns(spans: TraceSpans) -> IntArray:
    """Each span's self time in nanoseconds, in input order (0 for a repeated span id)."""
    tree = _Tree.of(spans)
    result = np.zeros(len(spans), dtype=np.int64)
    result[tree.order] = tree.self_ns
    return result


def critical_time_ns(spans: TraceSpans) -> IntArray:
    """Each span's time on its request's critical path in nanoseconds, in input order (see
    ``critical_path``; 0 for an orphan, a repeated span id, and a span off the path)."""
    tree = _Tree.of(spans)
    result = np.zeros(len(spans), dtype=np.int64)
    result[tree.order] = tree.critical_ns
    return result


def stage_minutes(spans: TraceSpans) -> list[StageMinute]:
    """Sum the spans' self times and critical-path times per (minute of their request's
    root, stage), in all and per root-duration bucket of the minute.

    A stage present in a request has its row even when its self time is 0, so every minute
    with requests has a row for its roots' stages at least. Sorted by (minute, stage). Every
    row of a minute has the minute's buckets, in key order (a stage absent from a bucket's
    requests has 0 there).
    """
    tree = _Tree.of(spans)
    roots = np.flatnonzero(tree.is_root & tree.kept)  # in (trace, span id) order
    if not len(roots):
        return []
    minute, duration = tree.minute[roots], tree.duration[roots]
    key = tails.root_keys(duration / _NS_PER_MS)

    # Each request's (minute, root bucket) slot: the minutes' buckets, each minute's in order,
    # are the slots; every row of a minute has one entry per slot of its minute.
    slots, slot_of = np.unique((minute << _KEY_BITS) | (key - tails.ZERO_KEY), return_inverse=True)
    slot_of = slot_of.reshape(-1)
    slot_minute = slots >> _KEY_BITS
    slot_bucket = (slots & ((1 << _KEY_BITS) - 1)) + tails.ZERO_KEY
    first = _starts(slot_minute)
    minute_first_slot = np.flatnonzero(first)
    minute_of_slot = np.cumsum(first) - 1
    minute_of = minute_of_slot[slot_of]
    minutes = len(minute_first_slot)
    slot_requests = np.bincount(slot_of, minlength=len(slot_minute))
    slot_root_ns = _sum_by(slot_of, duration, len(slot_minute))
    requests = np.bincount(minute_of, minlength=minutes)
    root_ns = _sum_by(minute_of, duration, minutes)

    # Each counted span adds its self time to the cell (its request's minute, its stage), and
    # to the entry of its request's slot in that cell's row.
    root_number = np.full(len(tree.order), -1, dtype=np.int64)
    root_number[roots] = np.arange(len(roots))
    counted = tree.request >= 0
    request = root_number[tree.request[counted]]
    stage, self_ns = tree.stage[counted], tree.self_ns[counted]
    critical_ns = tree.critical_ns[counted]
    stages = np.unique(stage)
    stage_index = np.searchsorted(stages, stage)
    cell = minute_of[request] * len(stages) + stage_index
    cells = minutes * len(stages)
    present = np.flatnonzero(np.bincount(cell, minlength=cells))
    self_sum = _sum_by(cell, self_ns, cells)
    critical_sum = _sum_by(cell, critical_ns, cells)
    stage_slot = stage_index * len(slot_minute) + slot_of[request]
    slot_self = _sum_by(stage_slot, self_ns, len(stages) * len(slot_minute)).reshape(
        len(stages), len(slot_minute)
    )
    slot_critical = _sum_by(stage_slot, critical_ns, len(stages) * len(slot_minute)).reshape(
        len(stages), len(slot_minute)
    )

    bounds = np.append(minute_first_slot, len(slot_minute))
    rows = []
    for c, m in zip(present.tolist(), (present // len(stages)).tolist(), strict=True):
        lo, hi = bounds[m], bounds[m + 1]
        rows.append(
            StageMinute(
                bucket=int(slot_minute[lo]) * 60,
                stage_id=int(stages[c % len(stages)]),
                requests=int(requests[m]),
                self_ms_sum=int(self_sum[c]) / _NS_PER_MS,
                root_ms_sum=int(root_ns[m]) / _NS_PER_MS,
                root_keys=tuple(slot_bucket[lo:hi].tolist()),
                key_requests=tuple(slot_requests[lo:hi].tolist()),
                key_root_ms=tuple((slot_root_ns[lo:hi] / _NS_PER_MS).tolist()),
                key_self_ms=tuple((slot_self[c % len(stages), lo:hi] / _NS_PER_MS).tolist()),
                critical_ms_sum=int(critical_sum[c]) / _NS_PER_MS,
                key_critical_ms=tuple(
                    (slot_critical[c % len(stages), lo:hi] / _NS_PER_MS).tolist()
                ),
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class _Tree:
    """The spans sorted by (trace, span id), with their requests and self times.

    ``request`` is the position, in this order, of the root of the request the span counts
    in (-1 for none).
    """

    order: IntArray
    stage: IntArray
    duration: IntArray
    minute: IntArray
    is_root: BoolArray
    kept: BoolArray  # false for the repeats of a span id in its trace
    request: IntArray
    self_ns: IntArray
    critical_ns: IntArray

    @classmethod
    def of(cls, spans: TraceSpans) -> _Tree:
        n = len(spans)
        span_rank = np.empty(n, dtype=np.int64)
        span_rank[np.argsort(spans.span_id)] = np.arange(n)
        # Both parts are below n, so the key orders by (trace, span id) without overflow.
        order = np.argsort(spans.trace * n + span_rank)
        trace, span_id = spans.trace[order], spans.span_id[order]
        start, duration = spans.start_ns[order], spans.duration_ns[order]
        is_root = spans.is_root[order]
        kept = _starts(trace, span_id)
        linked = spans.has_parent[order] & kept & ~is_root
        parent = _parents(trace, span_id, spans.parent_span_id[order], linked)
        roots = is_root & kept
        request = _requests(parent, trace, start, roots)
        request[~kept] = -1
        return cls(
            order=order,
            stage=spans.stage_id[order],
            duration=duration,
            minute=start // _NS_PER_MINUTE,
            is_root=is_root,
            kept=kept,
            request=request,
            self_ns=np.where(kept, duration - _covered(parent, start, duration), 0),
            critical_ns=critical_path.critical_ns(parent, start, duration, roots),
        )


def _parents(
    trace: IntArray, span_id: IntArray, parent_id: IntArray, linked: BoolArray
) -> IntArray:
    """Position of the parent of each ``linked`` span, -1 where it is missing or the span
    itself. The spans are sorted by (trace, span id): a binary search within each trace's
    run, all traces in step, finds the first span with the parent's id."""
    n = len(trace)
    first = _starts(trace)
    run_start = np.flatnonzero(first)
    run_end = np.append(run_start[1:], n)
    run = np.cumsum(first) - 1
    child = np.flatnonzero(linked)
    wanted = parent_id[child]
    low, high = run_start[run[child]], run_end[run[child]]
    end = high
    while True:
        searching = low < high
        if not searching.any():
            break
        middle = (low + high) // 2
        below = searching & (span_id[np.minimum(middle, n - 1)] < wanted)
        low = np.where(below, middle + 1, low)
        high = np.where(searching & ~below, middle, high)
    found = (low < end) & (span_id[np.minimum(low, n - 1)] == wanted) & (low != child)
    parent = np.full(n, -1, dtype=np.int64)
    parent[child[found]] = low[found]
    return parent


def _requests(parent: IntArray, trace: IntArray, start: IntArray, is_root: BoolArray) -> IntArray:
    """Position of the root of each span's request, -1 for none (see the module doc)."""
    n = len(parent)
    ancestor = np.where(parent >= 0, parent, np.arange(n))
    # Pointer jumping: after k rounds each span points 2**k levels up or at its top span, so
    # these rounds reach the top of any chain. Roots have no parent: a chain stops at the
    # first one. A chain into a cycle of parent ids ends on a span of the cycle, no root.
    for _ in range(max(n, 1).bit_length() + 1):
        higher = ancestor[ancestor]
        if np.array_equal(higher, ancestor):
            break
        ancestor = higher
    reaches_root = is_root[ancestor]

    # Each trace's earliest root takes the spans that reach no root. The roots come in
    # (trace, span id) order, which the stable sort keeps among equal starts.
    roots = np.flatnonzero(is_root)
    earliest = roots[np.lexsort((start[roots], trace[roots]))]
    earliest = earliest[_starts(trace[earliest])]
    trace_root = np.full(int(trace[-1]) + 1 if n else 0, -1, dtype=np.int64)
    trace_root[trace[earliest]] = earliest
    return np.where(reaches_root, ancestor, trace_root[trace])


def _covered(parent: IntArray, start: IntArray, duration: IntArray) -> IntArray:
    """Per span, the length of the union of its children's intervals clipped to it.

    A sweep over the children's start (+1) and end (-1) events sorted by (parent, time): the
    running depth is positive exactly where some child covers the parent, and as each
    parent's events balance to zero the running sum needs no reset between parents.
    """
    covered = np.zeros(len(parent), dtype=np.int64)
    child = np.flatnonzero(parent >= 0)
    of = parent[child]
    lower = np.maximum(start[child], start[of])
    upper = np.minimum(start[child] + duration[child], start[of] + duration[of])
    inside = upper > lower
    of, lower, upper = of[inside], lower[inside], upper[inside]
    events = 2 * len(of)
    if not events:
        return covered
    owner = np.concatenate([of, of])
    time = np.concatenate([lower, upper])
    step = np.concatenate([np.ones(len(of), np.int64), np.full(len(of), -1, np.int64)])
    time_rank = np.empty(events, dtype=np.int64)
    time_rank[np.argsort(time)] = np.arange(events)
    # Equal times may come in either order: no child ends where it starts, so the depth
    # never goes below zero, and the gap between equal times adds nothing.
    by_time = np.argsort(owner * events + time_rank)
    owner, time = owner[by_time], time[by_time]
    depth = np.cumsum(step[by_time])
    # Positive depth after an event means the next event belongs to the same parent.
    inner = np.flatnonzero(depth[:-1] > 0)
    np.add.at(covered, owner[inner], time[inner + 1] - time[inner])
    return covered


def _starts(*keys: npt.NDArray[np.generic]) -> BoolArray:
    """Where a run of equal consecutive key tuples starts (the arrays are sorted by them)."""
    first = np.ones(len(keys[0]), dtype=np.bool_)
    if len(first):
        first[1:] = np.logical_or.reduce([key[1:] != key[:-1] for key in keys])
    return first


def _sum_by(group: IntArray, values: IntArray, count: int) -> IntArray:
    """Exact int64 sums of ``values`` per group (bincount would add in float64)."""
    sums = np.zeros(count, dtype=np.int64)
    np.add.at(sums, group, values)
    return sums

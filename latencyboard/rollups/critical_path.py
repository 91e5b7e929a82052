"""The critical path of every request at once: how long each span itself held its request's end
up (pure: numpy only).

The rule is the trace page's (``latencyboard.traces.waterfall``, after Jaeger's): walking back
from a span's end, its child that finishes last is on the path, then the last child that
finishes before that one starts, and so on; the path goes into each chosen child the same way,
and the time where no chosen child runs is the span's own. A child is taken only within its
parent's part of the path (a child that starts before it or runs past it is clipped to it, one
wholly outside is never taken), a zero-length child is never taken, among children finishing
at the same moment the longest is taken (then the first in the order given), and a child
ending less than a microsecond after the cursor (starts are stored to the microsecond) counts
as ending at it. So a request's critical times add up to its root's duration exactly,
children one after another inside their parent are all on the path (critical time = self
time), and of two parallel children only the one that finishes last counts.

The waterfall walks one trace in Python; shares need every request of a backlog, so here the
path advances one tree level at a time over all requests together, and along each parent's
children one chain link at a time (a few steps of whole-array work each).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from latencyboard.traces.waterfall import STORED_PRECISION_NS

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_NONE: Final = -1
MAX_DEPTH: Final = 1_000
"""Levels below a root the path is followed: a span this deep keeps its whole part of the
path as its own time. Each level is a few whole-array steps, and a trace may be a chain of
a million spans; real requests are a few dozen levels deep."""


def critical_ns(
    parent: IntArray, start: IntArray, duration: IntArray, roots: BoolArray
) -> IntArray:
    """Per span, the critical path's time in the span itself, in nanoseconds.

    ``parent`` is each span's parent position (-1 for none: the links are the caller's, so a
    nested root or an orphan is cut off by giving it none). The path of each span in ``roots``
    covers its whole interval; a span no root's path reaches gets 0, so each root's tree's
    critical times sum to the root's duration.
    """
    n = len(parent)
    end = start + duration
    result = np.zeros(n, dtype=np.int64)
    low, high = start.copy(), end.copy()  # each span's part of the path, once it is on it
    child = np.flatnonzero(parent >= 0)
    child = child[np.argsort(parent[child], kind="stable")]
    child_parent = parent[child]
    frontier = np.flatnonzero(roots)
    for _ in range(MAX_DEPTH):
        if not len(frontier):
            break
        taken, taken_low, taken_high = _chains(frontier, child, child_parent, start, end, low, high)
        result[frontier] = high[frontier] - low[frontier]
        np.subtract.at(result, parent[taken], taken_high - taken_low)
        low[taken], high[taken] = taken_low, taken_high
        frontier = taken
    result[frontier] = high[frontier] - low[frontier]  # below MAX_DEPTH: their whole part
    return result


def _chains(
    frontier: IntArray,
    child: IntArray,
    child_parent: IntArray,
    start: IntArray,
    end: IntArray,
    low: IntArray,
    high: IntArray,
) -> tuple[IntArray, IntArray, IntArray]:
    """The children the path takes under each ``frontier`` span, with their parts of it.

    ``child`` lists every linked span grouped by parent (``child_parent`` ascending).
    """
    first = np.searchsorted(child_parent, frontier, side="left")
    count = np.searchsorted(child_parent, frontier, side="right") - first
    if not count.sum():
        return (np.empty(0, dtype=np.int64),) * 3
    # The children of the frontier, each parent's in a run.
    run_start = np.repeat(np.cumsum(count) - count, count)
    at = np.repeat(first, count) + np.arange(count.sum()) - run_start
    kids, owner = child[at], child_parent[at]
    kid_start = np.maximum(start[kids], low[owner])
    kid_end = np.minimum(end[kids], high[owner])
    positive = kid_end > kid_start
    kids, owner, kid_start, kid_end = (
        kids[positive],
        owner[positive],
        kid_start[positive],
        kid_end[positive],
    )
    if not len(kids):
        return (np.empty(0, dtype=np.int64),) * 3
    # Per parent: latest end first, then the longest, then the order given.
    order = np.lexsort((kids, kid_start, -kid_end, owner))
    kids, owner, kid_start, kid_end = kids[order], owner[order], kid_start[order], kid_end[order]
    m = len(kids)
    heads = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    run_end = np.repeat(np.r_[heads[1:], m], np.diff(np.r_[heads, m]))
    following = _following(kid_start, kid_end, run_end)

    taken = _reached(heads, following)
    # Each taken child but a chain's last hands the path on to the one after it, which ends
    # (give or take the precision) where it starts.
    part_end = kid_end.copy()
    link = np.flatnonzero(taken & (following != _NONE))
    part_end[following[link]] = np.minimum(kid_end[following[link]], kid_start[link])
    return kids[taken], kid_start[taken], part_end[taken]


def _reached(heads: IntArray, following: IntArray) -> BoolArray:
    """The children on the chains that start at ``heads`` and go on through ``following``.

    By doubling rather than one link per step, as a parent may have a million children one
    after another: after round k the chains' first 2**k links are marked, and each link's
    jump goes 2**k links ahead (-1 past a chain's end).
    """
    m = len(following)
    reached = np.zeros(m, dtype=np.bool_)
    reached[heads] = True
    jump = following.copy()
    while True:
        ahead = jump[reached]
        ahead = ahead[ahead != _NONE]
        if not len(ahead):
            return reached
        reached[ahead] = True
        jump = np.where(jump != _NONE, jump[np.maximum(jump, 0)], _NONE)


def _following(kid_start: IntArray, kid_end: IntArray, run_end: IntArray) -> IntArray:
    """For each child (sorted as :func:`_chains` sorts them), the next one the path would take
    after it in its parent's run: the first later one ending by its start (give or take the
    stored precision) and starting before it. -1 for none."""
    m = len(kid_start)
    index = np.arange(m)
    cursor = kid_start + STORED_PRECISION_NS
    # Ends do not increase along a run: a binary search per child, all children in step.
    low, high = index + 1, run_end.copy()
    while True:
        searching = low < high
        if not searching.any():
            break
        middle = (low + high) // 2
        late = searching & (kid_end[np.minimum(middle, m - 1)] > cursor)
        low = np.where(late, middle + 1, low)
        high = np.where(searching & ~late, middle, high)
    # A child ending within the precision after the cursor must still start before it: where
    # the first candidate does not, the first later one in the run that does.
    following = low
    inside = following < run_end
    blocked = np.flatnonzero(inside & (kid_start[np.minimum(following, m - 1)] >= kid_start))
    following[blocked] = _first_below(
        kid_start, following[blocked] + 1, run_end[blocked], kid_start[blocked]
    )
    return np.where(following < run_end, following, _NONE)


def _first_below(values: IntArray, low: IntArray, high: IntArray, bound: IntArray) -> IntArray:
    """Per query, the first index in ``[low, high)`` whose value is below ``bound`` (``high``
    for none).

    Each query jumps over the largest aligned block of ``values`` (1, 2, 4, ... long, minima
    precomputed) that lies before ``high`` and holds nothing below its bound: its blocks grow
    until one holds the answer or would pass ``high``, then shrink into it, so a query takes
    at most twice log2(len(values)) jumps however many equal neighbours it passes.
    """
    minima = [values]
    while len(minima[-1]) > 1:
        level = minima[-1]
        if len(level) % 2:
            level = np.append(level, np.iinfo(np.int64).max)
        minima.append(np.minimum(level[0::2], level[1::2]))
    position = low.copy()
    active = np.flatnonzero(position < high)
    while len(active):
        at, end, below = position[active], high[active], bound[active]
        jump = np.zeros(len(active), dtype=np.int64)
        for k in range(len(minima) - 1, -1, -1):
            size = 1 << k
            fits = np.flatnonzero((jump == 0) & (at % size == 0) & (at + size <= end))
            clear = minima[k][at[fits] >> k] >= below[fits]
            jump[fits[clear]] = size
        position[active] = at + jump
        active = active[(jump > 0) & (at + jump < end)]
    return position

"""The waterfall of one trace: nesting, self time and critical path (pure: stdlib only).

Definitions, for the spans of one trace as stored (one row per stored span):

- *Nesting*: a span sits under the span whose id is its ``parent_span_id``. A span whose parent
  was not received is an *orphan* and is shown at the top level, marked; so is a span hanging
  under a cycle of parent ids (the cycle is cut at its earliest span). Siblings are ordered by
  start time (then span id), and rows come depth first, as a waterfall reads top to bottom.
- *Self time*: the span's duration minus the union of its direct children's intervals, each
  clipped to the span. Children that overlap one another are subtracted once; a child partly
  outside its parent only for the part inside. So children running one after another inside
  their parent leave duration minus their durations, and self time is never negative. (Unlike
  the stage shares of ``latencyboard.rollups.stage_share_minutes``, a call into another
  pipeline's root is subtracted here too: a waterfall shows the whole trace, whoever's spans
  they are.)
- *Critical path*: the spans that decide when the trace ends, as tracing tools define it. It
  starts at the root (the top-level span without a parent id that ends last; when no such span
  was received, the top-level span that ends last). Walking back from a span's end: the child
  that finishes last is on the path, then the last child that finishes before that child
  starts, and so on; the path goes into each chosen child the same way, and time where no
  chosen child runs is the span's own. So sequential stages are all on the path and, of
  overlapping children, the ones that gate the end. A child is taken only within its parent's
  interval (a clock-skewed child that starts before its parent or ends after it is clamped to
  it; one wholly outside is never taken), a zero-length child held nothing up and is never
  taken, and among children finishing at the same moment the longest is taken. The path's
  segments tile the root's interval: their durations sum to the root's duration.

Times are integer nanoseconds on any common origin (Unix time in practice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

STORED_PRECISION_NS = 999
"""Starts are stored to the microsecond, durations to the nanosecond: a child that follows
another exactly (a derived stage after the one before it) may seem to overlap it by less than a
microsecond. The critical path takes a child ending that little after the cursor as ending at it."""


@dataclass(frozen=True, slots=True)
class SpanTiming:
    """What the waterfall needs of one span: its id, its parent's id and its interval."""

    span_id: int
    parent_span_id: int | None
    start_ns: int
    duration_ns: int

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True, slots=True)
class WaterfallRow:
    """One span's place in the waterfall; ``index`` is its position in the input.

    ``parent`` is the index of the span it is drawn under (None at the top level),
    ``offset_ns`` its start relative to the trace's start, ``orphan`` whether it is at the
    top level although it names a parent, ``critical_ns`` the critical path's time in this
    span itself (0 when the path only passes through it, or not at all).
    """

    index: int
    parent: int | None
    depth: int
    offset_ns: int
    duration_ns: int
    self_ns: int
    orphan: bool
    critical: bool
    critical_ns: int


@dataclass(frozen=True, slots=True)
class CriticalSegment:
    """A stretch ``[start_ns, end_ns)`` of the critical path spent in the span at ``index``
    itself (no chosen child of it running)."""

    index: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class Waterfall:
    """Rows depth first; the trace spans ``start_ns`` to ``end_ns`` (earliest start, latest
    end of any span); ``critical_path`` lists the input indexes of the spans on it in row
    order (the root first); ``critical_segments`` is the path in time order."""

    rows: tuple[WaterfallRow, ...]
    start_ns: int
    end_ns: int
    critical_path: tuple[int, ...]
    critical_segments: tuple[CriticalSegment, ...]

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def union_ns(intervals: Sequence[tuple[int, int]], low: int, high: int) -> int:
    """Length of the union of ``(start, end)`` intervals, each clipped to ``[low, high]``."""
    clipped = sorted(
        (max(start, low), min(end, high)) for start, end in intervals if start < high and end > low
    )
    total, reach = 0, low
    for start, end in clipped:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def build(spans: Sequence[SpanTiming]) -> Waterfall:
    """The waterfall of one trace's spans (see the module docstring for the definitions)."""
    if not spans:
        return Waterfall(rows=(), start_ns=0, end_ns=0, critical_path=(), critical_segments=())

    def order(i: int) -> tuple[int, int, int]:
        return spans[i].start_ns, spans[i].span_id, i

    # A span id stored twice (a span re-sent with another start time) takes its children
    # under its first copy; the later copy is drawn as a sibling of it.
    first_with_id: dict[int, int] = {}
    for i in sorted(range(len(spans)), key=order):
        first_with_id.setdefault(spans[i].span_id, i)
    parent_of: list[int | None] = []
    for i, span in enumerate(spans):
        parent = None if span.parent_span_id is None else first_with_id.get(span.parent_span_id)
        parent_of.append(None if parent == i else parent)
    children: list[list[int]] = [[] for _ in spans]
    for i, parent in enumerate(parent_of):
        if parent is not None:
            children[parent].append(i)
    for kids in children:
        kids.sort(key=order)

    top = [i for i in sorted(range(len(spans)), key=order) if parent_of[i] is None]
    placed: dict[int, tuple[int | None, int]] = {}  # index -> (drawn under, depth)
    sequence: list[int] = []
    _walk(top, children, placed, sequence)
    # Whatever the walk missed hangs under a cycle of parent ids: cut it at its earliest span.
    for i in sorted(range(len(spans)), key=order):
        if i not in placed:
            top.append(i)
            _walk([i], children, placed, sequence)

    start = min(span.start_ns for span in spans)
    end = max(span.end_ns for span in spans)
    on_path, segments = _critical_path(spans, top, children, placed)
    critical_ns = dict.fromkeys(on_path, 0)
    for segment in segments:
        critical_ns[segment.index] += segment.end_ns - segment.start_ns
    rows = []
    for i in sequence:
        span = spans[i]
        drawn_under, depth = placed[i]
        covered = [(spans[k].start_ns, spans[k].end_ns) for k in children[i] if placed[k][0] == i]
        rows.append(
            WaterfallRow(
                index=i,
                parent=drawn_under,
                depth=depth,
                offset_ns=span.start_ns - start,
                duration_ns=span.duration_ns,
                self_ns=span.duration_ns - union_ns(covered, span.start_ns, span.end_ns),
                orphan=drawn_under is None and span.parent_span_id is not None,
                critical=i in on_path,
                critical_ns=critical_ns.get(i, 0),
            )
        )
    return Waterfall(
        rows=tuple(rows),
        start_ns=start,
        end_ns=end,
        critical_path=tuple(i for i in sequence if i in on_path),
        critical_segments=segments,
    )


def _walk(
    roots: Sequence[int],
    children: Sequence[Sequence[int]],
    placed: dict[int, tuple[int | None, int]],
    sequence: list[int],
) -> None:
    """Depth-first from ``roots`` (iteratively: a trace may be thousands of levels deep),
    skipping spans already placed."""
    stack: list[tuple[int, int | None, int]] = [(i, None, 0) for i in reversed(roots)]
    while stack:
        i, parent, depth = stack.pop()
        if i in placed:
            continue
        placed[i] = (parent, depth)
        sequence.append(i)
        stack.extend((k, i, depth + 1) for k in reversed(children[i]) if k not in placed)


def _critical_path(
    spans: Sequence[SpanTiming],
    top: Sequence[int],
    children: Sequence[Sequence[int]],
    placed: dict[int, tuple[int | None, int]],
) -> tuple[set[int], tuple[CriticalSegment, ...]]:
    """The spans on the critical path (a span whose children cover all of its part of the
    path has no segment of its own, yet is on it) and the path's segments in time order."""
    roots = [i for i in top if spans[i].parent_span_id is None] or list(top)
    # Latest end first; then the earliest start, the longest span, is the one to follow.
    root = max(roots, key=lambda i: (spans[i].end_ns, -spans[i].start_ns, -i))
    chosen = {root}
    segments: list[CriticalSegment] = []
    # Each span is walked within its interval as clamped to its parent's; a work list rather
    # than recursion, as a trace may be thousands of levels deep.
    work = [(root, spans[root].start_ns, spans[root].end_ns)]
    while work:
        i, low, high = work.pop()
        clamped = sorted(
            (
                (min(spans[k].end_ns, high), max(spans[k].start_ns, low), k)
                for k in children[i]
                if placed[k][0] == i
            ),
            key=lambda child: (-child[0], child[1], child[2]),
        )
        cursor = high
        for child_end, child_start, k in clamped:
            if child_end > cursor + STORED_PRECISION_NS:
                continue
            child_end = min(child_end, cursor)
            if child_end <= child_start:
                continue
            if child_end < cursor:
                segments.append(CriticalSegment(i, child_end, cursor))
            chosen.add(k)
            work.append((k, child_start, child_end))
            cursor = child_start
        if low < cursor:
            segments.append(CriticalSegment(i, low, cursor))
    return chosen, tuple(sorted(segments, key=lambda segment: segment.start_ns))

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
  the stage shares of ``latencyboard.rollups.shares``, a call into another pipeline's root is
  subtracted here too: a waterfall shows the whole trace, whoever's spans they are.)
- *Critical path*: the chain of spans that decides when the trace ends. It starts at the root
  (the top-level span without a parent id that ends last; when no such span was received, the
  top-level span that ends last) and repeatedly follows the child that finishes last. A child's
  finish counts only up to its parent's end, since a child that outlives its parent cannot have
  held it up, and a child starting after its parent ended is never followed. Among children
  finishing at the same moment the one that started last is followed: the parent was waiting
  for it, not for the earlier ones.

Times are integer nanoseconds on any common origin (Unix time in practice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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
    top level although it names a parent.
    """

    index: int
    parent: int | None
    depth: int
    offset_ns: int
    duration_ns: int
    self_ns: int
    orphan: bool
    critical: bool


@dataclass(frozen=True, slots=True)
class Waterfall:
    """Rows depth first; the trace spans ``start_ns`` to ``end_ns`` (earliest start, latest
    end of any span); ``critical_path`` lists input indexes from the root down."""

    rows: tuple[WaterfallRow, ...]
    start_ns: int
    end_ns: int
    critical_path: tuple[int, ...]

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
        return Waterfall(rows=(), start_ns=0, end_ns=0, critical_path=())

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
    path = _critical_path(spans, top, children, placed)
    on_path = set(path)
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
            )
        )
    return Waterfall(rows=tuple(rows), start_ns=start, end_ns=end, critical_path=path)


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
) -> tuple[int, ...]:
    roots = [i for i in top if spans[i].parent_span_id is None] or list(top)
    # Latest end first; then the earliest start, the longest span, is the one to follow.
    current = max(roots, key=lambda i: (spans[i].end_ns, -spans[i].start_ns, -i))
    path = [current]
    while True:
        end = spans[current].end_ns
        followed = [
            k for k in children[current] if placed[k][0] == current and spans[k].start_ns <= end
        ]
        if not followed:
            return tuple(path)
        current = max(followed, key=lambda k: (min(spans[k].end_ns, end), spans[k].start_ns, -k))
        path.append(current)

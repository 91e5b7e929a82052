"""How much of the span table a comparison reads (pure: stdlib only).

Reading every span of a busy pipeline's day costs seconds (the demo's fraud-scorer writes about
9 M spans a day), so each side of a comparison is a **uniform random sample** of its spans,
of at most :data:`MAX_SPANS_PER_SIDE` spans (all stages together), read in a bounded amount of
work:

* A window with fewer than :data:`READ_ALL_BELOW` spans of the pipeline is read whole,
  through the ``(pipeline_id, start_time)`` index: the sample is every span.
* Otherwise PostgreSQL's ``TABLESAMPLE SYSTEM (rate) REPEATABLE (seed)`` reads a fraction
  ``rate`` of the table blocks of the partitions the window touches, chosen by a hash of the
  block number and the seed, and keeps every matching row in them; a side that needs fewer
  spans than the scan's rate yields is then thinned by a hash of the span id (``keep``). Each
  span is in the sample with the same probability, ``rate * keep``, whatever its stage, time
  or attributes: a uniform sample. The rate comes from a pilot scan of
  :data:`PILOT_BLOCKS` blocks that estimates how many spans each side has, and is capped so
  that no scan reads more than :data:`MAX_BLOCKS_PER_SCAN` blocks (a pipeline that is a small
  part of a big table then gets fewer spans than the cap, and says so).

The sampling unit is a block, so spans written together (one export batch, one backfilled
hour of one span kind) are sampled together. The statistics treat spans as independent, which
holds as long as latency does not cluster within the few seconds a block covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

MAX_SPANS_PER_SIDE: Final = 20_000
"""Spans per side, all stages together: about 2,900 per series of the demo's pipelines (six
stages and end to end), so p99 rests on some 29 spans beyond it on each side."""
READ_ALL_BELOW: Final = MAX_SPANS_PER_SIDE
"""A window with fewer spans of the pipeline than this fits under the cap and is read whole,
through the index."""
MAX_BLOCKS_PER_SCAN: Final = 2_000
"""Table blocks (8 kB) one sampled scan may read: 16 MB, what keeps a call within ~150 ms.
Two windows are two scans; two values of an attribute in one window share one."""
PILOT_BLOCKS: Final = 300
"""Blocks the pilot scan reads to estimate how many spans each side has."""
HEADROOM: Final = 1.05
"""Sample a little above the cap, then trim to it, so a side usually gets the full cap."""


@dataclass(frozen=True)
class ScanPlan:
    """One sampled scan: read ``rate`` of the blocks, keep ``keeps[side]`` of each side's
    matching rows (by a hash of the span id)."""

    rate: float
    keeps: tuple[float, ...]

    def fraction(self, side: int) -> float:
        """Probability that a span of ``side`` is in the sample."""
        return self.rate * self.keeps[side]


def pilot_rate(blocks: int) -> float:
    """Block fraction of the pilot scan over partitions of ``blocks`` blocks in all."""
    return 1.0 if blocks <= PILOT_BLOCKS else PILOT_BLOCKS / blocks


def plan_scan(blocks: int, pilot: float, pilot_counts: Sequence[int]) -> ScanPlan:
    """The sampled scan of partitions of ``blocks`` blocks for sides whose pilot scan, at block
    fraction ``pilot``, found ``pilot_counts`` spans each.

    A side the pilot missed entirely is rare, so the scan reads as much as it may for it.
    """
    if not pilot_counts:
        raise ValueError("a scan serves at least one side")
    target = MAX_SPANS_PER_SIDE * HEADROOM
    estimates = [count / pilot if count else None for count in pilot_counts]
    budget = 1.0 if blocks <= MAX_BLOCKS_PER_SCAN else MAX_BLOCKS_PER_SCAN / blocks
    wanted = [1.0 if estimate is None else target / estimate for estimate in estimates]
    rate = min(1.0, budget, max(wanted))
    keeps = tuple(
        1.0 if estimate is None else min(1.0, target / (estimate * rate)) for estimate in estimates
    )
    return ScanPlan(rate, keeps)

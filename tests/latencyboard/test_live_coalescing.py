"""Coalescing touched minutes into few live events (pure)."""

from __future__ import annotations

from latencyboard.live.coalescing import Coalescer, Touched


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_touch_goes_out_at_once_and_later_ones_wait_for_the_interval_merged():
    clock = Clock()
    coalescer = Coalescer(1.0, clock)

    coalescer.add([Touched(1, 9, 600, 600), Touched(2, 9, 660, 660)])
    first = coalescer.due()
    clock.now += 0.5
    coalescer.add([Touched(1, 9, 540, 600)])
    clock.now += 0.25
    coalescer.add([Touched(1, 9, 600, 720)])
    early = coalescer.due()
    clock.now += 0.25
    late = coalescer.due()

    assert first == [Touched(1, 9, 600, 600), Touched(2, 9, 660, 660)]
    assert early == []
    assert late == [Touched(1, 9, 540, 720)]


def test_drain_lets_everything_out_whatever_the_interval():
    clock = Clock()
    coalescer = Coalescer(1.0, clock)
    coalescer.add([Touched(1, 9, 600, 600)])
    coalescer.due()
    coalescer.add([Touched(1, 9, 660, 660)])

    assert coalescer.due() == []
    assert coalescer.drain() == [Touched(1, 9, 660, 660)]
    assert coalescer.drain() == []

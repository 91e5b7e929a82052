"""Encoding many sketches at once: byte for byte what each sketch's ``to_bytes`` writes."""

from __future__ import annotations

import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from latencyboard.sketches.buckets import MIN_VALUE
from latencyboard.sketches.sketch import Sketch, merge_many, sketches_by_group, to_bytes_many

latencies = st.one_of(
    st.floats(min_value=MIN_VALUE, max_value=1e12),
    st.floats(min_value=0.0, max_value=MIN_VALUE, exclude_max=True),
)


def scaled(value: float, factor: int) -> Sketch:
    """A sketch of ``factor`` times ``value``, built by doubling merges: every count width
    is reached without adding billions of values."""
    result = Sketch()
    power = Sketch.from_values([value])
    while factor:
        if factor & 1:
            result.merge(power)
        doubled = Sketch()
        doubled.merge(power)
        doubled.merge(power)
        power, factor = doubled, factor >> 1
    return result


@given(st.lists(st.lists(latencies, max_size=40), max_size=30))
def test_many_sketches_encode_exactly_as_each_one(value_lists: list[list[float]]) -> None:
    sketches = [Sketch.from_values(values) for values in value_lists]

    blobs = to_bytes_many(sketches)

    assert blobs == [sketch.to_bytes() for sketch in sketches]


def test_edge_sketches_encode_exactly_as_each_one() -> None:
    far_apart = Sketch.from_values([1e-3, 1e9])
    holes = merge_many([Sketch.from_values([10.0]), Sketch.from_values([10.5, 30.0])])
    sketches = [
        Sketch(),
        Sketch.from_values([0.0, 0.0]),
        Sketch.from_values([0.0, 5.0]),
        Sketch.from_values([7.0]),
        Sketch.from_values([sys.float_info.max, MIN_VALUE]),
        far_apart,
        holes,
        Sketch(),
        # Counts on each side of every width limit, dense (one bucket) and sparse.
        *(scaled(5.0, n) for n in (255, 256, 65_535, 65_536, 2**32 - 1, 2**32)),
        *(merge_many([far_apart, scaled(9.0, n)]) for n in (255, 256, 65_536, 2**32)),
    ]

    blobs = to_bytes_many(sketches)

    assert blobs == [sketch.to_bytes() for sketch in sketches]
    assert [Sketch.from_bytes(blob).to_bytes() for blob in blobs] == blobs


def test_a_fold_of_sketches_encodes_exactly_as_each_one() -> None:
    rng = np.random.default_rng(12)
    groups = rng.integers(0, 5_000, size=40_000)
    values = np.where(rng.random(40_000) < 0.01, 0.0, rng.lognormal(3.0, 2.0, size=40_000))
    sketches = list(sketches_by_group(groups, values).values())

    blobs = to_bytes_many(sketches)

    assert blobs == [sketch.to_bytes() for sketch in sketches]


def test_no_sketches_encode_to_no_blobs() -> None:
    assert to_bytes_many([]) == []

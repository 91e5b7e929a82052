"""The sketch and its sibling modules: accuracy against numpy, merging, serialization,
grouping."""

from __future__ import annotations

import itertools
import math
import struct
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from latencyboard.sketches import batch as sketch_batch
from latencyboard.sketches.batch import GroupSummaries, SketchBatch, group_summaries
from latencyboard.sketches.buckets import GAMMA, MIN_VALUE, RELATIVE_ERROR
from latencyboard.sketches.format import FORMAT_VERSION
from latencyboard.sketches.sketch import QuantileMethod, Sketch, merge_many, sketches_by_group

DASHBOARD_QUANTILES = [0.5, 0.9, 0.95, 0.99, 0.999]
# A value sitting exactly on a bucket boundary can land in the neighbouring bucket through
# float rounding in log(), which exceeds the bound by ~1e-15 relative; allow for that only.
BOUND = RELATIVE_ERROR * (1 + 1e-9)
# Mirrors the documented version-1 header layout.
HEADER = struct.Struct("<BBQQdddiI")
HEADER_FIELDS = ("version", "flags", "count", "zero_count", "sum", "min", "max", "first_key", "n")

# Latencies from the zero bucket up to ~30 years, so sums never overflow float64.
latencies = st.one_of(
    st.floats(min_value=MIN_VALUE, max_value=1e12),
    st.floats(min_value=0.0, max_value=MIN_VALUE, exclude_max=True),
)
latency_lists = st.lists(latencies, max_size=300)
quantile_levels = st.floats(min_value=0.0, max_value=1.0)


def lognormal(rng: np.random.Generator, size: int) -> np.ndarray:
    """Inference latencies around 50 ms with a long right tail."""
    return rng.lognormal(np.log(50.0), 1.0, size)


def pareto_tailed(rng: np.random.Generator, size: int) -> np.ndarray:
    """Lomax (Pareto II, shape 1.5) above a 10 ms floor: infinite variance, very heavy tail."""
    return (rng.pareto(1.5, size) + 1.0) * 10.0


def bimodal(rng: np.random.Generator, size: int) -> np.ndarray:
    """70% cache hits around 20 ms, 30% misses around 400 ms."""
    slow = rng.random(size) < 0.3
    return np.where(
        slow, rng.lognormal(np.log(400.0), 0.4, size), rng.lognormal(np.log(20.0), 0.3, size)
    )


DISTRIBUTIONS = {"lognormal": lognormal, "pareto": pareto_tailed, "bimodal": bimodal}
ACCURACY_CASES = [
    pytest.param(name, size, seed, id=f"{name}-n{size}-seed{seed}")
    for name in DISTRIBUTIONS
    for size in (1_000, 1_500, 10_000, 100_000)
    for seed in (0, 1, 2)
]


def relative_errors(estimates: np.ndarray, exact: np.ndarray) -> np.ndarray:
    return np.abs(estimates - exact) / exact


def assert_same_sketch(actual: Sketch, expected: Sketch) -> None:
    """Everything equal except ``sum``, which depends on the order of float additions."""
    actual_keys, actual_counts = actual.buckets()
    expected_keys, expected_counts = expected.buckets()
    assert actual_keys.tolist() == expected_keys.tolist()
    assert actual_counts.tolist() == expected_counts.tolist()
    assert actual.count == expected.count
    assert actual.zero_count == expected.zero_count
    assert actual.sum == pytest.approx(expected.sum, rel=1e-9, abs=1e-12)
    assert_same_float(actual.min, expected.min)
    assert_same_float(actual.max, expected.max)


def assert_same_float(actual: float, expected: float) -> None:
    assert actual == expected or (math.isnan(actual) and math.isnan(expected))


def replace_header(blob: bytes, **changes: float) -> bytes:
    fields = dict(zip(HEADER_FIELDS, HEADER.unpack_from(blob), strict=True))
    fields.update(changes)
    return HEADER.pack(*fields.values()) + blob[HEADER.size :]


# --- accuracy ---------------------------------------------------------------------------


@pytest.mark.parametrize(("distribution", "size", "seed"), ACCURACY_CASES)
def test_quantiles_are_within_relative_error_of_numpy_lower(
    distribution: str, size: int, seed: int
) -> None:
    # Given a window of latencies
    values = DISTRIBUTIONS[distribution](np.random.default_rng(seed), size)
    # When it is sketched
    sketch = Sketch.from_values(values)
    # Then every dashboard quantile is within the bound of numpy's lower order statistic
    exact = np.quantile(values, DASHBOARD_QUANTILES, method="lower")
    errors = relative_errors(sketch.quantiles(DASHBOARD_QUANTILES), exact)
    assert errors.max() <= BOUND, dict(zip(DASHBOARD_QUANTILES, errors, strict=True))


@pytest.mark.parametrize(("distribution", "size", "seed"), ACCURACY_CASES)
def test_linear_quantiles_are_within_relative_error_of_numpy_default(
    distribution: str, size: int, seed: int
) -> None:
    # Given a window of latencies
    values = DISTRIBUTIONS[distribution](np.random.default_rng(seed), size)
    # When it is sketched
    sketch = Sketch.from_values(values)
    # Then linear quantiles are within the bound of numpy's default (linear) quantiles
    exact = np.quantile(values, DASHBOARD_QUANTILES)
    errors = relative_errors(sketch.quantiles(DASHBOARD_QUANTILES, method="linear"), exact)
    assert errors.max() <= BOUND, dict(zip(DASHBOARD_QUANTILES, errors, strict=True))


@given(values=latency_lists.filter(bool), q=quantile_levels)
def test_any_quantile_of_any_data_is_within_bound(values: list[float], q: float) -> None:
    # Given any non-empty data and any quantile level
    sketch = Sketch.from_values(values)
    # Values in the zero bucket are only accurate to MIN_VALUE in absolute terms
    slack = MIN_VALUE if min(values) < MIN_VALUE else 0.0
    for method in ("lower", "linear"):
        # When the quantile is estimated
        estimate = sketch.quantile(q, method=method)
        # Then it is within the relative bound of numpy's answer under the same convention
        exact = float(np.quantile(values, q, method=method))
        assert abs(estimate - exact) <= BOUND * exact + slack, method


def test_lower_and_linear_conventions_differ_across_a_gap() -> None:
    # Given two equally large modes, so the median falls between them
    values = np.array([1.0] * 500 + [100.0] * 500)
    sketch = Sketch.from_values(values)
    # When the median is estimated under each convention
    lower, linear = sketch.quantile(0.5), sketch.quantile(0.5, method="linear")
    # Then each matches numpy under the same convention, and they are far apart
    assert float(np.quantile(values, 0.5, method="lower")) == 1.0
    assert float(np.quantile(values, 0.5)) == 50.5
    assert lower == 1.0
    assert abs(linear - 50.5) <= BOUND * 50.5


def test_buckets_use_the_ddsketch_key_and_estimator() -> None:
    # Given three equal values between two others, in a bucket away from any boundary
    sketch = Sketch.from_values([0.5, 3.0, 3.0, 3.0, 100.0])
    key = math.ceil(math.log(3.0) / math.log(GAMMA))
    # Then they share key ceil(log_gamma 3) and the median reports 2 gamma^k / (gamma + 1)
    assert sketch.buckets()[0].tolist() == [
        math.ceil(math.log(0.5) / math.log(GAMMA)),
        key,
        math.ceil(math.log(100.0) / math.log(GAMMA)),
    ]
    assert sketch.quantile(0.5) == pytest.approx(2 * GAMMA**key / (GAMMA + 1), rel=1e-12)


def test_quantiles_match_quantile_and_keep_the_shape_of_qs() -> None:
    # Given a sketch
    sketch = Sketch.from_values(lognormal(np.random.default_rng(7), 5_000))
    levels = np.array([[0.0, 0.25], [0.5, 1.0]])
    # When several quantiles are asked for at once
    result = sketch.quantiles(levels)
    # Then the result has the shape of the request and equals the one-at-a-time answers
    assert result.shape == (2, 2)
    assert result.tolist() == [[sketch.quantile(q) for q in row] for row in levels.tolist()]


def test_extreme_quantiles_are_the_exact_min_and_max() -> None:
    # Given a sketch of arbitrary values
    values = pareto_tailed(np.random.default_rng(3), 2_000)
    sketch = Sketch.from_values(values)
    # When q = 0 and q = 1 are asked for, under both conventions
    # Then the exact extremes come back
    assert sketch.quantiles([0.0, 1.0]).tolist() == [values.min(), values.max()]
    assert sketch.quantiles([0.0, 1.0], method="linear").tolist() == [values.min(), values.max()]


# --- edge cases -------------------------------------------------------------------------


def test_empty_sketch_reports_nan() -> None:
    # Given an empty sketch
    sketch = Sketch()
    # Then counts are zero and min, max and every quantile are NaN
    assert (sketch.count, sketch.zero_count, sketch.sum) == (0, 0, 0.0)
    assert math.isnan(sketch.min)
    assert math.isnan(sketch.max)
    assert math.isnan(sketch.quantile(0.5))
    assert np.isnan(sketch.quantiles([0.0, 0.5, 1.0], method="linear")).all()
    assert sketch.buckets()[0].size == 0


def test_adding_no_values_keeps_the_sketch_empty() -> None:
    sketch = Sketch.from_values(np.array([]))
    assert sketch.count == 0
    assert math.isnan(sketch.min)


@pytest.mark.parametrize("value", [0.0, MIN_VALUE / 2, MIN_VALUE, 0.37, 1e7, sys.float_info.max])
def test_single_value_is_returned_exactly_for_every_quantile(value: float) -> None:
    # Given a sketch of one value
    sketch = Sketch.from_values([value])
    # Then every quantile is that value
    assert sketch.quantiles([0.0, 0.5, 0.99, 1.0]).tolist() == [value] * 4
    assert (sketch.count, sketch.min, sketch.max, sketch.sum) == (1, value, value, value)


def test_zeros_go_to_the_zero_bucket() -> None:
    # Given zeros, sub-nanosecond values and ordinary latencies
    sketch = Sketch.from_values([0.0, 0.0, 0.0, MIN_VALUE / 10, 5.0, 6.0])
    # Then the zero bucket counts the four values below MIN_VALUE
    assert sketch.zero_count == 4
    assert sketch.buckets()[1].tolist() == [1, 1]
    # And low quantiles report 0.0 (clamped to the exact min, here 0.0)
    assert sketch.quantiles([0.0, 0.2, 0.6]).tolist() == [0.0, 0.0, 0.0]
    assert abs(sketch.quantile(0.8) - 5.0) <= BOUND * 5.0


def test_zero_bucket_estimates_are_clamped_to_the_minimum() -> None:
    # Given only sub-nanosecond values
    sketch = Sketch.from_values([2e-7, 3e-7, 4e-7])
    # Then quantiles never drop below the exact minimum
    assert sketch.quantiles([0.0, 0.5, 1.0]).tolist() == [2e-7, 2e-7, 4e-7]


def test_huge_latencies_are_accurate() -> None:
    # Given latencies up to three hours (1e7 ms) and beyond
    values = np.geomspace(1.0, 1e9, 10_001)
    sketch = Sketch.from_values(values)
    # Then quantiles stay within the bound
    exact = np.quantile(values, DASHBOARD_QUANTILES, method="lower")
    assert relative_errors(sketch.quantiles(DASHBOARD_QUANTILES), exact).max() <= BOUND
    assert relative_errors(sketch.quantiles([0.5]), np.array([np.median(values)]))[0] <= BOUND


@pytest.mark.filterwarnings("ignore:overflow encountered in reduce:RuntimeWarning")
def test_largest_float_does_not_overflow_to_inf() -> None:
    # Given the largest float64 twice next to a small value (the sum overflows, as in numpy)
    sketch = Sketch.from_values([1.0, sys.float_info.max, sys.float_info.max])
    assert sketch.sum == math.inf
    # Then its bucket estimate (which would overflow) is clamped to the exact max
    assert sketch.quantiles([0.5, 1.0]).tolist() == [sys.float_info.max] * 2
    assert Sketch.from_bytes(sketch.to_bytes()).quantile(0.5) == sys.float_info.max


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param([1.0, -0.5], id="negative"),
        pytest.param([1.0, math.nan], id="nan"),
        pytest.param([math.inf], id="inf"),
        pytest.param([-math.inf, 3.0], id="negative-inf"),
    ],
)
def test_invalid_values_raise_and_leave_the_sketch_unchanged(bad: list[float]) -> None:
    # Given a sketch with data
    sketch = Sketch.from_values([1.0, 2.0])
    before = sketch.to_bytes()
    # When invalid values are added
    with pytest.raises(ValueError, match="finite and >= 0"):
        sketch.add(bad)
    # Then nothing was recorded
    assert sketch.to_bytes() == before


@pytest.mark.parametrize(
    "q",
    [
        pytest.param(-0.01, id="below-0"),
        pytest.param(1.01, id="above-1"),
        pytest.param(math.nan, id="nan"),
    ],
)
def test_quantile_level_outside_unit_interval_raises(q: float) -> None:
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        Sketch.from_values([1.0]).quantile(q)


def test_unknown_quantile_method_raises() -> None:
    with pytest.raises(ValueError, match="unknown quantile method 'nearest'"):
        Sketch.from_values([1.0]).quantiles([0.5], method="nearest")  # type: ignore[arg-type]


def test_adding_in_batches_equals_adding_at_once() -> None:
    # Given values added in three batches, one of them two-dimensional
    rng = np.random.default_rng(11)
    first, second, third = lognormal(rng, 300), bimodal(rng, 200).reshape(20, 10), np.zeros(5)
    sketch = Sketch.from_values(first)
    sketch.add(second)
    sketch.add(third)
    # Then it equals the sketch of all values at once
    assert_same_sketch(sketch, Sketch.from_values(np.concatenate([first, second.ravel(), third])))


# --- merging ----------------------------------------------------------------------------


@given(values=latency_lists, cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=6))
def test_merging_parts_equals_sketching_the_whole(values: list[float], cuts: list[int]) -> None:
    # Given the data split into consecutive (possibly empty) parts
    bounds = [0, *sorted(min(cut, len(values)) for cut in cuts), len(values)]
    parts = [Sketch.from_values(values[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    whole = Sketch.from_values(values)
    # When the parts are merged one by one
    merged = Sketch()
    for part in parts:
        merged.merge(part)
    # Then the result equals the sketch of the whole
    assert_same_sketch(merged, whole)
    # And so does merge_many over sketches, over blobs, and over a mix of both
    assert_same_sketch(merge_many(parts), whole)
    assert_same_sketch(merge_many(part.to_bytes() for part in parts), whole)
    mixed = [part if index % 2 else part.to_bytes() for index, part in enumerate(parts)]
    assert_same_sketch(merge_many(mixed), whole)


def test_merge_leaves_the_other_sketch_untouched() -> None:
    # Given two sketches with overlapping key ranges
    left, right = Sketch.from_values([1.0, 2.0]), Sketch.from_values([1.5, 300.0])
    before = right.to_bytes()
    # When one is merged into the other and the result is grown further
    left.merge(right)
    left.add([1.5, 0.5, 900.0])
    # Then the merged-in sketch did not change
    assert right.to_bytes() == before
    assert left.count == 7


def test_merging_a_sketch_into_itself_doubles_it() -> None:
    sketch = Sketch.from_values([1.0, 2.0, 2.0, 0.0])
    sketch.merge(sketch)
    assert sketch.buckets()[1].tolist() == [2, 4]
    assert (sketch.count, sketch.zero_count, sketch.sum) == (8, 2, 10.0)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param([], [3.0, 4.0], id="empty-into-data"),
        pytest.param([3.0, 4.0], [], id="data-into-empty"),
        pytest.param([], [], id="empty-into-empty"),
        pytest.param([0.0], [5.0], id="zeros-only-into-data"),
    ],
)
def test_merging_with_empty_sides(left: list[float], right: list[float]) -> None:
    merged = Sketch.from_values(left)
    merged.merge(Sketch.from_values(right))
    assert_same_sketch(merged, Sketch.from_values(left + right))


def test_merge_many_of_nothing_is_empty() -> None:
    assert merge_many([]).count == 0


def test_merge_many_names_the_invalid_item() -> None:
    # Given valid sketches and blobs with one truncated blob at position 2
    good = Sketch.from_values([1.0, 2.0])
    items: list[Sketch | bytes] = [good, good.to_bytes(), good.to_bytes()[:-1], good]
    # Then the error names that position
    with pytest.raises(ValueError, match=r"\(item 2\): truncated or over-long"):
        merge_many(items)


def test_merge_many_of_a_week_of_minutes_equals_the_whole_week() -> None:
    # Given a week of per-minute sketches with varying layouts, widths and empty minutes
    rng = np.random.default_rng(5)
    minutes = [lognormal(rng, int(rng.integers(0, 300))) for _ in range(10_080)]
    minutes[17] = np.zeros(70_000)  # a two-byte zero count next to one-byte buckets
    blobs = [Sketch.from_values(values).to_bytes() for values in minutes]
    # When they are merged from their blobs
    week = merge_many(blobs)
    # Then the result equals the sketch of all the values
    assert_same_sketch(week, Sketch.from_values(np.concatenate(minutes)))


# --- serialization ----------------------------------------------------------------------


@given(values=latency_lists)
def test_serialization_round_trips_exactly(values: list[float]) -> None:
    # Given a sketch
    sketch = Sketch.from_values(values)
    # When it is serialized and decoded
    blob = sketch.to_bytes()
    decoded = Sketch.from_bytes(blob)
    # Then every field is identical, sum included, and it re-encodes to the same bytes
    assert_same_sketch(decoded, sketch)
    assert decoded.sum == sketch.sum
    assert decoded.to_bytes() == blob
    assert blob[0] == FORMAT_VERSION


@given(values=latency_lists, data=st.data())
def test_every_truncation_is_rejected(values: list[float], data: st.DataObject) -> None:
    # Given a blob cut short anywhere
    blob = Sketch.from_values(values).to_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(blob) - 1))
    # Then decoding it raises ValueError
    with pytest.raises(ValueError, match="invalid sketch blob"):
        Sketch.from_bytes(blob[:cut])


@given(values=latency_lists, data=st.data())
def test_corrupted_bytes_never_crash_the_decoder(values: list[float], data: st.DataObject) -> None:
    # Given a valid blob with one byte overwritten
    blob = bytearray(Sketch.from_values(values).to_bytes())
    position = data.draw(st.integers(min_value=0, max_value=len(blob) - 1))
    blob[position] = data.draw(st.integers(min_value=0, max_value=255))
    # When it is decoded
    try:
        decoded = Sketch.from_bytes(bytes(blob))
    except ValueError:
        return
    # Then, if accepted, the sketch is self-consistent: counts add up and quantiles lie
    # within [min, max]
    assert decoded.zero_count + int(decoded.buckets()[1].sum()) == decoded.count
    if decoded.count:
        estimates = decoded.quantiles([0.0, 0.5, 1.0])
        assert decoded.min <= estimates.min() <= estimates.max() <= decoded.max


@pytest.mark.parametrize(
    ("count", "size"),
    [
        pytest.param(1, 51, id="one-byte"),
        pytest.param(255, 51, id="one-byte-max"),
        pytest.param(256, 52, id="two-bytes"),
        pytest.param(65_536, 54, id="four-bytes"),
        pytest.param(2**32, 58, id="eight-bytes"),
    ],
)
def test_counts_use_the_narrowest_width(count: int, size: int) -> None:
    # Given one bucket holding `count` values (doubling by self-merges past 2**32)
    sketch = Sketch.from_values(np.full(count if count < 2**32 else 1, 7.0))
    while sketch.count < count:
        sketch.merge(sketch)
    # When serialized
    blob = sketch.to_bytes()
    # Then the header is followed by one count of the narrowest width, and it round-trips
    assert len(blob) == size
    assert Sketch.from_bytes(blob).buckets()[1].tolist() == [count]


def test_far_apart_buckets_are_stored_sparse() -> None:
    # Given two values 349 buckets apart
    sketch = Sketch.from_values([1.0, 1000.0])
    # Then the blob holds two (delta, count) pairs of two bytes, not 350 dense slots
    blob = sketch.to_bytes()
    assert len(blob) == HEADER.size + 2 * 2 * 2
    assert Sketch.from_bytes(blob).buckets()[0].tolist() == sketch.buckets()[0].tolist()


@pytest.mark.parametrize(("size", "limit"), [(100, 256), (10_000, 512)])
def test_log_normal_windows_serialize_compactly(size: int, limit: int) -> None:
    blob = Sketch.from_values(lognormal(np.random.default_rng(1), size)).to_bytes()
    assert len(blob) <= limit


def dense_blob() -> bytes:
    blob = Sketch.from_values([0.0, 10.0, 10.1, 10.3]).to_bytes()
    assert blob[1] == 0  # one-byte counts, dense layout
    return blob


def sparse_blob() -> bytes:
    blob = Sketch.from_values([1.0, 2.0, 2.0, 3.0]).to_bytes()
    assert blob[1] == 0b100  # one-byte values, sparse layout
    return blob


def with_byte(blob: bytes, position: int, value: int) -> bytes:
    return blob[:position] + bytes([value]) + blob[position + 1 :]


CORRUPTIONS = [
    pytest.param(b"", "empty", id="empty-blob"),
    pytest.param(with_byte(dense_blob(), 0, 0), "unsupported format version 0", id="version-0"),
    pytest.param(with_byte(dense_blob(), 0, 2), "unsupported format version 2", id="version-2"),
    pytest.param(b"\x07", "unsupported format version 7", id="lone-unknown-version"),
    pytest.param(dense_blob()[:20], "truncated: header needs 50 bytes", id="cut-in-header"),
    pytest.param(dense_blob()[:-1], "truncated or over-long", id="missing-last-byte"),
    pytest.param(dense_blob() + b"\x00", "truncated or over-long", id="trailing-byte"),
    pytest.param(replace_header(dense_blob(), n=100), "truncated or over-long", id="bad-n"),
    pytest.param(replace_header(dense_blob(), flags=0b1000), "unknown flag bits", id="flag-bit"),
    pytest.param(replace_header(dense_blob(), zero_count=9), "bad count", id="zero-above-count"),
    pytest.param(replace_header(dense_blob(), count=2**63), "bad count", id="count-overflow"),
    pytest.param(replace_header(dense_blob(), count=5), "do not add up", id="count-mismatch"),
    pytest.param(replace_header(dense_blob(), min=20.0), "bad min/max", id="min-above-max"),
    pytest.param(replace_header(dense_blob(), max=math.inf), "bad min/max", id="infinite-max"),
    pytest.param(replace_header(dense_blob(), min=math.nan), "bad min/max", id="nan-min"),
    pytest.param(replace_header(dense_blob(), sum=-1.0), "bad sum", id="negative-sum"),
    pytest.param(replace_header(dense_blob(), max=11.0), "max outside buckets", id="max-key"),
    pytest.param(
        replace_header(dense_blob(), max=MIN_VALUE / 2, min=0.0),
        "max disagrees with buckets",
        id="max-in-zero-bucket",
    ),
    pytest.param(
        replace_header(dense_blob(), min=1.0), "min disagrees with zero_count", id="min-zero"
    ),
    pytest.param(
        replace_header(sparse_blob(), min=1.5), "min outside buckets", id="min-key-sparse"
    ),
    pytest.param(
        replace_header(Sketch().to_bytes(), min=1.0), "empty sketch with data", id="empty-min"
    ),
    pytest.param(
        replace_header(Sketch.from_values([0.0]).to_bytes(), max=1.0),
        "max disagrees with buckets",
        id="zeros-only-large-max",
    ),
    pytest.param(
        replace_header(Sketch.from_values([MIN_VALUE / 2, 1.0]).to_bytes(), first_key=-5000, n=1),
        "bucket key below the minimum",
        id="key-below-minimum",
    ),
    pytest.param(
        with_byte(dense_blob(), len(dense_blob()) - 1, 0),
        "empty bucket at the edge",
        id="dense-edge",
    ),
    pytest.param(
        with_byte(sparse_blob(), HEADER.size, 1), "not strictly increasing", id="first-delta"
    ),
    pytest.param(
        with_byte(sparse_blob(), HEADER.size + 2, 0), "not strictly increasing", id="zero-delta"
    ),
    pytest.param(
        with_byte(sparse_blob(), HEADER.size + 3, 0), "empty sparse bucket", id="zero-count"
    ),
]


@pytest.mark.parametrize(("blob", "reason"), CORRUPTIONS)
def test_corrupted_blobs_are_rejected(blob: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=f"^invalid sketch blob: .*({reason})"):
        Sketch.from_bytes(blob)


def test_bytes_like_blobs_are_accepted() -> None:
    # Given a blob as a database driver may hand it back (bytearray or memoryview)
    sketch = Sketch.from_values([1.0, 2.0, 0.0])
    blob = sketch.to_bytes()
    # Then it decodes and merges like bytes
    assert_same_sketch(Sketch.from_bytes(bytearray(blob)), sketch)
    assert_same_sketch(merge_many([memoryview(blob), bytearray(blob)]), merge_many([blob, blob]))


def test_corruption_fixtures_are_valid_before_corruption() -> None:
    for blob in (dense_blob(), sparse_blob()):
        assert Sketch.from_bytes(blob).to_bytes() == blob


# --- grouping ---------------------------------------------------------------------------


@given(
    pairs=st.lists(
        st.tuples(st.integers(min_value=-(2**62), max_value=2**62) | st.integers(0, 5), latencies),
        max_size=300,
    )
)
def test_sketches_by_group_equals_per_group_sketches(pairs: list[tuple[int, float]]) -> None:
    # Given spans tagged with group ids
    group_ids = np.array([group for group, _ in pairs], dtype=np.int64)
    values = np.array([value for _, value in pairs], dtype=np.float64)
    # When they are sketched per group in one pass
    result = sketches_by_group(group_ids, values)
    # Then there is one sketch per distinct id, equal to sketching that group alone
    assert sorted(result) == sorted(set(group_ids.tolist()))
    for group, sketch in result.items():
        assert_same_sketch(sketch, Sketch.from_values(values[group_ids == group]))


def test_sketches_by_group_on_a_large_batch() -> None:
    # Given a batch of 200k spans over 500 minute-buckets, some minutes only zeros
    rng = np.random.default_rng(9)
    group_ids = rng.integers(0, 500, 200_000).astype(np.uint32)
    values = bimodal(rng, group_ids.size)
    values[group_ids % 50 == 0] = 0.0
    # When grouped
    result = sketches_by_group(group_ids, values)
    # Then every group matches its own sketch
    assert len(result) == 500
    for group, sketch in result.items():
        assert_same_sketch(sketch, Sketch.from_values(values[group_ids == group]))


def test_sketches_by_group_of_nothing_is_empty() -> None:
    assert sketches_by_group(np.array([], dtype=np.int64), np.array([])) == {}


@pytest.mark.parametrize(
    ("group_ids", "values", "error", "message"),
    [
        pytest.param([1, 2], [1.0], ValueError, "equal length", id="length-mismatch"),
        pytest.param([[1, 2]], [[1.0, 2.0]], ValueError, "1-D", id="two-dimensional"),
        pytest.param([1.5, 2.0], [1.0, 2.0], TypeError, "integers", id="float-ids"),
        pytest.param([1, 2], [1.0, -2.0], ValueError, "finite and >= 0", id="negative-value"),
    ],
)
def test_sketches_by_group_rejects_bad_input(
    group_ids: list[object], values: list[object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        sketches_by_group(np.array(group_ids), np.array(values))


# --- group summaries --------------------------------------------------------------------

# Sketch contents that stress the per-group merge: anything, only zero-bucket values, one
# value, one value repeated, nothing at all.
sketch_contents: st.SearchStrategy[list[float]] = st.one_of(
    st.lists(latencies, max_size=40),
    st.lists(
        st.floats(min_value=0.0, max_value=MIN_VALUE, exclude_max=True), min_size=1, max_size=5
    ),
    latencies.map(lambda value: [value]),
    st.tuples(latencies, st.integers(min_value=2, max_value=300)).map(
        lambda pair: [pair[0]] * pair[1]
    ),
    st.just([]),
)
GROUP_LEVELS = [0.0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]
LAYOUTS = ["dense", "sorted"]


@contextmanager
def merge_layout(layout: str) -> Iterator[None]:
    """Force group_summaries to merge buckets on a dense grid or by sorting them."""
    with pytest.MonkeyPatch.context() as patch:
        if layout == "sorted":
            patch.setattr(sketch_batch, "_DENSE_CELLS_PER_BUCKET", 0)
            patch.setattr(sketch_batch, "_DENSE_MIN_CELLS", 0)
        else:
            patch.setattr(sketch_batch, "_DENSE_CELLS_PER_BUCKET", 2**40)
        yield


def bits(values: object) -> bytes:
    """The float64 bit patterns, so 0.0 differs from -0.0 and NaN payloads count."""
    return np.asarray(values, dtype=np.float64).tobytes()


def assert_group_is_merge_many(
    summaries: GroupSummaries,
    group: int,
    blobs: Sequence[bytes],
    levels: Sequence[float],
    method: QuantileMethod,
) -> None:
    """Row ``group`` is bit for bit what merging the blobs with merge_many reports."""
    merged = merge_many(blobs)
    assert summaries.count[group] == merged.count
    assert summaries.zero_count[group] == merged.zero_count
    assert bits(summaries.min[group]) == bits(merged.min)
    assert bits(summaries.max[group]) == bits(merged.max)
    assert bits(summaries.quantiles[group]) == bits(merged.quantiles(levels, method)), method
    # The sum is the exact sum of the blobs' sums, rounded once.
    exact = math.fsum(Sketch.from_bytes(blob).sum for blob in blobs)
    assert bits(summaries.sum[group]) == bits(exact)
    assert summaries.sum[group] == pytest.approx(merged.sum, rel=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
@given(
    contents=st.lists(sketch_contents, max_size=25),
    extra_groups=st.integers(min_value=0, max_value=4),
    levels=st.lists(quantile_levels, max_size=6) | st.just(GROUP_LEVELS),
    data=st.data(),
)
def test_group_summaries_equal_merge_many_per_group_bit_for_bit(
    layout: str,
    contents: list[list[float]],
    extra_groups: int,
    levels: list[float],
    data: st.DataObject,
) -> None:
    # Given sketches, as blobs, spread over groups at random (some groups left empty)
    blobs = [Sketch.from_values(values).to_bytes() for values in contents]
    group_count = 1 + extra_groups
    group_ids = data.draw(
        st.lists(
            st.integers(min_value=0, max_value=group_count - 1),
            min_size=len(blobs),
            max_size=len(blobs),
        )
    )
    for method in ("lower", "linear"):
        # When all groups are summarized at once
        with merge_layout(layout):
            summaries = group_summaries(
                blobs, np.array(group_ids, dtype=np.int64), group_count, levels, method
            )
        # Then each row is what merging that group's blobs alone reports, to the bit
        assert summaries.quantiles.shape == (group_count, len(levels))
        for group in range(group_count):
            members = [blob for blob, owner in zip(blobs, group_ids, strict=True) if owner == group]
            assert_group_is_merge_many(summaries, group, members, levels, method)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", ["lower", "linear"])
def test_group_summaries_of_a_week_of_hours_per_hour_and_per_series(
    layout: str, method: QuantileMethod
) -> None:
    # Given the dashboard's week of hourly rollups of 7 series, rows ordered by series then
    # hour, with the last hour of each series in minute rows and some hours empty
    rng = np.random.default_rng(11)
    blobs, bucket_ids = [], []
    for series in range(7):
        for hour in range(168):
            rows = 60 if hour == 167 else 1
            for _ in range(rows):
                size = 0 if hour % 50 == 3 else int(rng.integers(1, 440 // rows + 2))
                values = bimodal(rng, size) * (series + 1)
                values[: size // 100] = 0.0
                blobs.append(Sketch.from_values(values).to_bytes())
                bucket_ids.append(series * 168 + hour)
    buckets = np.array(bucket_ids, dtype=np.int64)
    # When they are decoded once and summarized per hour and per series
    batch = SketchBatch(blobs)
    with merge_layout(layout):
        per_hour = batch.group_summaries(buckets, 7 * 168, DASHBOARD_QUANTILES, method)
        per_series = batch.group_summaries(buckets // 168, 7, DASHBOARD_QUANTILES, method)
    # Then every hour and every series matches merge_many over its rows
    for bucket in range(7 * 168):
        members = [blobs[index] for index in np.flatnonzero(buckets == bucket)]
        assert_group_is_merge_many(per_hour, bucket, members, DASHBOARD_QUANTILES, method)
    for series in range(7):
        members = blobs[series * (167 + 60) : (series + 1) * (167 + 60)]
        assert_group_is_merge_many(per_series, series, members, DASHBOARD_QUANTILES, method)
    assert per_hour.count[3] == 0
    assert np.isnan(per_hour.quantiles[3]).all()


def test_group_summaries_without_blobs() -> None:
    # Given no blobs at all
    summaries = group_summaries([], np.array([], dtype=np.int64), 3, [0.5, 0.99])
    # Then every group is empty: zero counts and sum, NaN extremes and quantiles
    assert summaries.count.tolist() == [0, 0, 0]
    assert summaries.zero_count.tolist() == [0, 0, 0]
    assert summaries.sum.tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(summaries.min).all()
    assert np.isnan(summaries.max).all()
    assert summaries.quantiles.shape == (3, 2)
    assert np.isnan(summaries.quantiles).all()
    # And no groups at all is fine too
    assert group_summaries([], [], 0, [0.5]).quantiles.shape == (0, 1)


def test_group_summaries_of_only_empty_sketches_are_empty() -> None:
    empty = Sketch().to_bytes()
    summaries = group_summaries([empty, empty], np.array([1, 1]), 2, [0.5])
    assert summaries.count.tolist() == [0, 0]
    assert bits(summaries.quantiles) == bits(
        merge_many([empty]).quantiles(np.array([[0.5], [0.5]]))
    )


def test_group_summaries_drop_the_sign_of_zero_whatever_the_order() -> None:
    # Given sketches whose min is -0.0 or 0.0 (both >= 0), merged in either order
    negative, positive = Sketch.from_values([-0.0, 5.0]), Sketch.from_values([0.0, 5.0])
    assert math.copysign(1.0, negative.min) == -1.0
    blobs = [negative.to_bytes(), positive.to_bytes(), positive.to_bytes(), negative.to_bytes()]
    summaries = group_summaries(blobs, np.array([0, 0, 1, 1]), 2, [0.0, 0.5])
    # Then merge_many and group_summaries agree on +0.0 for either order
    for group, members in enumerate((blobs[:2], blobs[2:])):
        assert_group_is_merge_many(summaries, group, members, [0.0, 0.5], "lower")
        assert math.copysign(1.0, summaries.min[group]) == 1.0


def test_group_summaries_accept_bytes_like_blobs_and_any_integer_ids() -> None:
    blob = Sketch.from_values([1.0, 2.0, 0.0]).to_bytes()
    expected = group_summaries([blob, blob], np.array([0, 1]), 2, [0.5])
    actual = group_summaries(
        [memoryview(blob), bytearray(blob)], np.array([0, 1], np.uint8), 2, [0.5]
    )
    assert bits(actual.quantiles) == bits(expected.quantiles)
    assert group_summaries([blob], [0], 1, [0.5]).count.tolist() == [3]


@pytest.mark.parametrize(("blob", "reason"), CORRUPTIONS)
@pytest.mark.parametrize("position", [0, 3, 6])
def test_group_summaries_reject_corrupt_blobs_naming_their_position(
    blob: bytes, reason: str, position: int
) -> None:
    # Given valid blobs of both layouts with one corrupt blob among them
    blobs = [dense_blob(), sparse_blob(), Sketch().to_bytes()] * 2
    blobs.insert(position, blob)
    group_ids = np.arange(len(blobs)) % 3
    # Then summarizing them raises ValueError naming the corrupt blob's position
    with pytest.raises(
        ValueError, match=rf"^invalid sketch blob \(item {position}\): .*({reason})"
    ):
        group_summaries(blobs, group_ids, 3, [0.5])
    with pytest.raises(ValueError, match=rf"\(item {position}\)"):
        SketchBatch(blobs)


@given(values=latency_lists, data=st.data())
def test_group_summaries_never_accept_a_truncated_blob(
    values: list[float], data: st.DataObject
) -> None:
    good = Sketch.from_values([1.0, 2.0]).to_bytes()
    blob = Sketch.from_values(values).to_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(blob) - 1))
    with pytest.raises(ValueError, match=r"\(item 1\)"):
        group_summaries([good, blob[:cut], good], np.array([0, 0, 1]), 2, [0.5])


@pytest.mark.parametrize(
    ("group_ids", "group_count", "levels", "method", "error", "message"),
    [
        pytest.param([0], 2, [0.5], "lower", ValueError, "one id per blob", id="too-few-ids"),
        pytest.param([[0, 1]], 2, [0.5], "lower", ValueError, "one id per blob", id="2-d-ids"),
        pytest.param([0.0, 1.0], 2, [0.5], "lower", TypeError, "integers", id="float-ids"),
        pytest.param([0, 2], 2, [0.5], "lower", ValueError, r"\[0, 2\)", id="id-too-large"),
        pytest.param([-1, 0], 2, [0.5], "lower", ValueError, r"\[0, 2\)", id="negative-id"),
        pytest.param([0, 0], -1, [0.5], "lower", ValueError, "group_count", id="negative-count"),
        pytest.param([0, 1], 2, [1.5], "lower", ValueError, r"\[0, 1\]", id="level"),
        pytest.param(
            [0, 1], 2, [0.5], "nearest", ValueError, "unknown quantile method", id="method"
        ),
    ],
)
def test_group_summaries_reject_bad_arguments(
    group_ids: list[object],
    group_count: int,
    levels: list[float],
    method: str,
    error: type[Exception],
    message: str,
) -> None:
    blobs = [Sketch.from_values([1.0]).to_bytes()] * 2
    with pytest.raises(error, match=message):
        group_summaries(blobs, np.array(group_ids), group_count, levels, method)  # type: ignore[arg-type]


def exact_float_sum(values: Sequence[float]) -> float:
    """The exact sum rounded once to nearest-even, inf beyond the float64 range."""
    if math.inf in values:
        return math.inf
    try:
        return float(sum(map(Fraction, values), Fraction(0)))
    except OverflowError:
        return math.inf


any_sum = st.one_of(
    st.floats(min_value=0.0, allow_infinity=True),
    st.floats(min_value=0.0, max_value=2.0**-1000),  # subnormals and tiny normals
    st.integers(min_value=0, max_value=2**60).map(float),  # ties once added up
    st.sampled_from([sys.float_info.max, 2.0**53, 1.0, 2.0**-53, 5e-324]),
)


@given(
    sums=st.lists(st.tuples(st.integers(min_value=0, max_value=3), any_sum), max_size=30),
)
@example(sums=[(0, 2.0**53), (0, 1.0)])  # a tie: rounds to even
@example(sums=[(0, 2.0**53), (0, 1.0), (0, 5e-324)])  # just above a tie: rounds up
@example(sums=[(0, sys.float_info.max), (0, sys.float_info.max)])  # overflows to inf
@example(sums=[(1, 0.1)] * 10)  # math.fsum gives 1.0, float additions 0.9999999999999999
def test_group_sums_are_exact_sums_rounded_once(sums: list[tuple[int, float]]) -> None:
    # Given blobs whose header sums are arbitrary non-negative floats (the decoder only checks
    # the sign), spread over 4 groups
    template = Sketch.from_values([1.0]).to_bytes()
    blobs = [replace_header(template, sum=total) for _, total in sums]
    group_ids = np.array([group for group, _ in sums], dtype=np.int64)
    # When they are summarized
    summaries = group_summaries(blobs, group_ids, 4, [0.5])
    # Then each group's sum is the exact sum of its blobs' sums rounded once
    for group in range(4):
        members = [total for owner, total in sums if owner == group]
        assert bits(summaries.sum[group]) == bits(exact_float_sum(members)), members

"""SketchBatch: blobs end to end in one buffer, wide counts."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from latencyboard.sketches.batch import SketchBatch
from latencyboard.sketches.buckets import GAMMA, MIN_VALUE
from latencyboard.sketches.sketch import Sketch, merge_many

LEVELS = [0.0, 0.001, 0.5, 0.95, 0.99, 0.999, 1.0]
HEADER = struct.Struct("<BBQQdddiI")  # the documented version-1 header

latencies = st.one_of(
    st.floats(min_value=MIN_VALUE, max_value=1e9),
    st.floats(min_value=0.0, max_value=MIN_VALUE, exclude_max=True),
)


def bits(values: object) -> bytes:
    return np.asarray(values, dtype=np.float64).tobytes()


def end_to_end(blobs: list[bytes]) -> tuple[bytes, np.ndarray]:
    """The blobs as a database hands them back from string_agg, and their lengths."""
    return b"".join(blobs), np.array([len(blob) for blob in blobs], dtype=np.int64)


@given(
    contents=st.lists(st.lists(latencies, max_size=60), min_size=1, max_size=12),
    data=st.data(),
)
def test_a_buffer_of_blobs_summarizes_exactly_like_the_blobs(
    contents: list[list[float]], data: st.DataObject
) -> None:
    # Given sketches of every layout, end to end in one buffer, and any grouping of them
    blobs = [Sketch.from_values(values).to_bytes() for values in contents]
    group_count = data.draw(st.integers(min_value=1, max_value=len(blobs) + 1))
    groups = np.array(
        data.draw(
            st.lists(
                st.integers(min_value=0, max_value=group_count - 1),
                min_size=len(blobs),
                max_size=len(blobs),
            )
        )
    )
    # When the buffer is decoded as one batch
    from_buffer = SketchBatch.from_buffer(*end_to_end(blobs))
    # Then every figure of every group is the one the blobs give, to the bit
    expected = SketchBatch(blobs).group_summaries(groups, group_count, LEVELS)
    actual = from_buffer.group_summaries(groups, group_count, LEVELS)
    for field in ("count", "zero_count", "sum", "min", "max", "quantiles"):
        assert bits(getattr(actual, field)) == bits(getattr(expected, field)), field
    assert len(from_buffer) == len(blobs)


def test_a_buffer_may_be_any_bytes_like_object_or_empty() -> None:
    blobs = [Sketch.from_values([1.0, 2.0]).to_bytes(), Sketch().to_bytes()]
    data, lengths = end_to_end(blobs)
    for buffer in (data, bytearray(data), memoryview(data)):
        batch = SketchBatch.from_buffer(buffer, lengths.astype(np.int32))
        assert batch.group_summaries([0, 0], 1, [0.5]).count.tolist() == [2]
    assert len(SketchBatch.from_buffer(b"", np.array([], dtype=np.int64))) == 0


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        pytest.param([30, 30], "add up to 60 bytes", id="more-than-the-buffer"),
        pytest.param([1], "add up to 1 bytes", id="less-than-the-buffer"),
        pytest.param([-1, 55], ">= 0", id="negative"),
        pytest.param([[54]], "1-D", id="2-d"),
        pytest.param([54.0], "integers", id="floats"),
    ],
)
def test_lengths_that_do_not_cut_the_buffer_into_blobs_are_refused(
    lengths: list[object], message: str
) -> None:
    data = Sketch.from_values([1.0, 2.0]).to_bytes()
    assert len(data) == 54
    with pytest.raises(ValueError, match=message):
        SketchBatch.from_buffer(data, np.array(lengths))


def test_a_corrupt_blob_in_a_buffer_is_named_by_its_position() -> None:
    good = Sketch.from_values([1.0, 2.0]).to_bytes()
    bad = good[:-1]
    with pytest.raises(ValueError, match=r"\(item 2\): truncated or over-long"):
        SketchBatch.from_buffer(*end_to_end([good, good, bad, good]))


def test_a_bucket_count_beyond_the_whole_batch_is_refused_not_wrapped() -> None:
    # Given a 4-byte dense blob claiming 5 values whose buckets hold 2**32 - 1 and 6: as
    # int32 they would wrap around to -1 + 6 = 5 and add up
    key_value = GAMMA**116  # top of bucket 116
    blob = Sketch.from_values(np.r_[np.full(70_000, 10.0), np.full(6, key_value * 1.001)])
    raw = blob.to_bytes()
    assert raw[1] == 2  # dense, 4-byte counts
    assert len(raw) == HEADER.size + 8  # two buckets
    fields = list(HEADER.unpack_from(raw))
    fields[2] = 5  # count
    forged = HEADER.pack(*fields) + struct.pack("<II", 2**32 - 1, 6)
    # Then decoding it, alone or in a batch, refuses it
    with pytest.raises(ValueError, match=r"\(item 1\): bucket counts do not add up to count"):
        SketchBatch.from_buffer(*end_to_end([Sketch.from_values([3.0]).to_bytes(), forged]))
    with pytest.raises(ValueError, match="bucket counts do not add up to count"):
        Sketch.from_bytes(forged)


def test_groups_past_two_billion_values_keep_exact_counts_and_quantiles() -> None:
    # Given sketches of 2**31 and more values each (built by doubling), beyond what int32
    # running counts hold, in two groups of two and one group of one
    sketches = []
    for low, high in ((5.0, 50.0), (20.0, 900.0), (1.0, 3.0), (0.0, 7.0), (60.0, 61.0)):
        sketch = Sketch.from_values(np.geomspace(max(low, MIN_VALUE), high, 1_000))
        while sketch.count < 2**31:
            sketch.merge(sketch)
        sketches.append(sketch)
    blobs = [sketch.to_bytes() for sketch in sketches]
    groups = np.array([0, 1, 0, 1, 2])
    # When they are summarized per group
    summaries = SketchBatch.from_buffer(*end_to_end(blobs)).group_summaries(groups, 3, LEVELS)
    # Then each group is what merge_many reports, to the bit
    for group in range(3):
        merged = merge_many([blob for blob, g in zip(blobs, groups, strict=True) if g == group])
        assert summaries.count[group] == merged.count > 2**31
        assert bits(summaries.quantiles[group]) == bits(merged.quantiles(LEVELS))

"""The fold's view of spans: one array per column, minute indexes and durations in
milliseconds (numpy, no Django). The rollups fold these columns into sketches and the SLA counters
count them, so both read a span the same way."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from latencyboard.storage.fold_spans import SpanRecords

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class SpanColumns:
    """Parallel arrays, one entry per span."""

    pipeline_id: IntArray
    stage_id: IntArray
    is_root: BoolArray
    minute: IntArray  # Unix seconds // 60, the minute index of ``sla.counting``
    duration_ms: FloatArray
    is_error: BoolArray

    def __len__(self) -> int:
        return len(self.pipeline_id)

    def select(self, keep: BoolArray) -> SpanColumns:
        """The spans where ``keep`` is true."""
        return SpanColumns(
            self.pipeline_id[keep],
            self.stage_id[keep],
            self.is_root[keep],
            self.minute[keep],
            self.duration_ms[keep],
            self.is_error[keep],
        )


def span_columns(records: SpanRecords) -> SpanColumns:
    """The fold's view of spans as stored: minute indexes and durations in milliseconds."""
    return SpanColumns(
        pipeline_id=records.pipeline_id,
        stage_id=records.stage_id,
        is_root=records.is_root,
        minute=records.start_us // 60_000_000,
        duration_ms=records.duration_ns.astype(np.float64) / 1e6,
        is_error=records.is_error,
    )

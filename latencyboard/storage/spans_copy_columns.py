"""Span COPY rows of the demo back-fill, encoded column-wise (pure: numpy; no Django).

The same rows as :func:`latencyboard.storage.spans_copy.encode_span`, whose layout and
constant parts this module takes, filled whole arrays at a time: tens of millions of spans
are never one Python object each. Kept apart so that the ingest processes do not load numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from latencyboard.storage import spans_copy
from latencyboard.storage.timestamps import PG_EPOCH_US


@dataclass(frozen=True, slots=True)
class SpanRows:
    """Spans grouped by template: the first ``counts[0]`` rows are of template 0, the next
    ``counts[1]`` of template 1, and so on. Times are Unix microseconds (the precision of
    ``timestamptz``); ``parent_span_id`` is meaningless on root rows."""

    counts: npt.NDArray[np.int64]
    trace_id: npt.NDArray[np.uint8]
    """(m, 16) bytes."""
    span_id: npt.NDArray[np.int64]
    parent_span_id: npt.NDArray[np.int64]
    start_us: npt.NDArray[np.int64]
    duration_ns: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.span_id)


class TemplateEncoder:
    """Encodes :class:`SpanRows` of one pipeline as the rows :func:`encode_span` would give,
    whole arrays at a time; ``stage_ids[t]`` is the stage row of template ``t`` and
    ``template_ids[t]`` its stored span template (:mod:`..span_templates`).

    A template's constant columns are encoded once; its rows are one numpy structured array
    whose few varying fields are filled column-wise.
    """

    def __init__(
        self,
        templates: Sequence[spans_copy.Template],
        *,
        team_id: int,
        pipeline_id: int,
        stage_ids: Sequence[int],
        template_ids: Sequence[int],
    ) -> None:
        self._roots = [template.is_root for template in templates]
        self._middles: list[bytes] = []
        self._tails: list[bytes] = []
        self._dtypes: list[np.dtype[np.void]] = []
        for template, stage_id, template_id in zip(templates, stage_ids, template_ids, strict=True):
            middle, tail = spans_copy.template_parts(
                template,
                team_id=team_id,
                pipeline_id=pipeline_id,
                stage_id=stage_id,
                template_id=template_id,
            )
            self._middles.append(middle)
            self._tails.append(tail)
            # A root's parent is NULL (length -1, no bytes); a child's is the root's span id.
            parent = [] if template.is_root else [("parent", ">i8")]
            self._dtypes.append(
                np.dtype(
                    [
                        ("prefix", f"V{spans_copy.PREFIX_SIZE}"),
                        ("start_len", ">i4"),
                        ("start", ">i8"),
                        ("duration_len", ">i4"),
                        ("duration", ">i8"),
                        ("span_id_len", ">i4"),
                        ("span_id", ">i8"),
                        ("parent_len", ">i4"),
                        *parent,
                        ("middle", f"V{len(middle)}"),
                        ("trace_id", "u1", (16,)),
                        ("tail", f"V{len(tail)}"),
                    ]
                )
            )

    def encode(self, rows: SpanRows, batch_id: int) -> list[bytes]:
        """The rows' part of a COPY stream (no header, no trailer), all in batch ``batch_id``:
        one block of bytes per template that has rows."""
        row_prefix = spans_copy.prefix(batch_id)
        blocks = []
        end = 0
        for t, count in enumerate(rows.counts.tolist()):
            if not count:
                continue
            start, end = end, end + count
            # Every constant field at once: one record, copied into each row.
            constant = np.zeros(1, self._dtypes[t])
            constant["prefix"] = np.void(row_prefix)
            constant["start_len"] = 8
            constant["duration_len"] = 8
            constant["span_id_len"] = 8
            constant["parent_len"] = -1 if self._roots[t] else 8
            constant["middle"] = np.void(self._middles[t])
            constant["tail"] = np.void(self._tails[t])
            out = np.empty(count, self._dtypes[t])
            # As raw bytes: numpy copies structured records field by field.
            out.view(np.uint8).reshape(count, -1)[:] = constant.view(np.uint8)
            out["trace_id"] = rows.trace_id[start:end]
            out["span_id"] = rows.span_id[start:end]
            if not self._roots[t]:
                out["parent"] = rows.parent_span_id[start:end]
            out["start"] = rows.start_us[start:end] - PG_EPOCH_US
            out["duration"] = rows.duration_ns[start:end]
            blocks.append(out.tobytes())
        return blocks

"""Sampled demo requests as span rows, column by column (pure: numpy + stdlib).

A request of :mod:`latencyboard.demo.profiles` becomes the spans the live demo service sends for
it: one root SERVER span and one INTERNAL child per stage that ran, with the same names,
statuses and attributes (plus the resource's ``service.version``, as the decoder keeps it).
Everything is done on whole arrays, never one Python object per span, because a historical
backfill writes tens of millions of spans.

Spans that share every column but ids, times and durations share a :class:`SpanTemplate`; there
are a few dozen per pipeline. :class:`CopyEncoder` turns the rows into PostgreSQL's binary COPY
format for ``spans_span``: a template's constant columns are encoded once, and its rows are one
numpy structured array whose few varying fields are filled column-wise.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from latencyboard.demo.profiles import (
    FORWARD_INDEX,
    HYDRATION_INDEX,
    Pipeline,
    RequestBatch,
    diurnal_factor,
)

STAGE_ATTRIBUTE = "inference.stage"
SPAN_KIND_INTERNAL, SPAN_KIND_SERVER = 1, 2
STATUS_UNSET, STATUS_ERROR = 0, 2

# The order of the COPY stream: the columns a template fixes first, so that each row is its
# template's constant bytes followed by the fixed-width fields that vary.
COPY_COLUMNS: tuple[str, ...] = (
    "team_id",
    "pipeline_id",
    "stage_id",
    "batch_id",
    "name",
    "kind",
    "status_code",
    "status_message",
    "is_root",
    "attributes",
    "trace_id",
    "span_id",
    "start_time",
    "duration_ns",
    "parent_span_id",
)
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension length
COPY_TRAILER = b"\xff\xff"

_PG_EPOCH_US = 946_684_800 * 10**6  # 2000-01-01, where binary timestamptz counts from
_JSONB_VERSION = b"\x01"
_VARYING = [
    ("trace_id_len", ">i4"),
    ("trace_id", "u1", (16,)),
    ("span_id_len", ">i4"),
    ("span_id", ">i8"),
    ("start_len", ">i4"),
    ("start", ">i8"),
    ("duration_len", ">i4"),
    ("duration", ">i8"),
    ("parent_len", ">i4"),
]


@dataclass(frozen=True, slots=True)
class SpanTemplate:
    """What the spans of one kind share: everything but ids, times and durations.

    ``stage`` is the span's ``inference.stage`` attribute, ``None`` on the root span, whose
    stage the pipeline's mapping rules (else its name) decide, as for live spans.
    """

    name: str
    stage: str | None
    kind: int
    status_code: int
    status_message: str
    attributes: dict[str, object]

    @property
    def is_root(self) -> bool:
        return self.stage is None


@dataclass(frozen=True, slots=True)
class SpanRows:
    """Spans of one pipeline grouped by template: the first ``counts[0]`` rows are of template
    0, the next ``counts[1]`` of template 1, and so on. Times are Unix microseconds (the
    precision of ``timestamptz``); ``parent_span_id`` is meaningless on root rows."""

    counts: npt.NDArray[np.int64]
    trace_id: npt.NDArray[np.uint8]
    """(m, 16) bytes."""
    span_id: npt.NDArray[np.int64]
    parent_span_id: npt.NDArray[np.int64]
    start_us: npt.NDArray[np.int64]
    duration_ns: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.span_id)


@dataclass(frozen=True)
class TemplateTable:
    """The templates of one pipeline, and how a span's features pick one.

    ``lookup[slot, version, cache_hit, failure]`` is a template index (-1 where no span can
    land): ``slot`` 0 is the root and ``1 + s`` stage ``s``; ``version`` is the model version
    index where the span names it (root, ``model_forward``), else 0; ``cache_hit`` is 1 on a
    ``feature_hydration`` hit, else 0; ``failure`` is ``1 + error_stage`` on the root (0 when
    the request succeeded) and 1 on the stage that failed, else 0.
    """

    templates: tuple[SpanTemplate, ...]
    lookup: npt.NDArray[np.int16]


def template_table(pipeline: Pipeline) -> TemplateTable:
    """Every template of ``pipeline``'s spans, with attributes as the live demo sets them."""
    n_stages = len(pipeline.stages)
    shape = (n_stages + 1, len(pipeline.model_versions), 2, n_stages + 1)
    lookup = np.full(shape, -1, dtype=np.int16)
    templates: list[SpanTemplate] = []
    resource = {"service.version": pipeline.service_version}
    for version, model in enumerate(pipeline.model_versions):
        for failure in range(n_stages + 1):
            failed = pipeline.stages[failure - 1] if failure else None
            attributes: dict[str, object] = {
                **resource,
                "http.request.method": pipeline.http_method,
                "http.route": pipeline.http_route,
                "http.response.status_code": failed.error_http_status if failed else 200,
                "model.version": model.name,
            }
            if failed:
                attributes["error.type"] = failed.error_type
            lookup[0, version, 0, failure] = len(templates)
            templates.append(_template(pipeline.root_name, None, attributes))
    for s, stage in enumerate(pipeline.stages):
        versions = range(len(pipeline.model_versions)) if s == FORWARD_INDEX else range(1)
        cache_hits = (False, True) if s == HYDRATION_INDEX else (False,)
        for version in versions:
            for cache_hit in cache_hits:
                for failure in (0, 1):
                    attributes = {**resource, STAGE_ATTRIBUTE: stage.name}
                    if s == HYDRATION_INDEX:
                        attributes["cache_hit"] = cache_hit
                    if s == FORWARD_INDEX:
                        attributes["model.version"] = pipeline.model_versions[version].name
                    if failure:
                        attributes["error.type"] = stage.error_type
                    lookup[1 + s, version, int(cache_hit), failure] = len(templates)
                    templates.append(_template(stage.name, stage.name, attributes))
    return TemplateTable(tuple(templates), lookup)


def _template(name: str, stage: str | None, attributes: dict[str, object]) -> SpanTemplate:
    """A failed span (one with ``error.type``) has ERROR status with the type as message."""
    error_type = str(attributes.get("error.type", ""))
    return SpanTemplate(
        name=name,
        stage=stage,
        kind=SPAN_KIND_SERVER if stage is None else SPAN_KIND_INTERNAL,
        status_code=STATUS_ERROR if error_type else STATUS_UNSET,
        status_message=error_type,
        attributes=attributes,
    )


def arrivals(
    pipeline: Pipeline, start_us: int, end_us: int, scale: float, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """Poisson request arrivals in ``[start_us, end_us)`` (Unix microseconds), unordered.

    The rate is ``requests_per_s * scale`` times the diurnal factor at the interval's middle.
    Within an hour the daily curve bends by less than 1%, and over whole days of hours the
    midpoint values sum to the exact daily volume (as any cosine's do over its period).
    """
    middle_s = (start_us + end_us) / 2e6
    rate = pipeline.requests_per_s * scale * float(diurnal_factor(pipeline, middle_s))
    n = int(rng.poisson(rate * (end_us - start_us) / 1e6))
    return rng.integers(start_us, end_us, size=n, dtype=np.int64)


def span_rows(
    table: TemplateTable,
    batch: RequestBatch,
    start_us: npt.NDArray[np.int64],
    id_rng: np.random.Generator,
) -> SpanRows:
    """The spans of ``batch``, whose requests' root spans start at ``start_us``.

    Trace ids are 16 random bytes and span ids 64 random bits from ``id_rng``. Children start
    at the root's start plus their offset, truncated to the microsecond, so that every stored
    child lies within its stored root.
    """
    n, n_stages = batch.stage_ns.shape
    slots = np.arange(n_stages + 1)
    version = batch.model_version_idx.astype(np.intp)[:, None]
    error_stage = batch.error_stage.astype(np.intp)[:, None]
    template = table.lookup[
        slots,
        np.where((slots == 0) | (slots == 1 + FORWARD_INDEX), version, 0),
        np.where(slots == 1 + HYDRATION_INDEX, batch.cache_hit[:, None], 0),
        np.where(slots == 0, error_stage + 1, error_stage == slots - 1),
    ]
    template[:, 1:][~batch.ran] = -1

    flat = template.ravel()
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat + 1, minlength=len(table.templates) + 1)
    order = order[counts[0] :]  # drop the stages that did not run (template -1)
    request = order // (n_stages + 1)

    offset_us = np.zeros((n, n_stages + 1), dtype=np.int64)
    offset_us[:, 1:] = batch.stage_start_ns // 1000
    duration = np.empty((n, n_stages + 1), dtype=np.int64)
    duration[:, 0] = batch.root_ns
    duration[:, 1:] = batch.stage_ns
    span_id = id_rng.integers(
        np.iinfo(np.int64).min, np.iinfo(np.int64).max, size=(n, n_stages + 1), endpoint=True
    )
    trace_id = np.frombuffer(id_rng.bytes(16 * n), dtype=np.uint8).reshape(n, 16)
    return SpanRows(
        counts=counts[1:],
        trace_id=trace_id[request],
        span_id=span_id.ravel()[order],
        parent_span_id=span_id[request, 0],
        start_us=start_us[request] + offset_us.ravel()[order],
        duration_ns=duration.ravel()[order],
    )


class CopyEncoder:
    """Encodes one pipeline's :class:`SpanRows` as binary COPY rows in :data:`COPY_COLUMNS`
    order; ``stage_ids[t]`` is the stage row of template ``t``."""

    def __init__(
        self,
        templates: Sequence[SpanTemplate],
        *,
        team_id: int,
        pipeline_id: int,
        stage_ids: Sequence[int],
    ) -> None:
        self._templates = tuple(templates)
        self._before_batch: list[bytes] = []
        self._after_batch: list[bytes] = []
        self._dtypes: list[np.dtype[np.void]] = []
        for template, stage_id in zip(templates, stage_ids, strict=True):
            self._before_batch.append(
                struct.pack(
                    ">hiqiqiqi", len(COPY_COLUMNS), 8, team_id, 8, pipeline_id, 8, stage_id, 8
                )
            )
            attributes = json.dumps(template.attributes, separators=(",", ":")).encode()
            self._after_batch.append(
                _text(template.name.encode())
                + struct.pack(">ihih", 2, template.kind, 2, template.status_code)
                + _text(template.status_message.encode())
                + struct.pack(">i?", 1, template.is_root)
                + _text(_JSONB_VERSION + attributes)
            )
            constant_size = len(self._before_batch[-1]) + 8 + len(self._after_batch[-1])
            # A root's parent is NULL (length -1, no bytes); a child's is the root's span id.
            parent = [] if template.is_root else [("parent", ">i8")]
            self._dtypes.append(np.dtype([("constant", f"V{constant_size}"), *_VARYING, *parent]))

    def encode(self, rows: SpanRows, batch_id: int) -> list[bytes]:
        """The rows' part of a COPY stream (no header, no trailer), all in batch ``batch_id``:
        one block of bytes per template that has rows."""
        blocks = []
        end = 0
        for t, count in enumerate(rows.counts.tolist()):
            if not count:
                continue
            start, end = end, end + count
            constant = self._before_batch[t] + struct.pack(">q", batch_id) + self._after_batch[t]
            out = np.empty(count, self._dtypes[t])
            out["constant"] = np.void(constant)
            out["trace_id_len"] = 16
            out["trace_id"] = rows.trace_id[start:end]
            out["span_id_len"] = 8
            out["span_id"] = rows.span_id[start:end]
            out["start_len"] = 8
            out["start"] = rows.start_us[start:end] - _PG_EPOCH_US
            out["duration_len"] = 8
            out["duration"] = rows.duration_ns[start:end]
            if self._templates[t].is_root:
                out["parent_len"] = -1
            else:
                out["parent_len"] = 8
                out["parent"] = rows.parent_span_id[start:end]
            blocks.append(out.tobytes())
        return blocks


def _text(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def spans_per_request(pipeline: Pipeline) -> float:
    """Expected spans of one request: the root plus the stages that run before any failure."""
    weights = np.array([stage.error_weight for stage in pipeline.stages])
    skipped_after_failure = np.arange(len(weights))[::-1]  # failing at s skips the stages after
    expected_skipped = pipeline.error_rate * float(weights @ skipped_after_failure) / weights.sum()
    return 1 + len(pipeline.stages) - expected_skipped


def expected_spans(pipelines: Sequence[Pipeline], days: float, scale: float) -> float:
    """Expected spans of ``days`` of traffic at ``scale`` (the diurnal factor averages 1)."""
    per_second = sum(p.requests_per_s * spans_per_request(p) for p in pipelines)
    return per_second * scale * days * 86_400

"""Sampled demo requests as span rows, column by column (pure: numpy + stdlib).

A request of :mod:`latencyboard.demo.profiles` becomes the spans the live demo service sends for
it: one root SERVER span and one INTERNAL child per stage that ran, with the same names,
statuses and attributes, and the resource's ``service.version`` (as the decoder keeps it).
Everything is done on whole arrays, never one Python object per span, because a historical
backfill writes tens of millions of spans.

Spans that share every column but ids, times and durations share a :class:`SpanTemplate`; there
are a few dozen per pipeline. :mod:`latencyboard.storage.spans_copy_columns` turns the rows
into binary COPY rows of the span table, the same bytes live ingest writes.
"""

from __future__ import annotations

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
from latencyboard.storage.spans_copy_columns import SpanRows

STAGE_ATTRIBUTE = "inference.stage"
SPAN_KIND_INTERNAL, SPAN_KIND_SERVER = 1, 2
STATUS_UNSET, STATUS_ERROR = 0, 2


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
    resource: dict[str, object]
    """The resource attributes every span of the pipeline shares (not in ``attributes``)."""


def template_table(pipeline: Pipeline) -> TemplateTable:
    """Every template of ``pipeline``'s spans, with attributes as the live demo sets them."""
    n_stages = len(pipeline.stages)
    shape = (n_stages + 1, len(pipeline.model_versions), 2, n_stages + 1)
    lookup = np.full(shape, -1, dtype=np.int16)
    templates: list[SpanTemplate] = []
    resource: dict[str, object] = {"service.version": pipeline.service_version}
    for version, model in enumerate(pipeline.model_versions):
        for failure in range(n_stages + 1):
            failed = pipeline.stages[failure - 1] if failure else None
            attributes: dict[str, object] = {
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
                    attributes = {STAGE_ATTRIBUTE: stage.name}
                    if s == HYDRATION_INDEX:
                        attributes["cache_hit"] = cache_hit
                    if s == FORWARD_INDEX:
                        attributes["model.version"] = pipeline.model_versions[version].name
                    if failure:
                        attributes["error.type"] = stage.error_type
                    lookup[1 + s, version, int(cache_hit), failure] = len(templates)
                    templates.append(_template(stage.name, stage.name, attributes))
    return TemplateTable(tuple(templates), lookup, resource)


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

"""The series the Prometheus-compatible API serves, and which of them a selector names.

Every series is a figure the rollups already hold, per pipeline (``pipeline`` is its
``service.name``, ``environment`` its deployment environment) and stage (``end-to-end`` for
whole requests): latency quantiles merged from the sketches, exact request counts and rates,
error ratios, and the exact SLA attainment of each objective. Only pipelines the user may see
(:meth:`Pipeline.objects.visible_to`) are looked at; a selector may touch at most
:data:`MAX_PIPELINES` pipelines and :data:`MAX_SERIES` series, so a regex that matches
everything costs one scan of the names of the user's own pipelines and then a 400.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from django.contrib.auth.models import AnonymousUser, User

from latencyboard.pipelines.mapping import END_TO_END
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.prometheus.promql import NAME_LABEL, Selector, Unsupported
from latencyboard.rollups.queries import DEFAULT_QUANTILES
from latencyboard.sla.queries import objectives_of

MAX_PIPELINES: Final = 25
"""Most pipelines one selector may touch (a regex over every pipeline is refused beyond)."""
MAX_SERIES: Final = 2000
"""Most series one selector may name."""
MAX_LISTED_PIPELINES: Final = 1000
MAX_LISTED_SERIES: Final = 20_000
"""The same bounds for listing series and label values, which read no figures."""

LATENCY: Final = "latencyboard_latency_seconds"
REQUESTS: Final = "latencyboard_requests"
REQUEST_RATE: Final = "latencyboard_requests_per_second"
ERROR_RATIO: Final = "latencyboard_error_ratio"
ATTAINMENT: Final = "latencyboard_sla_attainment_ratio"

METRICS: Final = {
    LATENCY: "Latency quantile of the stage's spans over the step before each sample, merged "
    "from the rollup sketches (within 1% relative error).",
    REQUESTS: "Spans of the stage that started in the step before each sample (exact).",
    REQUEST_RATE: "Spans of the stage per second over the step before each sample (exact).",
    ERROR_RATIO: "Share of the stage's spans with an error status over the step (exact).",
    ATTAINMENT: "Share of the objective's requests within its threshold over the step, "
    "maintenance left out (exact counters).",
}
LABELS: Final = ("__name__", "environment", "objective", "pipeline", "quantile", "stage")


@dataclass(frozen=True, slots=True)
class Series:
    """One series: its labels and what it reads."""

    labels: dict[str, str]
    pipeline_id: int
    stage_id: int | None  # None: end to end
    quantile: float | None = None  # latency only
    objective_id: int | None = None  # attainment only

    @property
    def metric(self) -> str:
        return self.labels[NAME_LABEL]


def quantile_label_value(level: float) -> str:
    """The value of a level's ``quantile`` label: its shortest decimal, as Prometheus writes
    0.99 (where a page writes p99, :func:`latencyboard.stats.labels.quantile_label`)."""
    return repr(level)


def select(
    user: User | AnonymousUser,
    selector: Selector,
    max_pipelines: int = MAX_PIPELINES,
    max_series: int = MAX_SERIES,
) -> list[Series]:
    """The series of ``user``'s pipelines that ``selector`` names, in a stable order.

    Raises :class:`Unsupported` beyond ``max_pipelines`` or ``max_series``.
    """
    pipelines = [
        row
        for row in Pipeline.objects.visible_to(user)
        .order_by("service_name", "environment", "pk")
        .values_list("pk", "service_name", "environment")
        if _may_match(selector, {"pipeline": row[1], "environment": row[2]})
    ]
    if len(pipelines) > max_pipelines:
        raise Unsupported(
            f"The selector touches {len(pipelines)} pipelines, at most {max_pipelines}: narrow "
            'it with pipeline="…" or environment="…".'
        )
    ids = [pk for pk, _, _ in pipelines]
    stages: dict[int, list[tuple[int, str]]] = {pk: [] for pk in ids}
    for stage_id, pipeline_id, name in (
        Stage.objects.filter(pipeline_id__in=ids)
        .order_by("pipeline_id", "pk")
        .values_list("pk", "pipeline_id", "name")
    ):
        stages[pipeline_id].append((stage_id, name))
    levels = _quantiles(selector)
    found: list[Series] = []
    for pk, service, environment in pipelines:
        base = {"pipeline": service, "environment": environment}
        found += _pipeline_series(pk, base, stages[pk], levels, selector)
        if len(found) > max_series:
            raise Unsupported(f"The selector names more than {max_series} series: narrow it.")
    found += _attainment_series(user, ids, selector)
    if len(found) > max_series:
        raise Unsupported(f"The selector names more than {max_series} series: narrow it.")
    return found


MAX_LABEL_VALUES: Final = 10_000


def label_values(user: User | AnonymousUser, label: str) -> list[str]:
    """Every value of ``label`` among ``user``'s series, sorted (at most
    :data:`MAX_LABEL_VALUES`): what a dashboard variable offers."""
    pipelines = Pipeline.objects.visible_to(user)
    found: list[str]
    if label == NAME_LABEL:
        found = list(METRICS)
    elif label == "pipeline":
        found = list(pipelines.values_list("service_name", flat=True).distinct())
    elif label == "environment":
        found = list(pipelines.values_list("environment", flat=True).distinct())
    elif label == "stage":
        stages = Stage.objects.filter(pipeline__in=pipelines)
        found = [END_TO_END, *stages.values_list("name", flat=True).distinct()]
    elif label == "quantile":
        found = [quantile_label_value(level) for level in DEFAULT_QUANTILES]
    elif label == "objective":
        found = list(objectives_of(user).values_list("name", flat=True).distinct())
    else:
        found = []
    return sorted({value for value in found if value})[:MAX_LABEL_VALUES]


def _may_match(selector: Selector, partial: dict[str, str]) -> bool:
    """Whether some matcher group accepts these labels, judging only matchers on them."""
    return any(
        all(m.matches(partial) for m in group if m.label in partial) for group in selector.groups
    )


def _quantiles(selector: Selector) -> tuple[tuple[float, str], ...]:
    """The quantiles (level and label) of latency series: those ``quantile="…"`` pins (any
    level in (0, 1), merged from the sketches), else the defaults."""
    pinned = selector.equal_values("quantile")
    if pinned is None:
        return tuple((level, quantile_label_value(level)) for level in DEFAULT_QUANTILES)
    levels = []
    for text in sorted(pinned):
        try:
            level = float(text)
        except ValueError:
            continue
        if 0.0 < level < 1.0:
            levels.append((level, text))
    return tuple(levels)


def _pipeline_series(
    pipeline_id: int,
    base: dict[str, str],
    stages: Sequence[tuple[int, str]],
    levels: Sequence[tuple[float, str]],
    selector: Selector,
) -> Iterator[Series]:
    for stage_id, stage in ((None, END_TO_END), *stages):
        labels = {**base, "stage": stage}
        for metric in (REQUESTS, REQUEST_RATE, ERROR_RATIO):
            candidate = {NAME_LABEL: metric, **labels}
            if selector.matches(candidate):
                yield Series(candidate, pipeline_id, stage_id)
        for level, text in levels:
            candidate = {NAME_LABEL: LATENCY, **labels, "quantile": text}
            if selector.matches(candidate):
                yield Series(candidate, pipeline_id, stage_id, quantile=level)


def _attainment_series(
    user: User | AnonymousUser, pipeline_ids: Sequence[int], selector: Selector
) -> list[Series]:
    found = []
    for objective in objectives_of(user).filter(pipeline_id__in=pipeline_ids):
        labels = {
            NAME_LABEL: ATTAINMENT,
            "pipeline": objective.pipeline.service_name,
            "environment": objective.pipeline.environment,
            "stage": objective.stage.name if objective.stage else END_TO_END,
            "objective": objective.name,
        }
        if selector.matches(labels):
            found.append(
                Series(labels, objective.pipeline_id, objective.stage_id, objective_id=objective.pk)
            )
    return found

"""The charts of the pipeline page: each one declaration, which its API endpoint, the page and
its live updates all read.

A :class:`Chart` says what the chart is called, which query parameters it reads, the function
that computes its data for one pipeline of the user's teams (its *series*), how the page draws
it (the card template and the names of the scripts' draw functions) and which live events of
the pipeline make the page fetch it again. :func:`register` adds one; the API serves every
registered chart at ``/api/pipelines/<id>/<chart id>/`` (:mod:`latencyboard.dashboards.api`),
the page lays out their cards in the order registered and hands their URLs and live events to
its scripts (:mod:`latencyboard.dashboards.views`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.urls import reverse
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework.exceptions import ValidationError

from latencyboard.dashboards import attribute_queries, queries
from latencyboard.dashboards.bottleneck_queries import bottlenecks
from latencyboard.dashboards.serializers import (
    AttributeBreakdownSerializer,
    AttributeQuerySerializer,
    BottleneckQuerySerializer,
    BottleneckSerializer,
    DeploymentsSerializer,
    ObjectiveAttainmentQuerySerializer,
    StageBreakdownSerializer,
    WindowQuerySerializer,
)
from latencyboard.live.events import PIPELINE_EVENTS, POINTS, STAGE_SHARES
from latencyboard.moments import iso_utc
from latencyboard.pipelines.mapping import END_TO_END
from latencyboard.pipelines.models import Pipeline, cohort_attributes
from latencyboard.rollups.queries import InvalidPercentileQuery, percentile_series
from latencyboard.rollups.serializers import (
    LongRowSerializer,
    PercentileQuerySerializer,
    PercentileSeriesSerializer,
    percentile_long_rows,
    percentile_series_data,
)
from latencyboard.series_query import SeriesQuerySerializer
from latencyboard.sla import queries as sla_queries
from latencyboard.sla.serializers import AttainmentSeriesSerializer

ID_PATTERN = "[a-z0-9]+(?:-[a-z0-9]+)*"
"""A chart's id: lower-case letters and digits, words joined by dashes (a URL segment)."""
CARD = "dashboards/charts/card.html"
"""The card of a chart that brings no template of its own: its title over its plot."""


@dataclass(frozen=True, slots=True)
class ChartRequest:
    """One request for a chart's data: a pipeline of ``user``'s teams and the parameters its
    query serializer validated (``start``, ``end``, ``now`` and the chart's own)."""

    pipeline: Pipeline
    user: User | AnonymousUser
    params: dict[str, Any]

    @property
    def now(self) -> dt.datetime:
        now: dt.datetime = self.params["now"]
        return now


def _one_series(pipeline: Pipeline) -> int:
    return 1


@dataclass(frozen=True, kw_only=True)
class Chart:
    """A chart of a pipeline over a window.

    ``id`` is its URL segment (``/api/pipelines/<id>/<chart id>/``) and the id of the generic
    :data:`CARD`; ``title`` and ``description`` document its endpoint (and title that card).
    ``series`` computes the JSON answer from a :class:`ChartRequest`; ``query`` reads its
    parameters and ``answer`` documents what it returns. ``series_per_step`` is how many
    series each step bucket of the answer holds, for the point budget. ``draws`` names the
    page scripts' draw functions (``LB.pipeline.draw(name, …)``, in
    ``static/js/pipeline/<name>.js``) that show it in ``card`` (a template, given ``chart``
    and the page's context); a chart without any is not on the page. ``live`` lists the
    pipeline's live events after which the page fetches it again. ``heavy`` takes a slot of
    the team's heavy reads (``latencyboard.fairness.heavy_reads``).
    """

    id: str
    title: str
    description: str
    series: Callable[[ChartRequest], Any]
    answer: Any
    query: type[SeriesQuerySerializer] = WindowQuerySerializer
    series_per_step: Callable[[Pipeline], int] = _one_series
    draws: tuple[str, ...] = ()
    card: str = CARD
    live: tuple[str, ...] = ()
    heavy: bool = True
    operation_id: str = ""

    @property
    def operation(self) -> str:
        """The OpenAPI operation id of its endpoint."""
        return self.operation_id or "pipeline_" + self.id.replace("-", "_")

    def url(self, pipeline_id: int) -> str:
        return reverse("api-pipeline-chart", args=[pipeline_id, self.id])


CHARTS: dict[str, Chart] = {}
"""Every chart, by id, in the order the page shows them."""


def register(chart: Chart) -> Chart:
    """Add ``chart`` to the page and the API. An id taken already, one that is not a URL
    segment, or a live event no publisher sends is a ValueError."""
    if chart.id in CHARTS:
        raise ValueError(f"A chart {chart.id!r} is registered already.")
    if not re.fullmatch(ID_PATTERN, chart.id):
        raise ValueError(f"A chart's id is lower-case letters, digits and dashes: {chart.id!r}.")
    unknown = set(chart.live) - PIPELINE_EVENTS
    if unknown:
        raise ValueError(f"No live event {sorted(unknown)} is published to a pipeline's pages.")
    CHARTS[chart.id] = chart
    return chart


def shown() -> list[Chart]:
    """The charts the pipeline page draws, in their order."""
    return [chart for chart in CHARTS.values() if chart.draws]


# --- the charts ----------------------------------------------------------------------------------


def _percentiles(request: ChartRequest) -> Any:
    params = request.params
    try:
        result = percentile_series(
            request.user,
            request.pipeline.pk,
            params["stages"],
            params["start"],
            params["end"],
            params["step"],
            params["q"],
        )
    except InvalidPercentileQuery as exc:
        raise ValidationError({exc.field: [exc.message]}) from exc
    if params["format"] == "long":
        return percentile_long_rows(result)
    return percentile_series_data(result, request.now)


register(
    Chart(
        id="percentiles",
        title="Per-stage latency percentiles over time",
        description="For each stage and each step bucket of the window: span count, error "
        "rate, mean and the requested quantiles, merged from rollup sketches; plus a summary "
        "over the whole window. Buckets without spans have null figures. With `format=long`, "
        "a list of rows instead: one per bucket and stage, bucket by bucket.",
        series=_percentiles,
        query=PercentileQuerySerializer,
        answer=PolymorphicProxySerializer(
            component_name="PercentilesAnswer",
            serializers=[PercentileSeriesSerializer, LongRowSerializer(many=True)],
            resource_type_field_name=None,
            many=False,
        ),
        draws=("percentiles", "llm"),
        card="dashboards/charts/percentiles.html",
        live=(POINTS,),
    )
)


def _stage_count(pipeline: Pipeline) -> int:
    return pipeline.stages.count()


def _stage_breakdown(request: ChartRequest) -> Any:
    params = request.params
    found = queries.breakdown(request.pipeline, params["start"], params["end"], params["step"])
    data = StageBreakdownSerializer(found).data
    # Buckets lie on the step grid; the window still ends no later than now.
    data["end"] = iso_utc(min(found.summary.end, request.now))
    data["series"]["end"] = iso_utc(min(found.series.end, request.now))
    return data


register(
    Chart(
        id="stage-breakdown",
        title="Stage breakdown of a pipeline's requests, and how it moved",
        description="Mean self time per stage over all requests and over the slowest 1% of the "
        "window (the requests above the window's end-to-end p99, from the merged sketch "
        "buckets: exact up to the p99's own 1% bucket), with each stage's share; and the "
        "shares per step bucket, each bucket's slowest 1% above its own p99. With fewer than "
        "10 requests above the p99 (under some 1,000 requests) the tail figures are null: too "
        "few to mean anything. A stage's self time is its duration less the union of its "
        "children's; children running in parallel each keep their own, so shares divide the "
        "work done, which can exceed the wall-clock time. The critical-path figures divide "
        "the wall-clock time instead: a request's time on its critical path (walking back "
        "from the root's end, the child that finishes last, then the last one finishing "
        "before it starts, and so on, recursively; the parent's own time fills the gaps), so "
        "of parallel children only the one waited for counts and a request's stages add up "
        "to its end-to-end time.",
        series=_stage_breakdown,
        answer=StageBreakdownSerializer,
        series_per_step=_stage_count,
        draws=("breakdown",),
        card="dashboards/charts/stage_breakdown.html",
        live=(STAGE_SHARES,),
    )
)


def _sla_attainment(request: ChartRequest) -> Any:
    params = request.params
    series = sla_queries.attainment(
        params["objective"], params["start"], params["end"], params["step"], request.now
    )
    return AttainmentSeriesSerializer(series).data


register(
    Chart(
        id="sla-attainment",
        title="Attainment over time of one of the pipeline's SLA objectives",
        description="Good and total requests per step of the window, from the exact "
        "per-minute counters (minutes in maintenance windows left out), the attainment and "
        "error budget of the objective's own window (rolling 28 days or calendar month, as of "
        "now) and the budget left at the end of each step. The same answer as "
        "`/api/slas/{id}/attainment/`, for an objective of this pipeline.",
        series=_sla_attainment,
        query=ObjectiveAttainmentQuerySerializer,
        answer=AttainmentSeriesSerializer,
        draws=("sla",),
        card="dashboards/charts/sla_attainment.html",
        live=(POINTS,),
        # Exact counters summed per step in the database: as light as the objective's API.
        heavy=False,
    )
)


def _attributes(request: ChartRequest) -> Any:
    pipeline, params = request.pipeline, request.params
    keys = cohort_attributes(pipeline)
    key = params.get("key") or keys[0]
    result = attribute_queries.attribute_breakdown(
        pipeline, key, params["start"], params["end"], params["q"]
    )
    names = dict(pipeline.stages.values_list("pk", "name"))
    can_add = request.user.has_perm("pipelines.add_cohortattribute")
    data = {
        **{name: getattr(result, name) for name in result.__dataclass_fields__},
        "keys": keys,
        "other_keys": [
            k for k in attribute_queries.attribute_keys(pipeline, params["end"]) if k not in keys
        ],
        "add_url": reverse("admin:pipelines_pipeline_change", args=[pipeline.pk])
        if can_add
        else None,
        "max_values": attribute_queries.MAX_VALUES,
        "groups": [
            {
                "stage": {
                    "id": group.stage_id,
                    "name": END_TO_END if group.stage_id is None else names[group.stage_id],
                },
                "value": group.value,
                "n": group.n,
                "error_rate": group.error_rate,
                "quantiles_ms": group.quantiles_ms,
            }
            for group in result.groups
        ],
    }
    return AttributeBreakdownSerializer(data).data


register(
    Chart(
        id="attributes",
        title="Latency per value of a cohort attribute, over the whole window",
        description="Percentiles of each stage's spans (and of the root spans, end to end) per "
        "value of the attribute, merged from the cohort rollups over the whole window: every "
        "span counts, quantiles within 1%. Only cohort attributes (`keys`: model.version, "
        "service.version and those an admin adds to the pipeline) have values; for another "
        "key `cohort` is false and `add_url` (admins only) is where to add it.",
        series=_attributes,
        query=AttributeQuerySerializer,
        answer=AttributeBreakdownSerializer,
        draws=("attributes",),
        card="dashboards/charts/attributes.html",
        operation_id="pipeline_attribute_breakdown",
    )
)


def _deployments(request: ChartRequest) -> Any:
    start, end = request.params["start"], request.params["end"]
    markers = queries.deployment_markers(request.pipeline, start, end)
    return DeploymentsSerializer({"start": start, "end": end, "markers": markers}).data


# The page marks them on every time chart: no card of its own.
register(
    Chart(
        id="deployments",
        title="Deployment markers of a pipeline",
        description="Versions that appeared (with the one seen last before) or went away "
        "within the window, from the first and last minute each version appears in the "
        "pipeline's cohort rollups.",
        series=_deployments,
        answer=DeploymentsSerializer,
    )
)


def _bottleneck(request: ChartRequest) -> Any:
    pipeline, params = request.pipeline, request.params
    found = bottlenecks([pipeline], params["start"], params["end"], params["step"])[pipeline.pk]
    data = BottleneckSerializer(found).data
    # The window read is widened to whole rows; it still ends no later than now.
    data["end"] = iso_utc(min(found.end, request.now))
    return data


# The page shows the last 24 hours' class as a badge in its header, rendered with the page.
register(
    Chart(
        id="bottleneck",
        title="Bottleneck class of a pipeline",
        description="Compute-, feature-, queue- or network/serialization-bound when one kind of "
        "work dominates the stage self time of the window's slowest 1% (the requests above its "
        "p99; only when there are at least 10 of them), else of all requests; balanced or "
        'unclassified otherwise. A kind dominates ("most of the tail") when its share is at '
        "least 40% and at least 10 points above the next kind's. Fewer than 50 requests: "
        "unclassified. The window read is `start` to `end` of the answer: minute rows where "
        "they are kept, so never past the `end` asked for. With the shares behind it, the "
        "usual remedies, and the last change of class between buckets of `step`: named only "
        "when the new class held in 2 consecutive buckets of 50 requests or more and is the "
        "window's class.",
        series=_bottleneck,
        query=BottleneckQuerySerializer,
        answer=BottleneckSerializer,
    )
)

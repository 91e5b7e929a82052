"""REST API of the pipeline page's charts that no other app serves: the stage breakdown over
time, the bottleneck class, deployment markers and the breakdown by attribute. Another team's
pipeline is a 404."""

from __future__ import annotations

from typing import Any, ClassVar

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from latencyboard.dashboards import attribute_queries, queries
from latencyboard.dashboards.bottleneck_queries import bottlenecks
from latencyboard.dashboards.serializers import (
    AttributeBreakdownSerializer,
    AttributeQuerySerializer,
    BottleneckQuerySerializer,
    BottleneckSerializer,
    DeploymentsSerializer,
    StageBreakdownSerializer,
    WindowQuerySerializer,
)
from latencyboard.fairness.heavy_reads import HeavyRead
from latencyboard.moments import iso_utc
from latencyboard.pipelines.mapping import END_TO_END
from latencyboard.pipelines.models import Pipeline, cohort_attributes

_NOT_FOUND = OpenApiResponse(description="No such pipeline in your teams.")
_INVALID = OpenApiResponse(description="Invalid parameters, with an error per field.")


def _chart(
    operation_id: str,
    summary: str,
    description: str,
    query: type[WindowQuerySerializer],
    answer: type[serializers.Serializer],
) -> Any:
    """The schema of a chart's GET: ``query`` parameters, ``answer`` or a 400 or a 404."""
    return extend_schema_view(
        get=extend_schema(
            operation_id=operation_id,
            summary=summary,
            description=description,
            parameters=[query],
            responses={200: answer, 400: _INVALID, 404: _NOT_FOUND},
        )
    )


class _ChartView(HeavyRead, APIView):
    """A chart of one pipeline of the user's teams over a window: reads ``query`` and
    answers what :meth:`answer` gives for the pipeline and the validated parameters."""

    query: ClassVar[type[WindowQuerySerializer]] = WindowQuerySerializer

    def get(self, request: Request, pipeline_id: int) -> Response:
        try:
            pipeline = queries.pipeline_of(request.user, pipeline_id)
        except Pipeline.DoesNotExist:
            raise NotFound from None
        context = {"now": timezone.now(), "series": self.series(pipeline)}
        given = self.query(data=request.query_params, context=context)
        given.is_valid(raise_exception=True)
        return Response(self.answer(pipeline, dict(given.validated_data)))

    def series(self, pipeline: Pipeline) -> int:
        """How many series each step bucket of the answer holds: its point budget."""
        return 1

    def answer(self, pipeline: Pipeline, params: dict[str, Any]) -> Any:
        raise NotImplementedError


@_chart(
    "pipeline_stage_breakdown",
    "Stage breakdown of a pipeline's requests, and how it moved",
    "Mean self time per stage over all requests and over the slowest 1% of the window (the "
    "requests above the window's end-to-end p99, from the merged sketch buckets: exact up to "
    "the p99's own 1% bucket), with each stage's share; and the shares per step bucket, each "
    "bucket's slowest 1% above its own p99. With fewer than 10 requests above the p99 "
    "(under some 1,000 requests) the tail figures are null: too few to mean anything. A "
    "stage's self time is its duration less the union of its children's; children running "
    "in parallel each keep their own, so shares divide the work done, which can exceed the "
    "wall-clock time. The critical-path figures divide the wall-clock time instead: a "
    "request's time on its critical path (walking back from the root's end, the child that "
    "finishes last, then the last one finishing before it starts, and so on, recursively; "
    "the parent's own time fills the gaps), so of parallel children only the one waited for "
    "counts and a request's stages add up to its end-to-end time.",
    WindowQuerySerializer,
    StageBreakdownSerializer,
)
class StageBreakdownView(_ChartView):
    """Where a pipeline's end-to-end time goes, stage by stage."""

    def series(self, pipeline: Pipeline) -> int:
        return pipeline.stages.count()

    def answer(self, pipeline: Pipeline, params: dict[str, Any]) -> Any:
        found = queries.breakdown(pipeline, params["start"], params["end"], params["step"])
        data = StageBreakdownSerializer(found).data
        # Buckets lie on the step grid; the window still ends no later than now.
        data["end"] = iso_utc(min(found.summary.end, params["now"]))
        data["series"]["end"] = iso_utc(min(found.series.end, params["now"]))
        return data


@_chart(
    "pipeline_bottleneck",
    "Bottleneck class of a pipeline",
    "Compute-, feature-, queue- or network/serialization-bound when one kind of work "
    "dominates the stage self time of the window's slowest 1% (the requests above its p99; "
    "only when there are at least 10 of them), else of all requests; balanced or "
    'unclassified otherwise. A kind dominates ("most of the tail") when its share is at '
    "least 40% and at least 10 points above the next kind's. Fewer than 50 requests: "
    "unclassified. The window read is `start` to `end` of the answer: minute rows where they "
    "are kept, so never past the `end` asked for. With the shares behind it, the usual "
    "remedies, and the last change of class between buckets of `step`: named only when the "
    "new class held in 2 consecutive buckets of 50 requests or more and is the window's "
    "class.",
    BottleneckQuerySerializer,
    BottleneckSerializer,
)
class BottleneckView(_ChartView):
    """What kind of work a pipeline's slow requests wait on."""

    query = BottleneckQuerySerializer

    def answer(self, pipeline: Pipeline, params: dict[str, Any]) -> Any:
        found = bottlenecks([pipeline], params["start"], params["end"], params["step"])
        data = BottleneckSerializer(found[pipeline.pk]).data
        # The window read is widened to whole rows; it still ends no later than now.
        data["end"] = iso_utc(min(found[pipeline.pk].end, params["now"]))
        return data


@_chart(
    "pipeline_deployments",
    "Deployment markers of a pipeline",
    "Versions that appeared (with the one seen last before) or went away within the window, "
    "from the first and last minute each version appears in the pipeline's cohort rollups.",
    WindowQuerySerializer,
    DeploymentsSerializer,
)
class DeploymentsView(_ChartView):
    """Where a pipeline's ``service.version`` or ``model.version`` changed."""

    def answer(self, pipeline: Pipeline, params: dict[str, Any]) -> Any:
        start, end = params["start"], params["end"]
        markers = queries.deployment_markers(pipeline, start, end)
        return DeploymentsSerializer({"start": start, "end": end, "markers": markers}).data


@_chart(
    "pipeline_attribute_breakdown",
    "Latency per value of a cohort attribute, over the whole window",
    "Percentiles of each stage's spans (and of the root spans, end to end) per value of the "
    "attribute, merged from the cohort rollups over the whole window: every span counts, "
    "quantiles within 1%. Only cohort attributes (`keys`: model.version, service.version and "
    "those an admin adds to the pipeline) have values; for another key `cohort` is false and "
    "`add_url` (admins only) is where to add it.",
    AttributeQuerySerializer,
    AttributeBreakdownSerializer,
)
class AttributeBreakdownView(_ChartView):
    """Latency per value of a cohort attribute, from the cohort rollups."""

    query = AttributeQuerySerializer

    def answer(self, pipeline: Pipeline, params: dict[str, Any]) -> Any:
        keys = cohort_attributes(pipeline)
        key = params.get("key") or keys[0]
        result = attribute_queries.attribute_breakdown(
            pipeline, key, params["start"], params["end"], params["q"]
        )
        names = dict(pipeline.stages.values_list("pk", "name"))
        can_add = self.request.user.has_perm("pipelines.add_cohortattribute")
        data = {
            **{field: getattr(result, field) for field in result.__dataclass_fields__},
            "keys": keys,
            "other_keys": [
                k
                for k in attribute_queries.attribute_keys(pipeline, params["end"])
                if k not in keys
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

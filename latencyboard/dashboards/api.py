"""REST API of the pipeline page's charts that no other app serves: the stage breakdown over
time, the bottleneck class, deployment markers and the breakdown by attribute. Another team's
pipeline is a 404."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
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
from latencyboard.pipelines.models import Pipeline, cohort_attributes
from latencyboard.rollups.queries import END_TO_END
from latencyboard.rollups.share_queries import StageBreakdown, stage_breakdown

_NOT_FOUND = OpenApiResponse(description="No such pipeline in your teams.")
_INVALID = OpenApiResponse(description="Invalid parameters, with an error per field.")


def _pipeline(request: Request, pipeline_id: int) -> Pipeline:
    try:
        return queries.pipeline_of(request.user, pipeline_id)
    except Pipeline.DoesNotExist:
        raise NotFound from None


def _params(serializer: type[WindowQuerySerializer], request: Request) -> dict[str, Any]:
    query = serializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


@dataclass(frozen=True, slots=True)
class _Breakdown:
    summary: StageBreakdown
    series: queries.ShareSeries


class StageBreakdownView(APIView):
    """Where a pipeline's end-to-end time goes, stage by stage."""

    @extend_schema(
        operation_id="pipeline_stage_breakdown",
        summary="Stage breakdown of a pipeline's requests, and how it moved",
        description="Mean self time per stage over all requests and over the slowest 1% "
        "(per minute) of the window, with each stage's share; and the shares per step bucket.",
        parameters=[WindowQuerySerializer],
        responses={200: StageBreakdownSerializer, 400: _INVALID, 404: _NOT_FOUND},
    )
    def get(self, request: Request, pipeline_id: int) -> Response:
        pipeline = _pipeline(request, pipeline_id)
        params = _params(WindowQuerySerializer, request)
        start, end = params["start"], params["end"]
        breakdown = _Breakdown(
            stage_breakdown(pipeline, start, end),
            queries.share_series(pipeline, start, end, params["step"]),
        )
        return Response(StageBreakdownSerializer(breakdown).data)


class BottleneckView(APIView):
    """What kind of work a pipeline's slow requests wait on."""

    @extend_schema(
        operation_id="pipeline_bottleneck",
        summary="Bottleneck class of a pipeline",
        description="Compute-, feature-, queue- or network/serialization-bound when one kind "
        "of work dominates the stage self time of the slowest 1% (else of all requests) over "
        "the window; balanced or unclassified otherwise. With the shares behind it, the usual "
        "remedies, and the last change of class between buckets of `step`.",
        parameters=[BottleneckQuerySerializer],
        responses={200: BottleneckSerializer, 400: _INVALID, 404: _NOT_FOUND},
    )
    def get(self, request: Request, pipeline_id: int) -> Response:
        pipeline = _pipeline(request, pipeline_id)
        params = _params(BottleneckQuerySerializer, request)
        found = bottlenecks([pipeline], params["start"], params["end"], params["step"])
        return Response(BottleneckSerializer(found[pipeline.pk]).data)


class DeploymentsView(APIView):
    """Where a pipeline's ``service.version`` or ``model.version`` changed."""

    @extend_schema(
        operation_id="pipeline_deployments",
        summary="Deployment markers of a pipeline",
        description="Versions that appeared (with the one seen last before) or went away "
        "within the window, from the first and last minute each version appears in the "
        "pipeline's cohort rollups.",
        parameters=[WindowQuerySerializer],
        responses={200: DeploymentsSerializer, 400: _INVALID, 404: _NOT_FOUND},
    )
    def get(self, request: Request, pipeline_id: int) -> Response:
        pipeline = _pipeline(request, pipeline_id)
        params = _params(WindowQuerySerializer, request)
        markers = queries.deployment_markers(pipeline, params["start"], params["end"])
        return Response(
            DeploymentsSerializer(
                {"start": params["start"], "end": params["end"], "markers": markers}
            ).data
        )


class AttributeBreakdownView(APIView):
    """Latency per value of a cohort attribute, from the cohort rollups."""

    @extend_schema(
        operation_id="pipeline_attribute_breakdown",
        summary="Latency per value of a cohort attribute, over the whole window",
        description="Percentiles of each stage's spans (and of the root spans, end to end) "
        "per value of the attribute, merged from the cohort rollups over the whole window: "
        "every span counts, quantiles within 1%. Only cohort attributes (`keys`: "
        "model.version, service.version and those an admin adds to the pipeline) have "
        "values; for another key `cohort` is false and `add_url` (admins only) is where "
        "to add it.",
        parameters=[AttributeQuerySerializer],
        responses={200: AttributeBreakdownSerializer, 400: _INVALID, 404: _NOT_FOUND},
    )
    def get(self, request: Request, pipeline_id: int) -> Response:
        pipeline = _pipeline(request, pipeline_id)
        params = _params(AttributeQuerySerializer, request)
        keys = cohort_attributes(pipeline)
        key = params.get("key") or keys[0]
        result = attribute_queries.attribute_breakdown(
            pipeline, key, params["start"], params["end"], params["q"]
        )
        names = dict(pipeline.stages.values_list("pk", "name"))
        can_add = request.user.has_perm("pipelines.add_cohortattribute")
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
        return Response(AttributeBreakdownSerializer(data).data)

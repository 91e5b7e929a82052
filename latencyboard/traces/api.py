"""REST API of traces: search by root span, exemplars of a minute's (or a chart bucket's)
quantile, one waterfall.

Pipelines, stages and traces of teams the user is not in are not found (404, never 403).
"""

from __future__ import annotations

import uuid

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from latencyboard.fairness.heavy_reads import HeavyRead
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.traces import exemplar_queries, queries, waterfall_queries
from latencyboard.traces.serializers import (
    ExemplarQuerySerializer,
    ExemplarsSerializer,
    TraceSearchQuerySerializer,
    TraceSearchSerializer,
    exemplars_data,
    trace_search_data,
)
from latencyboard.traces.waterfall_serializers import (
    TraceWaterfallSerializer,
    trace_waterfall_data,
)
from latencyboard.windows import HOUR, MAX_TRACE_SEARCH_WINDOW

_NOT_FOUND = OpenApiResponse(description="No such pipeline or stage in your teams.")
_INVALID = OpenApiResponse(description="Invalid parameters, with an error per field.")


class TraceSearchView(HeavyRead, APIView):
    """Search traces by their root spans."""

    @extend_schema(
        operation_id="traces_search",
        summary="Slowest traces matching filters",
        description="Root spans (end-to-end requests) of your pipelines that started in the "
        f"window, slowest first. The window defaults to the last hour and is at most "
        f"{MAX_TRACE_SEARCH_WINDOW // HOUR} h: traces are searched in raw spans.",
        parameters=[TraceSearchQuerySerializer],
        responses={200: TraceSearchSerializer, 400: _INVALID, 404: _NOT_FOUND},
    )
    def get(self, request: Request) -> Response:
        query = TraceSearchQuerySerializer(
            data=request.query_params, context={"now": timezone.now()}
        )
        query.is_valid(raise_exception=True)
        try:
            result = queries.search_traces(
                request.user, queries.TraceFilters(**query.validated_data)
            )
        except (Pipeline.DoesNotExist, Stage.DoesNotExist):
            raise NotFound from None
        except queries.InvalidTraceQuery as exc:
            raise ValidationError({exc.field: [exc.message]}) from exc
        return Response(trace_search_data(result))


class TraceExemplarsView(APIView):
    """Traces behind one point of a percentile chart."""

    @extend_schema(
        operation_id="traces_exemplars",
        summary="Traces nearest a minute's quantile",
        description="The minute's (or, with step, the chart bucket's) exact quantile of a "
        "stage's (or the end-to-end) durations, computed from its raw spans, and the traces "
        "whose span is nearest to it.",
        parameters=[ExemplarQuerySerializer],
        responses={200: ExemplarsSerializer, 400: _INVALID, 404: _NOT_FOUND},
    )
    def get(self, request: Request) -> Response:
        query = ExemplarQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            result = exemplar_queries.trace_exemplars(request.user, **query.validated_data)
        except (Pipeline.DoesNotExist, Stage.DoesNotExist):
            raise NotFound from None
        except queries.InvalidTraceQuery as exc:
            raise ValidationError({exc.field: [exc.message]}) from exc
        return Response(exemplars_data(result))


class TraceWaterfallView(APIView):
    """One trace, span by span."""

    @extend_schema(
        operation_id="traces_waterfall",
        summary="A trace's waterfall",
        description="Every span of the trace stored for your teams, nested by parent, with "
        "self time and the critical path.",
        parameters=[
            OpenApiParameter(
                "trace_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="32 hex chars."
            )
        ],
        responses={
            200: TraceWaterfallSerializer,
            404: OpenApiResponse(description="No span of this trace in your teams."),
        },
    )
    def get(self, request: Request, trace_id: uuid.UUID) -> Response:
        try:
            result = waterfall_queries.trace_waterfall(request.user, trace_id)
        except waterfall_queries.TraceNotFound:
            raise NotFound from None
        return Response(trace_waterfall_data(result))

"""REST API of rollups: per-stage latency percentiles of a pipeline."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.queries import InvalidPercentileQuery, percentile_series
from latencyboard.rollups.serializers import (
    PercentileQuerySerializer,
    PercentileSeriesSerializer,
    percentile_series_data,
)


class PipelinePercentilesView(APIView):
    """Latency percentiles over time of a pipeline's stages."""

    @extend_schema(
        operation_id="pipeline_percentiles",
        summary="Per-stage latency percentiles over time",
        description="For each stage and each step bucket of the window: span count, error "
        "rate, mean and the requested quantiles, merged from rollup sketches; plus a summary "
        "over the whole window. Buckets without spans have null figures.",
        parameters=[PercentileQuerySerializer],
        responses={
            200: PercentileSeriesSerializer,
            400: OpenApiResponse(description="Invalid parameters, with an error per field."),
            404: OpenApiResponse(description="No such pipeline in your teams."),
        },
    )
    def get(self, request: Request, pipeline_id: int) -> Response:
        query = PercentileQuerySerializer(
            data=request.query_params, context={"now": timezone.now()}
        )
        query.is_valid(raise_exception=True)
        params = query.validated_data
        try:
            result = percentile_series(
                request.user,
                pipeline_id,
                params["stages"],
                params["start"],
                params["end"],
                params["step"],
                params["q"],
            )
        except Pipeline.DoesNotExist:
            raise NotFound from None
        except InvalidPercentileQuery as exc:
            raise ValidationError({exc.field: [exc.message]}) from exc
        return Response(percentile_series_data(result))

"""REST API of compare: a pipeline's stages, side A against side B."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from latencyboard.compare.queries import NotACohort, compare
from latencyboard.compare.serializers import CompareQuerySerializer, ComparisonSerializer
from latencyboard.fairness.heavy_reads import HeavyRead
from latencyboard.pipelines.models import Pipeline


class CompareView(HeavyRead, APIView):
    """Per-stage p50/p95/p99 of two windows, or of two values of an attribute, side by side."""

    @extend_schema(
        operation_id="compare",
        summary="Compare two windows or two attribute values, stage by stage",
        description="For end to end and each stage: p50, p95 and p99 of side A and side B, "
        "the change B - A in ms and percent with a distribution-free confidence interval "
        "(binomial rank bounds read through each side's sketch and widened by its 1% "
        "relative error; 95%, simultaneous over a stage's quantiles), whether it is "
        "significant (the interval excludes 0 and the change is at least 1 ms and 2%) and a "
        "verdict in words; plus a headline. Each side is merged from the rollups (windows) "
        "or the cohort rollups (attribute values): every span counts, nothing is sampled. "
        "Windows are read in whole minutes. A quantile needs enough spans on both sides "
        "(`min_spans`), else it has no interval and no verdict.",
        parameters=[CompareQuerySerializer],
        responses={
            200: ComparisonSerializer,
            400: OpenApiResponse(description="Invalid parameters, with an error per field."),
            404: OpenApiResponse(description="No such pipeline in your teams."),
        },
    )
    def get(self, request: Request) -> Response:
        query = CompareQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        try:
            result = compare(
                request.user, params["pipeline"], params["a"], params["b"], params["attribute"]
            )
        except Pipeline.DoesNotExist:
            raise NotFound from None
        except NotACohort:
            raise ValidationError(
                {
                    "attr": [
                        f"{params['attribute']} is not a cohort attribute of this pipeline, so "
                        "its values have no sketches; an admin can add it to the pipeline's "
                        "cohort attributes."
                    ]
                }
            ) from None
        return Response(ComparisonSerializer(result).data)

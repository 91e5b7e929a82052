"""REST API of the pipeline page's charts: every chart of :mod:`latencyboard.dashboards.charts`
at ``/api/pipelines/<id>/<chart id>/``, one view for them all. Another team's pipeline is a
404, as a missing one is; an unknown chart is a 404 too."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from latencyboard.dashboards import queries
from latencyboard.dashboards.charts import CHARTS, Chart, ChartRequest
from latencyboard.fairness.heavy_reads import HeavyRead
from latencyboard.pipelines.models import Pipeline
from latencyboard.renderers import OrjsonRenderer, ShapeNegotiation

CHART_ROUTE = "<chart:chart>"
"""The chart's segment of the one route of every chart (``api_urls``)."""


class ChartView(HeavyRead, APIView):
    """A chart of one pipeline of the user's teams over a window: reads the chart's query and
    answers what its series function gives for the pipeline and the validated parameters."""

    renderer_classes = [OrjsonRenderer, BrowsableAPIRenderer]
    content_negotiation_class = ShapeNegotiation

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if kwargs["chart"].heavy:
            super().initial(request, *args, **kwargs)
        else:  # a light chart takes no heavy-read slot
            APIView.initial(self, request, *args, **kwargs)

    def get(self, request: Request, pipeline_id: int, chart: Chart) -> Response:
        try:
            pipeline = queries.pipeline_of(request.user, pipeline_id)
        except Pipeline.DoesNotExist:
            raise NotFound from None
        context = {
            "now": timezone.now(),
            "series": chart.series_per_step(pipeline),
            "pipeline": pipeline,
        }
        given = chart.query(data=request.query_params, context=context)
        given.is_valid(raise_exception=True)
        return Response(
            chart.series(ChartRequest(pipeline, request.user, dict(given.validated_data)))
        )


_NOT_FOUND = OpenApiResponse(description="No such pipeline in your teams.")
_INVALID = OpenApiResponse(description="Invalid parameters, with an error per field.")


def documented(chart: Chart) -> Any:
    """The view of ``chart`` as the schema shows it: its own operation, parameters and answer."""

    class Documented(ChartView):
        @extend_schema(
            operation_id=chart.operation,
            summary=chart.title,
            description=chart.description,
            parameters=[chart.query],
            responses={200: chart.answer, 400: _INVALID, 404: _NOT_FOUND},
        )
        def get(self, request: Request, pipeline_id: int, chart: Chart) -> Response:
            return super().get(request, pipeline_id, chart)

    return Documented.as_view()


def chart_endpoints(endpoints: list[tuple[str, str, str, Any]], **kwargs: Any) -> list[Any]:
    """drf-spectacular preprocessing hook: the one route of the charts, one operation per
    registered chart (``SPECTACULAR_SETTINGS["PREPROCESSING_HOOKS"]``)."""
    expanded: list[Any] = []
    for path, path_regex, method, callback in endpoints:
        if getattr(callback, "cls", None) is not ChartView:
            expanded.append((path, path_regex, method, callback))
            continue
        expanded.extend(
            (
                path.replace("{chart}", chart.id),
                path_regex.replace(CHART_ROUTE, chart.id),
                method,
                documented(chart),
            )
            for chart in CHARTS.values()
        )
    return expanded

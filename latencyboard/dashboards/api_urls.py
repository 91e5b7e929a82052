"""The one route of every chart of the pipeline page, included under ``/api/``."""

from django.urls import path, register_converter

from latencyboard.dashboards.api import CHART_ROUTE, ChartView
from latencyboard.dashboards.charts import CHARTS, ID_PATTERN, Chart


class ChartConverter:
    """A registered chart's id; any other segment does not match, so the routes after this
    one (and a 404 for an unknown chart) still apply."""

    regex = ID_PATTERN

    def to_python(self, value: str) -> Chart:
        try:
            return CHARTS[value]
        except KeyError:
            raise ValueError(value) from None

    def to_url(self, value: str) -> str:
        return value


register_converter(ChartConverter, "chart")

urlpatterns = [
    path(
        f"pipelines/<int:pipeline_id>/{CHART_ROUTE}/",
        ChartView.as_view(),
        name="api-pipeline-chart",
    ),
]

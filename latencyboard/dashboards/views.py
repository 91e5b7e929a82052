"""The pipeline page: a server-rendered frame whose charts fetch their data from the API."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from latencyboard.dashboards import charts, queries
from latencyboard.dashboards.bottleneck_queries import bottlenecks
from latencyboard.dashboards.overview_queries import WINDOWS as OVERVIEW_WINDOWS
from latencyboard.pipelines.derivation import MEASURES
from latencyboard.pipelines.mapping import END_TO_END
from latencyboard.pipelines.models import Pipeline
from latencyboard.retention import queries as retention_queries
from latencyboard.rollups import tails
from latencyboard.rollups.serializers import quantile_key

# Window choices of the page: (label, seconds, step seconds); the step keeps every chart
# between 60 and 170 points.
WINDOWS = (
    ("1h", 3600, 60),
    ("6h", 6 * 3600, 300),
    ("24h", 86400, 900),
    ("7d", 7 * 86400, 3600),
    ("28d", 28 * 86400, 6 * 3600),
    ("90d", 90 * 86400, 86400),
)
PERCENTILES = (0.5, 0.9, 0.95, 0.99, 0.999)


@login_required
def pipeline(request: HttpRequest, pipeline_id: int) -> HttpResponse:
    try:
        page = queries.pipeline_page(request.user, pipeline_id, timezone.now())
    except Pipeline.DoesNotExist:
        raise Http404("No such pipeline in your teams.") from None
    pk = page.pipeline.pk
    day = OVERVIEW_WINDOWS["24h"]
    start, end = day.bounds(timezone.now())
    bottleneck = bottlenecks([page.pipeline], start, end, day.history_step)[pk]
    config = {
        "pipeline": {"id": pk, "name": str(page.pipeline)},
        "stages": [{"id": stage.id, "name": stage.name} for stage in page.stages],
        "rootStageIds": list(page.root_stage_ids),
        # LLM measures, shown with their source's definition (latencyboard.pipelines.derivation).
        "llm": [
            {"id": stage.id, "name": stage.name, "definition": stage.definition}
            for stage in page.stages
            if stage.name in MEASURES
        ],
        "endToEnd": END_TO_END,
        "objectives": [
            {
                "id": objective.pk,
                "name": objective.name,
                "stage": objective.stage.name if objective.stage else None,
                "thresholdMs": objective.threshold_ms,
                "targetPercent": float(objective.target_percent),
                "window": objective.get_window_display(),
            }
            for objective in page.objectives
        ],
        "windows": [
            {"label": label, "seconds": seconds, "step": step} for label, seconds, step in WINDOWS
        ],
        "percentiles": [{"q": q, "key": quantile_key(q)} for q in PERCENTILES],
        "stageShareGraceSeconds": settings.STAGE_SHARE_GRACE_SECONDS,
        "thinBelow": tails.MIN_TAIL_REQUESTS,
        "incidents": [
            {
                "title": incident.title,
                "openedAt": incident.opened_at.isoformat(),
                "resolvedAt": incident.resolved_at.isoformat() if incident.resolved_at else None,
            }
            for incident in page.incidents
        ],
        # Every chart's endpoint; those the page draws with their draw functions and the
        # live events that make it fetch them again.
        "charts": [
            {"id": chart.id, "url": chart.url(pk), "draws": chart.draws, "live": chart.live}
            for chart in charts.CHARTS.values()
        ],
        "urls": {"traces": reverse("traces")},
    }
    return render(
        request,
        "dashboards/pipeline.html",
        {
            "page": page,
            "config": config,
            "charts": charts.shown(),
            "windows": WINDOWS,
            "retention_days": settings.RETENTION_DAYS,
            "sampled": retention_queries.sampled_periods(),
            "bottleneck": bottleneck,
            "bottleneck_window": day.label,
        },
    )

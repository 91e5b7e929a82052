from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from latencyboard.dashboards.overview_queries import DEFAULT_WINDOW, WINDOWS, overview
from latencyboard.fairness.heavy_reads import heavy_read
from latencyboard.teams.queries import limits_of


@login_required
@heavy_read
def home(request: HttpRequest) -> HttpResponse:
    """The overview: every pipeline of the user's teams, most over budget first, over the
    window ``?window=`` (1h, 24h or 7d); without pipelines, how to send traces here."""
    window = WINDOWS.get(request.GET.get("window", DEFAULT_WINDOW))
    if window is None:
        choices = ", ".join(WINDOWS)
        return HttpResponseBadRequest(f"Unknown window: choose one of {choices}.")
    host = request.get_host().rsplit(":", 1)[0]
    return render(
        request,
        "web/home.html",
        {
            "overview": overview(request.user, timezone.now(), window),
            "windows": WINDOWS.values(),
            "otlp_http_endpoint": f"http://{host}:{settings.INGEST_HTTP_PORT}",
            "otlp_grpc_endpoint": f"http://{host}:{settings.INGEST_GRPC_PORT}",
            "web_endpoint": request.build_absolute_uri("/").rstrip("/"),
            "team_limits": limits_of(request.user, settings.TEAM_MAX_PIPELINES),
            "stage_cap": settings.PIPELINE_MAX_STAGES,
            "cohort_values": settings.COHORT_VALUES_PER_DAY,
        },
    )


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip, for load balancers and the local runner."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})

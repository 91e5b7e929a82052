from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.queries import teams_of


@login_required
def home(request: HttpRequest) -> HttpResponse:
    teams = list(teams_of(request.user))
    pipelines = Pipeline.objects.filter(team__in=teams).select_related("team")
    return render(
        request,
        "web/home.html",
        {
            "teams": teams,
            "pipelines": pipelines,
            "otlp_http_endpoint": f"http://{request.get_host().rsplit(':', 1)[0]}"
            f":{settings.INGEST_HTTP_PORT}",
            "ingest_grpc_port": settings.INGEST_GRPC_PORT,
        },
    )


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip, for load balancers and the local runner."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})

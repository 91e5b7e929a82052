from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from latencyboard.dashboards.queries import overview


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The overview: every pipeline of the user's teams, most over budget first; without
    pipelines, how to send traces here."""
    host = request.get_host().rsplit(":", 1)[0]
    return render(
        request,
        "web/home.html",
        {
            "overview": overview(request.user, timezone.now()),
            "otlp_http_endpoint": f"http://{host}:{settings.INGEST_HTTP_PORT}",
            "otlp_grpc_endpoint": f"http://{host}:{settings.INGEST_GRPC_PORT}",
            "web_endpoint": request.build_absolute_uri("/").rstrip("/"),
        },
    )


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip, for load balancers and the local runner."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})

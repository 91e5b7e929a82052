"""OTLP/HTTP under the web app (``POST /v1/traces``), for deployments with one public port."""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ingest.service import HttpReply, IngestService
from ingest.writer import SpanWriter
from latencyboard.db import conninfo

_CHUNK = 1024 * 1024


@cache
def _service() -> IngestService:
    return IngestService(
        SpanWriter(
            conninfo(),
            max_connections=4,
            max_pipelines=settings.TEAM_MAX_PIPELINES,
            stage_cap=settings.PIPELINE_MAX_STAGES,
        ),
        max_body_bytes=settings.INGEST_MAX_BODY_BYTES,
        retention_days=settings.RETENTION_DAYS,
    )


def _read_capped(request: HttpRequest, cap: int) -> bytes | None:
    """The body, or None past ``cap`` bytes.

    Reading the stream ourselves (not ``request.body``) keeps Django's 2.5 MB
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` from turning a large, valid export into a 400.
    """
    chunks, size = [], 0
    while chunk := request.read(_CHUNK):
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


@csrf_exempt
@require_POST
def traces(request: HttpRequest) -> HttpResponse:
    service = _service()
    headers = {key.lower(): value for key, value in request.headers.items()}
    # The headers decide first (token, declared size), so the body stream is never touched
    # for a request that is refused anyway.
    admission = service.admit_http(headers)
    if isinstance(admission, HttpReply):
        reply = admission
    else:
        body = _read_capped(request, admission.max_bytes)
        reply = (
            service.too_large_reply(admission)
            if body is None
            else service.export_http(admission, body, headers)
        )
    response = HttpResponse(reply.body, status=reply.status, content_type=reply.content_type)
    for key, value in reply.headers.items():
        response[key] = value
    return response

"""The product's URLs plus views that fail on purpose, for tests of the error pages."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.urls import path

from latencyboard.urls import urlpatterns as product_urlpatterns

SECRET = "s3cr3t-internal-detail"


def crash(request: HttpRequest) -> HttpResponse:
    raise RuntimeError(SECRET)


def forbidden(request: HttpRequest) -> HttpResponse:
    raise PermissionDenied(SECRET)


def suspicious(request: HttpRequest) -> HttpResponse:
    raise SuspiciousOperation(SECRET)


def database_down(request: HttpRequest) -> HttpResponse:
    raise OperationalError(f"connection refused: {SECRET}")


handler500 = "latencyboard.web.errors.server_error"

urlpatterns = [
    path("test-errors/database-down/", database_down),
    path("test-errors/crash/", crash),
    path("test-errors/forbidden/", forbidden),
    path("test-errors/suspicious/", suspicious),
    # Under the Prometheus API's prefix, whose errors have Prometheus' shape.
    path("prometheus/test-errors/database-down/", database_down),
    path("prometheus/test-errors/crash/", crash),
    *product_urlpatterns,
]

"""The product's URLs plus views that fail on purpose, for tests of the error pages."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, SuspiciousOperation
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


urlpatterns = [
    path("test-errors/crash/", crash),
    path("test-errors/forbidden/", forbidden),
    path("test-errors/suspicious/", suspicious),
    *product_urlpatterns,
]

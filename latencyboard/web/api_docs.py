"""Redoc for ``/api/docs/`` without anything from another host.

The sidecar package's Redoc bundle draws an "API docs by Redocly" image from
``cdn.redoc.ly`` that no option turns off; the page's ``img-src 'self'`` stops it, and the
browser logs a Content-Security-Policy error on every visit. This serves the same bundle with
that image taken from here instead (the product's icon).
"""

from __future__ import annotations

import functools
from typing import Final

from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse
from django.templatetags.static import static
from django.views.decorators.http import require_GET

BUNDLE: Final = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
REDOCLY_LOGO: Final = "https://cdn.redoc.ly/redoc/logo-mini.svg"
_A_DAY: Final = 24 * 3600


@functools.cache
def _bundle(logo: str) -> bytes:
    path = finders.find(BUNDLE)
    assert isinstance(path, str), BUNDLE  # drf-spectacular-sidecar is a dependency
    with open(path, "rb") as file:
        return file.read().replace(REDOCLY_LOGO.encode(), logo.encode())


@require_GET
def redoc_bundle(request: HttpRequest) -> HttpResponse:
    """The sidecar's Redoc bundle, its Redocly image served by this host."""
    response = HttpResponse(_bundle(static("favicon.svg")), content_type="text/javascript")
    response["Cache-Control"] = f"public, max-age={_A_DAY}"
    return response

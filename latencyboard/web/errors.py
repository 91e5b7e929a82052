"""The server-error handler: a database that cannot be reached is a 503 to retry, not a 500."""

from __future__ import annotations

import sys

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.template import loader
from django.views.defaults import server_error as django_server_error


def server_error(request: HttpRequest) -> HttpResponse:
    """Django calls this inside the ``except`` block of an uncaught exception (DEBUG off).

    When PostgreSQL cannot be reached (restarting, failing over, out of connections) the
    request may succeed in a moment: 503 with Retry-After, as ingest answers. Anything else
    is our 500 page. Rendered without a request context, as Django's own handler is, so that
    the page itself needs no database."""
    if isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        response: HttpResponse = HttpResponseServerError(
            loader.get_template("503.html").render(), status=503
        )
        response["Retry-After"] = str(settings.WEB_UNAVAILABLE_RETRY_AFTER_SECONDS)
        return response
    return django_server_error(request)

"""Every error answered under ``/api/`` is JSON, as DRF's own errors are.

DRF answers its views' errors in JSON, but not everything under ``/api/`` is a DRF answer: a
path no endpoint serves gets Django's 404 page (with DEBUG on, its list of URL patterns), a
refused CSRF check Django's 403 page, a wrong method on the docs or the schema their HTML or
YAML. A script should never have to parse a page, so any such error is turned into
``{"detail": …}`` with the same status and headers that matter (Allow, WWW-Authenticate,
Retry-After). Under ``/prometheus/`` every error not already in Prometheus' shape (a refusal
before the view, a 404, a server error) is given it: Prometheus clients read no other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from django.http import HttpRequest, HttpResponse, JsonResponse

from latencyboard.prometheus import errors as prometheus_errors

PREFIX: Final = "/api/"
_KEPT_HEADERS: Final = ("Allow", "WWW-Authenticate", "Retry-After")
_DETAILS: Final = {404: "Not found.", 405: "Method not allowed."}


class JsonApiErrors:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400:
            return response
        status = response.status_code
        detail = _DETAILS.get(status, f"{response.reason_phrase}.")
        is_json = response.get("Content-Type", "").startswith("application/json")
        if request.path.startswith(prometheus_errors.PREFIX):
            body = _json_body(response) if is_json else None
            if isinstance(body, dict) and "errorType" in body:
                return response
            given = body.get("detail") if isinstance(body, dict) else None
            message = given if isinstance(given, str) else detail
            answer = JsonResponse(prometheus_errors.error_body(status, message), status=status)
        elif request.path.startswith(PREFIX) and not is_json:
            answer = JsonResponse({"detail": detail}, status=status)
        else:
            return response
        for header in _KEPT_HEADERS:
            if header in response:
                answer[header] = response[header]
        return answer


def _json_body(response: HttpResponse) -> Any:
    """The JSON response's body, None when it cannot be read."""
    if response.streaming:
        return None
    try:
        return json.loads(response.content)
    except ValueError:
        return None

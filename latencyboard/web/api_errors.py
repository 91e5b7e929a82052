"""Every error answered under ``/api/`` is JSON, as DRF's own errors are.

DRF answers its views' errors in JSON, but not everything under ``/api/`` is a DRF answer: a
path no endpoint serves gets Django's 404 page (with DEBUG on, its list of URL patterns), a
refused CSRF check Django's 403 page, a wrong method on the docs or the schema their HTML or
YAML. A script should never have to parse a page, so any such error is turned into
``{"detail": …}`` with the same status and headers that matter (Allow, WWW-Authenticate,
Retry-After).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from django.http import HttpRequest, HttpResponse, JsonResponse

PREFIX: Final = "/api/"
_KEPT_HEADERS: Final = ("Allow", "WWW-Authenticate", "Retry-After")
_DETAILS: Final = {404: "Not found.", 405: "Method not allowed."}


class JsonApiErrors:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            not request.path.startswith(PREFIX)
            or response.status_code < 400
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        status = response.status_code
        detail = _DETAILS.get(status, f"{response.reason_phrase}.")
        answer = JsonResponse({"detail": detail}, status=status)
        for header in _KEPT_HEADERS:
            if header in response:
                answer[header] = response[header]
        return answer

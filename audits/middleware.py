"""Every refused attempt to change something is recorded: a 403 to a signed-in user's POST,
PUT, PATCH or DELETE, whichever view refused it (an auditor editing an objective, a viewer
revoking a token, an acknowledgement without the role)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from audits.log import record
from latencyboard.audit_trail import Subject

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class RecordRefusals:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # request.user is read after the view: DRF sets it there for token-authenticated calls.
        if (
            response.status_code == 403
            and request.method not in _SAFE_METHODS
            and request.user.is_authenticated
        ):
            # No team: which team a refused path belongs to is not known here, and a refusal
            # must not be attributed to a team the user was refused in (see audits.queries).
            record(
                request,
                "change.refused",
                Subject("path", request.path, f"{request.method} {request.path}", None),
                {"status": 403},
            )
        return response

"""Every refused attempt to change something is recorded: a 403 to a signed-in user's POST,
PUT, PATCH or DELETE, whichever view refused it (an auditor editing an objective, a viewer
revoking a token, an acknowledgement without the role).

Only a request the user made here is recorded: a page on another site can make the browser
send a POST with the user's session cookie, and that refusal (a CSRF failure, or a view's 403
to a forged request) must not write entries in the user's name. Requests with a bearer token
carry no cookie and are recorded as they come."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware

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
            and _made_here(request)
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


def _not_exempt(request: HttpRequest) -> HttpResponse:
    raise AssertionError("never called: the CSRF check only reads the request")


def _made_here(request: HttpRequest) -> bool:
    """Whether the browser says the request came from this site, and it passes Django's CSRF
    check (Origin or Referer of this site, and the CSRF token), whatever the view did: DRF's
    session views run their own check. A bearer token is never sent by a browser unasked."""
    if request.META.get("HTTP_AUTHORIZATION", "").startswith("Bearer "):
        return True
    if request.META.get("HTTP_SEC_FETCH_SITE", "same-origin") not in ("same-origin", "none"):
        return False
    check = CsrfViewMiddleware(_not_exempt)
    return check.process_view(request, _not_exempt, (), {}) is None

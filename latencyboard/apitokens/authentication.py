"""DRF authentication and permission for personal API tokens (``Authorization: Bearer``)."""

from __future__ import annotations

from typing import Any, Final

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest
from django.utils import timezone
from rest_framework import HTTP_HEADER_ENCODING, exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from latencyboard.apitokens import services
from latencyboard.apitokens.models import ApiToken, Scope

KEYWORD = b"bearer"
_FOUND: Final = "_latencyboard_bearer"


def bearer_token(request: HttpRequest) -> ApiToken | None:
    """The token of the request's ``Authorization: Bearer`` header, None without one; raises
    ``AuthenticationFailed`` for a malformed, invalid or revoked one. Looked up once per
    request: the per-team limits (middleware) need its user before DRF authenticates."""
    found: ApiToken | str | None
    if hasattr(request, _FOUND):
        found = getattr(request, _FOUND)
    else:
        found = _authenticate(request)
        setattr(request, _FOUND, found)
    if isinstance(found, str):
        raise exceptions.AuthenticationFailed(found)
    return found


def _authenticate(request: HttpRequest) -> ApiToken | str | None:
    """The header's token, None without a bearer header, else why it is refused."""
    parts = request.headers.get("Authorization", "").encode(HTTP_HEADER_ENCODING).split()
    if not parts or parts[0].lower() != KEYWORD:
        return None
    if len(parts) != 2:
        return "Send one token: 'Authorization: Bearer <token>'."
    try:
        plaintext = parts[1].decode("ascii")
    except UnicodeDecodeError:
        return "Invalid or revoked token."
    return services.authenticate(plaintext, timezone.now()) or "Invalid or revoked token."


def acting_user(request: HttpRequest) -> User | AnonymousUser:
    """Whom the request acts as, as the API authenticates it: a bearer token's user, else the
    session's; anonymous for a refused token (the API answers it 401)."""
    try:
        token = bearer_token(request)
    except exceptions.AuthenticationFailed:
        return AnonymousUser()
    return request.user if token is None else token.user


class ApiTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer lbk_…`` authenticates as the token's user.

    Requests without a bearer header are left to the next class (the browser session). Listed
    first, so that a refused request answers 401 with a ``WWW-Authenticate`` challenge.
    """

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        token = bearer_token(request._request)
        return None if token is None else (token.user, token)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class TokenScopeAllows(BasePermission):
    """A read-only token may only read; sessions and read-write tokens are not narrowed."""

    message = "This API token is read-only."

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken) or request.method in SAFE_METHODS:
            return True
        return token.scope == Scope.READ_WRITE

"""DRF authentication and permission for personal API tokens (``Authorization: Bearer``)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from latencyboard.apitokens import services
from latencyboard.apitokens.models import ApiToken, Scope

KEYWORD = b"bearer"


class ApiTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer lbk_…`` authenticates as the token's user.

    Requests without a bearer header are left to the next class (the browser session). Listed
    first, so that a refused request answers 401 with a ``WWW-Authenticate`` challenge.
    """

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "Send one token: 'Authorization: Bearer <token>'."
            )
        try:
            plaintext = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.") from None
        token = services.authenticate(plaintext, timezone.now())
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token

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

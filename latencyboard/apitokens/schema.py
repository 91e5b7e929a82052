"""The bearer scheme of API tokens in the OpenAPI schema (registered on import by apps.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "latencyboard.apitokens.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        scheme: dict[str, Any] = build_bearer_security_scheme_object(
            header_name="Authorization",
            token_prefix="Bearer",  # noqa: S106 - the scheme's name, not a secret
        )
        scheme["description"] = (
            "A personal API token (lbk_…) from the 'API tokens' page. Read-only tokens are "
            "refused (403) on every method but GET, HEAD and OPTIONS."
        )
        return scheme

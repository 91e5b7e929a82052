"""The Content-Security-Policy header of pages (their rendering is in tests/browser)."""

from __future__ import annotations

import pytest

from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db

POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data: blob:",
    "connect-src": "'self'",
    "font-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}


def directives(header: str) -> dict[str, str]:
    """The policy's directives by name (django-csp writes them in no fixed order)."""
    return dict(directive.split(" ", 1) for directive in header.split("; "))


@pytest.mark.parametrize("path", ["/login/", "/", "/account/api-tokens/", "/api/pipelines/"])
def test_pages_carry_the_strict_policy(client, path):
    client.force_login(make_user(make_team()))

    response = client.get(path)

    assert response.status_code == 200
    assert directives(response["Content-Security-Policy"]) == POLICY


def test_the_api_docs_widen_the_policy_only_for_redoc_s_search_worker(client):
    response = client.get("/api/docs/")

    assert response.status_code == 200
    assert directives(response["Content-Security-Policy"]) == {**POLICY, "worker-src": "blob:"}

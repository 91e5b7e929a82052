"""With DEBUG off, every error is our own page: the product's look, what happened in words,
nothing of the code (no traceback, no settings, no URL patterns)."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from tests.factories import make_team, make_user
from tests.latencyboard.error_urls import SECRET

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("production_errors"),
]


@pytest.fixture
def production_errors():
    with override_settings(DEBUG=False, ROOT_URLCONF="tests.latencyboard.error_urls"):
        yield


def assert_our_page(body: str, heading: str) -> None:
    assert '<a class="brand" href="/">latencyboard</a>' in body  # our base.html
    assert f"<h1>{heading}</h1>" in body
    assert SECRET not in body
    assert "Traceback" not in body
    assert "Django" not in body  # neither the technical page nor Django's bare defaults


@pytest.mark.parametrize(
    ("path", "status", "heading"),
    [
        pytest.param("/no/such/page/", 404, "Not found", id="404-no-route"),
        pytest.param("/traces/00000000000000000000000000000abc/", 404, "Not found", id="404-view"),
        pytest.param("/test-errors/forbidden/", 403, "Not allowed", id="403"),
        pytest.param("/test-errors/suspicious/", 400, "Bad request", id="400"),
        pytest.param("/test-errors/crash/", 500, "Something went wrong on our side", id="500"),
        pytest.param(
            "/test-errors/database-down/", 503, "Temporarily unavailable", id="503-database"
        ),
    ],
)
def test_errors_are_our_own_pages(path, status, heading):
    # Given a team member in production (DEBUG off)
    client = Client(raise_request_exception=False)
    client.force_login(cast(User, make_user(make_team())))

    # When a request fails
    response = client.get(path)

    # Then they see our page for it, and nothing of the internals
    assert response.status_code == status
    assert_our_page(response.content.decode(), heading)


def test_a_host_not_allowed_gets_our_400_page():
    response = Client().get("/", HTTP_HOST="attacker.example")

    assert response.status_code == 400
    assert_our_page(response.content.decode(), "Bad request")


def test_a_form_without_its_csrf_token_gets_our_403_page():
    client = Client(enforce_csrf_checks=True)

    response = client.post("/login/", {"username": "someone", "password": "guess"})

    assert response.status_code == 403
    assert_our_page(response.content.decode(), "This form has expired")


def test_a_database_that_cannot_be_reached_is_a_503_to_retry(settings):
    settings.WEB_UNAVAILABLE_RETRY_AFTER_SECONDS = 12
    # When PostgreSQL cannot be reached while a request is served (DEBUG off)
    response = Client(raise_request_exception=False).get("/test-errors/database-down/")

    # Then the answer says to retry shortly, as ingest's does
    assert response.status_code == 503
    assert response["Retry-After"] == "12"


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize(
    "path",
    ["/api/no/such/thing/", "/api/pipelines/abc/percentiles/", "/api/"],
    ids=["unknown", "not-an-id", "root"],
)
def test_an_unknown_api_path_answers_json_never_a_page(client, debug, path):
    with override_settings(DEBUG=debug, ROOT_URLCONF="latencyboard.urls"):
        response = client.get(path)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}

"""Every error under ``/prometheus/`` has Prometheus' shape, ``{"status": "error", "errorType",
"error"}``, whatever answers it (the view, a refusal before it, Django's 404 or server-error
handler), so Grafana shows the reason instead of failing to read a page."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from latencyboard.apitokens.models import Scope
from latencyboard.apitokens.services import issue_api_token
from tests.factories import make_team, make_user
from tests.latencyboard.error_urls import SECRET

pytestmark = pytest.mark.django_db

QUERY = "/prometheus/api/v1/query?query=1"


@pytest.fixture
def grafana() -> Client:
    issued = issue_api_token(cast(User, make_user(make_team())), "grafana", Scope.READ)
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")


def assert_prometheus_error(response, status: int, kind: str) -> None:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert (body["status"], body["errorType"]) == ("error", kind)
    assert body["error"]
    assert SECRET not in body["error"]


@pytest.mark.parametrize(
    "path", ["/prometheus/api/v1/nope", "/prometheus/", "/prometheus/api/v1/label//values"]
)
def test_an_unknown_path_is_not_found(grafana, path):
    assert_prometheus_error(grafana.get(path), 404, "not_found")


def test_a_team_beyond_its_requests_in_flight_is_unavailable(grafana, settings):
    settings.WEB_TEAM_MAX_REQUESTS = 0  # every request of the team is one too many

    response = grafana.get(QUERY)

    assert_prometheus_error(response, 429, "unavailable")
    assert response["Retry-After"] == "1"


@pytest.mark.parametrize(
    ("path", "status", "kind"),
    [
        ("/prometheus/test-errors/database-down/", 503, "unavailable"),
        ("/prometheus/test-errors/crash/", 500, "internal"),
    ],
)
def test_server_errors_have_prometheus_shape(grafana, path, status, kind):
    with override_settings(DEBUG=False, ROOT_URLCONF="tests.latencyboard.error_urls"):
        response = grafana.get(path)

    assert_prometheus_error(response, status, kind)

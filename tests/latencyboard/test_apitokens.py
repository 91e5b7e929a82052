"""Personal API tokens on the REST API, as a script or Grafana sends them: the header only."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from django.test import Client
from django.utils import timezone

from latencyboard.apitokens import services
from latencyboard.apitokens.models import ApiToken, Scope
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import Resolution
from latencyboard.sla.models import Objective
from latencyboard.teams.models import Role
from tests.factories import make_team
from tests.latencyboard.test_percentiles_api import add_rows, iso
from tests.latencyboard.test_sla import member

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


def bearer(plaintext: str) -> Client:
    """A client that has never logged in and checks CSRF, as curl would be."""
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {plaintext}")


@pytest.fixture
def pipeline() -> Pipeline:
    team = make_team("ours")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    stage = Stage.objects.create(pipeline=pipeline, name="model_forward")
    add_rows(pipeline, stage, Resolution.MINUTE, T0, 60, np.random.default_rng(9))
    return pipeline


def sla_payload(pipeline: Pipeline) -> dict[str, object]:
    return {
        "pipeline": pipeline.pk,
        "name": "under 250 ms",
        "threshold_ms": "250",
        "target_percent": "99.9",
        "window": "calendar_month",
    }


def test_a_read_only_token_reads_percentiles_with_the_header_alone(pipeline):
    # given a member's read-only token
    reader = member(pipeline.team)
    issued = services.issue_api_token(reader, "grafana", Scope.READ)
    url = f"/api/pipelines/{pipeline.pk}/percentiles/"
    params = {"start": iso(T0), "end": iso(T0 + dt.timedelta(hours=1)), "step": "1h"}

    # when a script sends only the header (no session cookie, no CSRF token)
    response = bearer(issued.plaintext).get(url, params)

    # then it gets what the member sees in their browser, and the token's use is recorded
    browser = Client()
    browser.force_login(reader)
    assert response.status_code == 200, response.content
    assert response.json() == browser.get(url, params).json()
    assert [series["summary"]["n"] > 0 for series in response.json()["series"]] == [False, True]
    assert "sessionid" not in response.cookies
    assert ApiToken.objects.get(pk=issued.token.pk).last_used_at is not None


def test_a_token_lists_exactly_what_its_users_teams_see(pipeline):
    Pipeline.objects.create(team=make_team("theirs"), service_name="their-secret-service")
    issued = services.issue_api_token(member(pipeline.team), "notebook", Scope.READ)

    response = bearer(issued.plaintext).get("/api/pipelines/")

    assert response.status_code == 200
    assert [row["service_name"] for row in response.json()] == ["fraud-scorer"]


def test_an_outsiders_token_gets_404_for_our_pipeline(pipeline):
    # given a token of a user of another team
    outsider = member(make_team("theirs"), Role.ADMIN)
    issued = services.issue_api_token(outsider, "theirs", Scope.READ_WRITE)

    # when it asks for our pipeline and tries to put an SLA on it
    read = bearer(issued.plaintext).get(f"/api/pipelines/{pipeline.pk}/percentiles/")
    write = bearer(issued.plaintext).post(
        "/api/slas/", sla_payload(pipeline), content_type="application/json"
    )

    # then it learns nothing and changes nothing
    assert read.status_code == 404
    assert "fraud-scorer" not in read.content.decode()
    assert write.status_code == 400
    assert "fraud-scorer" not in write.content.decode()
    assert not Objective.objects.exists()


def test_a_read_only_token_is_refused_every_write(pipeline):
    issued = services.issue_api_token(member(pipeline.team, Role.ADMIN), "ro", Scope.READ)

    response = bearer(issued.plaintext).post(
        "/api/slas/", sla_payload(pipeline), content_type="application/json"
    )

    assert response.status_code == 403
    assert response.json() == {"detail": "This API token is read-only."}
    assert not Objective.objects.exists()


def test_a_read_write_token_writes_without_a_session_or_csrf_token(pipeline):
    issued = services.issue_api_token(
        member(pipeline.team, Role.ADMIN), "provisioning", Scope.READ_WRITE
    )

    response = bearer(issued.plaintext).post(
        "/api/slas/", sla_payload(pipeline), content_type="application/json"
    )

    assert response.status_code == 201, response.content
    assert Objective.objects.get().pipeline == pipeline


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("Bearer lbk_not-a-token-at-all", id="unknown"),
        pytest.param("Bearer", id="empty"),
        pytest.param("Bearer two tokens", id="two-words"),
        pytest.param("Bearer lbk_\u00e9t\u00e9", id="not-ascii"),
    ],
)
def test_an_unknown_token_is_401_with_a_bearer_challenge(pipeline, header):
    response = Client(HTTP_AUTHORIZATION=header).get(f"/api/pipelines/{pipeline.pk}/percentiles/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert "fraud-scorer" not in response.content.decode()


def test_a_revoked_token_is_401(pipeline):
    issued = services.issue_api_token(member(pipeline.team), "old", Scope.READ)
    services.revoke_api_tokens(ApiToken.objects.filter(pk=issued.token.pk), timezone.now())

    response = bearer(issued.plaintext).get("/api/pipelines/")

    assert response.status_code == 401


def test_a_deactivated_users_token_is_401(pipeline):
    user = member(pipeline.team)
    issued = services.issue_api_token(user, "left the company", Scope.READ)
    user.is_active = False
    user.save()

    response = bearer(issued.plaintext).get("/api/pipelines/")

    assert response.status_code == 401


def test_a_token_is_stored_only_as_its_hash():
    issued = services.issue_api_token(member(), "cli", Scope.READ)

    row = ApiToken.objects.get(pk=issued.token.pk)
    assert issued.plaintext.startswith("lbk_")
    assert len(issued.plaintext) == len("lbk_") + 43
    assert issued.plaintext not in {row.digest, row.prefix, row.name}
    assert row.prefix == issued.plaintext[: len("lbk_") + 6]


def test_the_schema_declares_the_bearer_scheme(admin_client):
    schema = admin_client.get("/api/schema/", {"format": "json"}).json()

    assert schema["components"]["securitySchemes"]["apiToken"]["type"] == "http"
    assert schema["components"]["securitySchemes"]["apiToken"]["scheme"] == "bearer"
    percentiles = schema["paths"]["/api/pipelines/{pipeline_id}/percentiles/"]["get"]
    assert {"apiToken": []} in percentiles["security"]

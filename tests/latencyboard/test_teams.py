from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from latencyboard.pipelines.models import Pipeline
from latencyboard.teams import tokens
from latencyboard.teams.models import IngestToken, Role
from latencyboard.teams.services import issue_ingest_token
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db


def test_issued_token_is_stored_only_as_its_hash():
    team = make_team()

    issued = issue_ingest_token(team, "collector")

    row = IngestToken.objects.get(pk=issued.token.pk)
    assert issued.plaintext.startswith("lb_")
    assert row.digest == tokens.digest(issued.plaintext)
    assert issued.plaintext not in {row.digest, row.prefix, row.name}
    assert row.prefix == issued.plaintext[: tokens.DISPLAY_LENGTH]


def test_login_page_is_served(client):
    response = client.get("/login/")

    assert response.status_code == 200
    assert b'name="password"' in response.content


def test_anonymous_visitor_is_sent_to_login(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_member_sees_own_pipelines_and_outsider_sees_none(client):
    # given two teams, each with a pipeline, and a member of the first only
    ours, theirs = make_team("ours"), make_team("theirs")
    Pipeline.objects.create(team=ours, service_name="fraud-scorer")
    Pipeline.objects.create(team=theirs, service_name="secret-recommender")
    member = make_user(ours)

    # when the member opens the overview
    client.force_login(member)
    page = client.get("/").content.decode()

    # then only their team's pipeline is listed
    assert "fraud-scorer" in page
    assert "secret-recommender" not in page


def test_user_without_team_sees_no_pipelines(client):
    Pipeline.objects.create(team=make_team(), service_name="fraud-scorer")
    client.force_login(make_user())

    page = client.get("/").content.decode()

    assert "fraud-scorer" not in page
    assert "not a member of any team" in page


def test_admin_creates_token_and_sees_it_once_outside_any_cookie(admin_client):
    # given a team
    team = make_team()

    # when an admin adds an ingest token
    response = admin_client.post(
        "/admin/teams/ingesttoken/add/", {"team": team.pk, "name": "prod collector"}, follow=True
    )

    # then it is redirected (Post/Redirect/Get) to a page showing the plaintext once, and
    # it matches the stored hash
    assert response.redirect_chain == [("/admin/teams/ingesttoken/issued/", 302)]
    body = response.content.decode()
    shown = re.search(r"(lb_[A-Za-z0-9_\-]{43})", body)
    assert response.status_code == 200
    assert shown is not None
    assert body.count(shown.group(1)) == 1
    token = IngestToken.objects.get(team=team)
    assert token.digest == tokens.digest(shown.group(1))
    # and no cookie carries it (Django's message cookie is signed, not encrypted)
    assert shown.group(1) not in str(response.cookies)
    assert "messages" not in response.cookies
    # and neither the list nor the token's own page shows it again
    for url in ["/admin/teams/ingesttoken/", f"/admin/teams/ingesttoken/{token.pk}/change/"]:
        assert shown.group(1) not in admin_client.get(url).content.decode()
    # and reloading the page that showed it creates no second token
    reload = admin_client.get("/admin/teams/ingesttoken/issued/", follow=True)
    assert shown.group(1) not in reload.content.decode()
    assert IngestToken.objects.filter(team=team).count() == 1


def test_admin_revokes_tokens(admin_client):
    issued = issue_ingest_token(make_team(), "old")

    admin_client.post(
        "/admin/teams/ingesttoken/",
        {"action": "revoke", "_selected_action": [issued.token.pk]},
    )

    assert IngestToken.objects.get(pk=issued.token.pk).revoked_at is not None


def test_non_staff_member_cannot_open_admin(client):
    client.force_login(make_user(make_team(), Role.ADMIN))

    response = client.get("/admin/teams/ingesttoken/")

    assert response.status_code == 302
    assert get_user_model().objects.filter(is_staff=True).count() == 0


def test_empty_state_shows_how_to_point_an_sdk_here(client, settings):
    settings.ALLOWED_HOSTS = ["latency.example.com"]
    client.force_login(make_user(make_team()))

    page = client.get("/", HTTP_HOST="latency.example.com:8000").content.decode()

    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://latency.example.com:4318" in page
    assert 'OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20' in page

"""The "API tokens" page and admin: a token is shown once, in the page, never in a cookie."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from latencyboard.apitokens import services
from latencyboard.apitokens.models import ApiToken, Scope
from latencyboard.teams import tokens
from tests.factories import make_team
from tests.latencyboard.test_sla import member

pytestmark = pytest.mark.django_db

PLAINTEXT = re.compile(r"lbk_[A-Za-z0-9_\-]{43}")


def test_a_user_creates_a_token_and_sees_it_once_outside_any_cookie(client):
    # given a logged-in member
    user = member(make_team())
    client.force_login(user)

    # when they create a read-only token on the API tokens page
    response = client.post(
        "/account/api-tokens/", {"name": "grafana", "scope": "read"}, follow=True
    )

    # then the POST redirects (Post/Redirect/Get) to the page showing its plaintext once,
    # matching the stored hash
    assert response.redirect_chain == [("/account/api-tokens/", 302)]
    body = response.content.decode()
    shown = PLAINTEXT.findall(body)
    assert response.status_code == 200
    assert len(shown) == 1
    token = ApiToken.objects.get(user=user)
    assert (token.name, token.scope, token.digest) == ("grafana", "read", tokens.digest(shown[0]))
    # and no cookie or cache keeps it
    assert shown[0] not in str(response.cookies)
    assert "no-store" in response["Cache-Control"]
    # and reloading the page lists the token without it, creating no second one
    again = client.get("/account/api-tokens/").content.decode()
    assert ApiToken.objects.filter(user=user).count() == 1
    assert "grafana" in again
    assert token.prefix in again
    assert PLAINTEXT.search(again) is None


def test_the_page_is_linked_from_every_page_of_a_logged_in_user(client):
    client.force_login(member(make_team()))

    page = client.get("/").content.decode()

    assert 'href="/account/api-tokens/"' in page


def test_a_nameless_token_is_refused_with_the_form_again(client):
    user = member(make_team())
    client.force_login(user)

    response = client.post("/account/api-tokens/", {"name": "", "scope": "read"})

    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    assert not ApiToken.objects.filter(user=user).exists()


def test_a_user_sees_only_their_own_tokens(client):
    services.issue_api_token(member(), "someone-elses-token", Scope.READ)
    client.force_login(member())

    page = client.get("/account/api-tokens/").content.decode()

    assert "someone-elses-token" not in page
    assert "No tokens yet." in page


def test_a_user_revokes_their_token_and_it_stops_opening_the_api(client):
    user = member(make_team())
    issued = services.issue_api_token(user, "notebook", Scope.READ)
    client.force_login(user)

    response = client.post(f"/account/api-tokens/{issued.token.pk}/revoke/")

    assert response.status_code == 302
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is not None
    api = Client(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}").get("/api/pipelines/")
    assert api.status_code == 401


def test_nobody_revokes_another_users_token(client):
    issued = services.issue_api_token(member(), "theirs", Scope.READ)
    client.force_login(member())

    response = client.post(f"/account/api-tokens/{issued.token.pk}/revoke/")

    assert response.status_code == 404
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is None


def test_anonymous_visitors_are_sent_to_login(client):
    response = client.post("/account/api-tokens/", {"name": "x", "scope": "read"})

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert not ApiToken.objects.exists()


def test_admin_creates_a_token_for_a_user_and_sees_it_once_outside_any_cookie(admin_client):
    user = member()

    response = admin_client.post(
        "/admin/apitokens/apitoken/add/",
        {"user": user.pk, "name": "ci", "scope": "read_write"},
        follow=True,
    )

    assert response.redirect_chain == [("/admin/apitokens/apitoken/issued/", 302)]
    body = response.content.decode()
    shown = PLAINTEXT.findall(body)
    assert response.status_code == 200
    assert len(shown) == 1
    token = ApiToken.objects.get(user=user)
    assert (token.scope, token.digest) == ("read_write", tokens.digest(shown[0]))
    assert shown[0] not in str(response.cookies)
    listing = admin_client.get("/admin/apitokens/apitoken/").content.decode()
    assert PLAINTEXT.search(listing) is None
    # and reloading the page that showed it creates nothing and shows it no more
    reload = admin_client.get("/admin/apitokens/apitoken/issued/", follow=True)
    assert PLAINTEXT.search(reload.content.decode()) is None
    assert ApiToken.objects.filter(user=user).count() == 1


def test_admin_revokes_api_tokens(admin_client):
    issued = services.issue_api_token(member(), "old", Scope.READ)

    admin_client.post(
        "/admin/apitokens/apitoken/", {"action": "revoke", "_selected_action": [issued.token.pk]}
    )

    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is not None

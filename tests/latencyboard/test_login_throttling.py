"""Login throttling (django-axes) as a password guesser meets it, on both login pages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F
from django.test import Client

from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db

PASSWORD = "the-right-password-7"
WRONG = "a-wrong-guess"
ATTACKER = "198.51.100.23"
LOGIN_PAGES = [
    pytest.param("/login/", "/", id="login"),
    pytest.param("/admin/login/", "/admin/", id="admin-login"),
]


def _staff_user():
    user = make_user(make_team(), password=PASSWORD)
    get_user_model().objects.filter(pk=user.pk).update(is_staff=True)
    return user


def _log_in(
    url: str, username: str, password: str, address: str = ATTACKER, **headers: Any
) -> tuple[Client, int]:
    client = Client(REMOTE_ADDR=address)
    response = client.post(
        url, {"username": username, "password": password, "next": "/"}, **headers
    )
    return client, response.status_code


def _guess_until_locked_out(url: str, username: str, address: str = ATTACKER, **headers: Any):
    return [
        _log_in(url, username, WRONG, address, **headers)[1]
        for _ in range(settings.AXES_FAILURE_LIMIT)
    ]


@pytest.mark.parametrize(("url", "home"), LOGIN_PAGES)
def test_right_password_is_refused_after_too_many_wrong_ones(url, home):
    # given a user whose password someone guesses from one address
    user = _staff_user()
    statuses = _guess_until_locked_out(url, user.get_username())

    # when the right password comes next from that address
    client, status = _log_in(url, user.get_username(), PASSWORD)

    # then the guesses were answered normally until the limit, and the right one is refused
    assert statuses == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]
    assert status == 429
    page = client.post(url, {"username": user.get_username(), "password": PASSWORD})
    assert "Too many failed logins" in page.content.decode()
    assert client.get(home).status_code == 302


@pytest.mark.parametrize(("url", "home"), LOGIN_PAGES)
def test_lockout_leaves_other_users_and_other_addresses_alone(url, home):
    # given a user locked out from the attacker's address
    victim, colleague = _staff_user(), _staff_user()
    _guess_until_locked_out(url, victim.get_username())

    # when a colleague logs in from that address, and the victim from their own
    _, colleague_status = _log_in(url, colleague.get_username(), PASSWORD)
    client, victim_status = _log_in(url, victim.get_username(), PASSWORD, "203.0.113.9")

    # then both get in
    assert (colleague_status, victim_status) == (302, 302)
    assert client.get(home).status_code == 200


@pytest.mark.parametrize(("url", "home"), LOGIN_PAGES)
def test_lockout_ends_after_the_cool_off(url, home):
    # given a locked-out user, whose last failure is older than the cool-off
    user = _staff_user()
    _guess_until_locked_out(url, user.get_username())
    AccessAttempt.objects.update(
        attempt_time=F("attempt_time") - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )

    # when the right password comes from the same address
    client, status = _log_in(url, user.get_username(), PASSWORD)

    # then it is accepted again
    assert status == 302
    assert client.get(home).status_code == 200


def test_forwarded_for_is_not_trusted_without_a_declared_proxy():
    # given guesses that each claim another client address in X-Forwarded-For
    user = make_user(make_team(), password=PASSWORD)
    for n in range(settings.AXES_FAILURE_LIMIT):
        _log_in("/login/", user.get_username(), WRONG, HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")

    # when the right password comes with yet another claimed address
    _, status = _log_in(
        "/login/", user.get_username(), PASSWORD, HTTP_X_FORWARDED_FOR="192.0.2.200"
    )

    # then the lockout held: the socket's address was counted
    assert status == 429


def test_behind_a_declared_proxy_each_client_address_is_counted_apart(settings):
    # given one proxy in front (what TRUSTED_PROXY_COUNT=1 sets), and a client locked out
    settings.AXES_IPWARE_PROXY_COUNT = 0
    settings.AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
    user = make_user(make_team(), password=PASSWORD)
    proxy = "10.0.0.5"
    _guess_until_locked_out("/login/", user.get_username(), proxy, HTTP_X_FORWARDED_FOR=ATTACKER)

    # when the user logs in through the same proxy from their own address
    _, status = _log_in(
        "/login/", user.get_username(), PASSWORD, proxy, HTTP_X_FORWARDED_FOR="203.0.113.9"
    )
    _, attacker_status = _log_in(
        "/login/", user.get_username(), PASSWORD, proxy, HTTP_X_FORWARDED_FOR=ATTACKER
    )

    # then they get in, and the attacker's address stays locked out
    assert (status, attacker_status) == (302, 429)


@pytest.mark.parametrize(("url", "home"), LOGIN_PAGES)
def test_one_address_guessing_a_few_passwords_on_many_user_names_is_locked_out(url, home):
    # given an address that tried two wrong passwords on each of many user names, never
    # reaching the lockout of any one of them
    users = [_staff_user() for _ in range(settings.LOGIN_ADDRESS_FAILURE_LIMIT // 2)]
    statuses = [_log_in(url, user.get_username(), WRONG)[1] for user in users for _ in range(2)]

    # when a user with the right password logs in from that address, and another from their own
    refused = Client(REMOTE_ADDR=ATTACKER).post(
        url, {"username": _staff_user().get_username(), "password": PASSWORD, "next": "/"}
    )
    client, status = _log_in(url, users[0].get_username(), PASSWORD, "203.0.113.9")

    # then the address was stopped at its limit and is told when to come back; the other gets in
    assert statuses[-1] == 429
    assert set(statuses[:-1]) == {200}
    assert refused.status_code == 429
    cooloff_s = int(settings.AXES_COOLOFF_TIME.total_seconds())
    assert refused["Retry-After"] == str(cooloff_s)
    assert "from this address" in refused.content.decode()
    assert (status, client.get(home).status_code) == (302, 200)


@pytest.mark.parametrize(("url", "home"), LOGIN_PAGES)
def test_a_user_name_lockout_says_when_to_retry(url, home):
    # given a user whose password someone guessed from one address until the lockout
    user = _staff_user()
    _guess_until_locked_out(url, user.get_username())

    # when the right password comes next from that address
    refused = Client(REMOTE_ADDR=ATTACKER).post(
        url, {"username": user.get_username(), "password": PASSWORD, "next": "/"}
    )

    # then the refusal says when the pause ends, in the header and on the page
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    assert "15 minutes" in refused.content.decode()

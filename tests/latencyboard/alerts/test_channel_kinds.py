"""Channel kinds come from the registry: a kind registered by one module is offered, stored
and sent end to end through the outbox, and a stored kind no module declares is shown as
unknown and fails its deliveries, never sent in another kind's format."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import orjson
import pytest
from django.urls import reverse
from django.utils import timezone

from latencyboard.alerts.models import Channel
from latencyboard.alerts.outbox import send_due
from latencyboard.notifications import registry
from latencyboard.notifications.kind import HttpKind
from latencyboard.notifications.message import HttpMessage, json_message
from latencyboard.notifications.notice import Notice
from latencyboard.teams.models import Role
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import Scene, make_scene, queued
from tests.latencyboard.notifications.receiver import Receiver

pytestmark = pytest.mark.django_db

KNOWN = "alertmanager, email, pagerduty, slack, webhook"


class Pigeon(HttpKind):
    """A kind declared the way a module of notifications/kinds/ declares one."""

    name = "pigeon"
    label = "Carrier pigeon"
    asks_for = "leg ring"
    issued_note = "The loft checks every pigeon's leg ring."

    def new_secret(self) -> str:
        return "ring-0123456789abcdef"

    def render(self, notice: Notice, secret: str, now: dt.datetime) -> HttpMessage:
        return json_message({"coo": notice.summary, "stage": notice.stage}, {"X-Leg-Ring": secret})


@pytest.fixture
def pigeon() -> Iterator[None]:
    registry.register(Pigeon())
    yield
    registry.unregister("pigeon")


def test_a_kind_registered_by_one_module_is_offered_stored_and_sent_through_the_outbox(
    client, pigeon, receiver: Receiver
):
    # given a team admin and a kind registered by its module alone
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))

    # when the admin creates a channel of that kind on the channel page, without a secret
    form_page = client.get(reverse("alerts:channel-new")).content.decode()
    created = client.post(
        reverse("alerts:channel-new"),
        {
            "team": scene.team.pk,
            "name": "loft",
            "kind": "pigeon",
            "target": receiver.url,
            "secret": "",
            "enabled": "on",
        },
    )
    issued_page = client.get(reverse("alerts:settings")).content.decode()
    # and an alert of a rule notifying that channel fires, and the outbox is sent
    loft = Channel.objects.get(name="loft")
    scene.rule.channels.set([loft])
    delivery = queued(scene, timezone.now())
    send_due(timezone.now)

    # then the kind was offered with its secret's help, its secret was made and shown once
    assert '<option value="pigeon">Carrier pigeon</option>' in form_page
    assert "Carrier pigeon: leg ring" in form_page
    assert created.status_code == 302
    assert (loft.kind, loft.secret) == ("pigeon", "ring-0123456789abcdef")
    assert '<code id="issued-secret">ring-0123456789abcdef</code>' in issued_page
    assert "The loft checks every pigeon&#x27;s leg ring." in issued_page
    assert "<td>Carrier pigeon</td>" in issued_page
    # and the receiver got the kind's own payload, and the delivery log says delivered
    (request,) = receiver.requests
    assert request.headers["x-leg-ring"] == "ring-0123456789abcdef"
    assert orjson.loads(request.body) == {"coo": "fired", "stage": "model_forward"}
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_status_code) == ("delivered", 200)


def test_a_kind_registered_by_one_module_is_accepted_by_the_api(client, pigeon):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))
    loft = {"team": scene.team.pk, "name": "loft", "kind": "pigeon", "target": "https://e.org/"}

    created = client.post(reverse("api-alert-channels"), loft, content_type="application/json")

    assert created.status_code == 201
    assert (created.json()["kind"], created.json()["secret"]) == (
        "pigeon",
        "ring-0123456789abcdef",
    )


def test_a_kind_no_module_declares_is_refused_by_the_form_and_the_api(client):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))
    loft = {"team": scene.team.pk, "name": "loft", "kind": "pigeon", "target": "https://e.org/"}

    page = client.post(reverse("alerts:channel-new"), {**loft, "enabled": "on"})
    api = client.post(reverse("api-alert-channels"), loft, content_type="application/json")

    assert page.status_code == 400
    assert "Select a valid choice. pigeon is not one of the available choices." in (
        page.content.decode()
    )
    assert (api.status_code, api.json()) == (400, {"kind": ['"pigeon" is not a valid choice.']})
    assert Channel.objects.filter(name="loft").count() == 0


def unknown_kind_channel(scene: Scene, target: str = "https://hooks.example.com/x") -> Channel:
    """The scene's channel as a row whose kind's module has since been removed."""
    Channel.objects.filter(pk=scene.channel.pk).update(kind="sms", target=target)
    return Channel.objects.get(pk=scene.channel.pk)


def test_a_delivery_to_a_channel_of_an_unknown_kind_fails_at_once_and_says_why(
    receiver: Receiver,
):
    # given a channel whose stored kind no module declares, pointing at a live receiver
    scene = make_scene()
    unknown_kind_channel(scene, receiver.url)

    # when an alert fires and the outbox is sent, now and a day later
    delivery = queued(scene, timezone.now())
    sent = send_due(timezone.now)
    again = send_due(lambda: timezone.now() + dt.timedelta(days=1))

    # then the delivery failed once, for good, saying so, and nothing reached the receiver
    delivery.refresh_from_db()
    assert (sent, again) == (1, 0)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 1, None)
    assert delivery.detail == f"unknown channel kind 'sms': choose one of {KNOWN}"
    assert receiver.requests == []


@pytest.mark.parametrize("role", [Role.ADMIN, Role.VIEWER], ids=["admin", "viewer"])
def test_the_channel_list_shows_a_channel_of_an_unknown_kind_as_such(client, role):
    scene = make_scene()
    unknown_kind_channel(scene, "https://hooks.example.com/in?token=9f8e7d6c5b4a3c4d")
    client.force_login(make_user(scene.team, role))

    page = client.get(reverse("alerts:settings"))
    listed = client.get(reverse("api-alert-channels"))

    assert page.status_code == 200
    assert "<td>unknown kind “sms”</td>" in page.content.decode()
    # What an unknown kind's target holds cannot be told: shown masked to admins too.
    assert "<code>https://hooks.example.com/…3c4d</code>" in page.content.decode()
    assert listed.status_code == 200
    assert [(channel["kind"], channel["target"]) for channel in listed.json()] == [
        ("sms", "https://hooks.example.com/…3c4d")
    ]


def test_a_channel_of_an_unknown_kind_is_mended_on_its_page_with_a_kind_and_a_new_target(client):
    # given a channel of an unknown kind, and its team's admin
    scene = make_scene()
    channel = unknown_kind_channel(scene)
    client.force_login(make_user(scene.team, Role.ADMIN))
    edit = reverse("alerts:channel-edit", kwargs={"channel_id": channel.pk})
    fields = {"team": scene.team.pk, "name": "hook", "kind": "webhook", "enabled": "on"}

    # when the admin opens its page, saves it with a known kind but no new target, then with one
    page = client.get(edit)
    kept_target = client.post(edit, {**fields, "target": ""})
    mended = client.post(edit, {**fields, "target": "https://hooks.example.org/new"})

    # then the page says what is wrong, the first save is refused, the second makes it a
    # webhook channel with a signing key of its own (the old secret is not reused)
    assert page.status_code == 200
    assert "Now unknown kind “sms”, which this server cannot send" in page.content.decode()
    assert kept_target.status_code == 400
    assert "A channel that changes kind needs its new target." in kept_target.content.decode()
    assert mended.status_code == 302
    channel.refresh_from_db()
    assert (channel.kind, channel.target) == ("webhook", "https://hooks.example.org/new")
    assert channel.secret.startswith("whsec_")
    assert channel.secret != scene.channel.secret


def test_the_api_refuses_a_change_that_keeps_an_unknown_kind_and_says_which_kinds_there_are(
    client,
):
    scene = make_scene()
    channel = unknown_kind_channel(scene)
    client.force_login(make_user(scene.team, Role.ADMIN))
    url = reverse("api-alert-channel", kwargs={"channel_id": channel.pk})

    renamed = client.patch(url, {"name": "renamed"}, content_type="application/json")

    assert (renamed.status_code, renamed.json()) == (
        400,
        {"kind": [f"Unknown channel kind 'sms': choose one of {KNOWN}."]},
    )
    assert Channel.objects.get(pk=channel.pk).name == "hook"


def test_the_admin_lists_and_opens_a_channel_of_an_unknown_kind(admin_client):
    scene = make_scene()
    channel = unknown_kind_channel(scene)

    listed = admin_client.get("/admin/alerts/channel/")
    opened = admin_client.get(f"/admin/alerts/channel/{channel.pk}/change/")

    assert (listed.status_code, opened.status_code) == (200, 200)
    assert "unknown kind “sms”" in listed.content.decode()

"""The rule and channel pages: team admins edit them, others are refused (403), outsiders
find nothing (404), and a channel's secret is never rendered back."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook

from latencyboard.alerts.models import Channel, Delivery, Rule
from latencyboard.alerts.outbox import send_due
from latencyboard.notifications.kinds import webhook
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user
from tests.latencyboard.alerts.scenes import HOOK_SECRET, make_scene
from tests.latencyboard.notifications.receiver import Receiver

pytestmark = pytest.mark.django_db


def test_an_admin_creates_a_rule_through_the_form(client):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))

    answer = client.post(
        reverse("alerts:rule-new"),
        {
            "pipeline": scene.pipeline.pk,
            "name": "forward p99",
            "regression": "on",
            "stages": [scene.stage.pk],
            "end_to_end": "on",
            "min_effect_percent": "25",
            "min_effect_ms": "5",
            "significance": "1e-5",
            "window_minutes": "10",
            "severity": "ticket",
            "channels": [scene.channel.pk],
            "enabled": "on",
        },
    )

    assert answer.status_code == 302
    rule = Rule.objects.get(name="forward p99")
    assert (rule.min_effect_percent, rule.severity) == (25.0, "ticket")
    assert list(rule.channels.all()) == [scene.channel]


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL, Role.AUDITOR])
def test_members_who_are_not_admins_cannot_edit_rules_or_channels(client, role):
    scene = make_scene()
    client.force_login(make_user(scene.team, role))

    answers = [
        client.get(reverse("alerts:rule-new")).status_code,
        client.post(reverse("alerts:rule-edit", kwargs={"rule_id": scene.rule.pk})).status_code,
        client.post(
            reverse("alerts:channel-edit", kwargs={"channel_id": scene.channel.pk})
        ).status_code,
    ]

    assert answers == [403, 403, 403]


def test_an_outsider_admin_finds_no_rule_or_channel_of_another_team(client):
    scene = make_scene()
    client.force_login(make_user(make_team("other"), Role.ADMIN))

    rule = client.get(reverse("alerts:rule-edit", kwargs={"rule_id": scene.rule.pk}))
    channel = client.get(reverse("alerts:channel-edit", kwargs={"channel_id": scene.channel.pk}))
    settings_page = client.get(reverse("alerts:settings")).content.decode()

    assert (rule.status_code, channel.status_code) == (404, 404)
    assert scene.rule.name not in settings_page


def test_a_channel_edited_with_an_empty_secret_keeps_it_and_never_shows_it(client):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))
    url = reverse("alerts:channel-edit", kwargs={"channel_id": scene.channel.pk})

    form_page = client.get(url).content.decode()
    answer = client.post(
        url,
        {
            "team": scene.team.pk,
            "name": "renamed",
            "kind": "webhook",
            "target": "https://hooks.example.com/x",
            "secret": "",
            "enabled": "on",
        },
    )

    assert HOOK_SECRET[6:] not in form_page
    assert answer.status_code == 302
    channel = Channel.objects.get(pk=scene.channel.pk)
    assert (channel.name, channel.secret) == ("renamed", HOOK_SECRET)


def channel_form(**fields: object) -> dict[str, object]:
    return {
        "name": "hook",
        "kind": "webhook",
        "target": "https://hooks.example.com/x",
        "secret": "",
        "enabled": "on",
        **fields,
    }


def test_a_new_webhook_channel_without_a_secret_gets_a_signing_key_shown_once(client):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))

    answer = client.post(reverse("alerts:channel-new"), channel_form(team=scene.team.pk))
    shown = client.get(answer.url).content.decode()
    again = client.get(reverse("alerts:settings")).content.decode()
    edit = Channel.objects.get(name="hook", target="https://hooks.example.com/x")
    edit_page = client.get(reverse("alerts:channel-edit", kwargs={"channel_id": edit.pk}))

    assert answer.status_code == 302
    secret = edit.secret
    assert secret.startswith("whsec_")
    assert len(webhook.secret_key(secret)) == 24
    assert f'<code id="issued-secret">{secret}</code>' in shown
    assert secret[6:] not in again
    assert secret[6:] not in edit_page.content.decode()
    assert f"whsec_…{secret[-4:]}" in again


def test_a_pasted_webhook_secret_is_kept_and_not_shown_back(client):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))

    answer = client.post(
        reverse("alerts:channel-new"), channel_form(team=scene.team.pk, secret=HOOK_SECRET)
    )

    assert answer.status_code == 302
    assert Channel.objects.get(name="hook", target="https://hooks.example.com/x").secret == (
        HOOK_SECRET
    )


@pytest.mark.parametrize(
    ("fields", "field", "error"),
    [
        pytest.param(
            {"secret": "s"},
            "secret",
            "The signing secret must look like whsec_&lt;base64&gt;.",
            id="webhook-secret-not-whsec",
        ),
        pytest.param(
            {"kind": "pagerduty", "target": "https://events.pagerduty.com/v2/enqueue"},
            "secret",
            "Give the integration&#x27;s routing key.",
            id="pagerduty-without-routing-key",
        ),
        pytest.param(
            {"target": "http://169.254.169.254/latest/"},
            "target",
            "169.254.169.254 is a cloud metadata address: notifications may not go there.",
            id="metadata-address",
        ),
    ],
)
def test_a_channel_the_transport_could_not_use_is_refused_with_the_reason(
    client, fields, field, error
):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))

    answer = client.post(reverse("alerts:channel-new"), channel_form(team=scene.team.pk, **fields))

    assert answer.status_code == 400
    assert error in answer.content.decode()
    assert Channel.objects.count() == 1


def test_a_slack_channel_shows_its_webhook_url_masked(client):
    scene = make_scene()
    url = "https://hooks.slack.com/services/T000/B000/XXXXsecretpart"
    Channel.objects.create(team=scene.team, name="slack", kind="slack", target=url)
    client.force_login(make_user(scene.team, Role.VIEWER))

    page = client.get(reverse("alerts:settings")).content.decode()
    listed = client.get(reverse("api-alert-channels")).json()

    assert "secretpart" not in page
    assert "https://hooks.slack.com/…part" in page
    assert [channel["target"] for channel in listed] == [
        "http://127.0.0.1/…1:9/",
        "https://hooks.slack.com/…part",
    ]


@pytest.mark.parametrize(
    ("role", "shown"),
    [
        (Role.VIEWER, "https://hooks.example.com/…3c4d"),
        (Role.ONCALL, "https://hooks.example.com/…3c4d"),
        (Role.ADMIN, "https://hooks.example.com/in?token=9f8e7d6c5b4a3c4d"),
    ],
    ids=["viewer", "oncall", "admin"],
)
def test_a_webhook_url_with_a_token_is_shown_whole_to_the_team_admins_only(client, role, shown):
    scene = make_scene()
    url = "https://hooks.example.com/in?token=9f8e7d6c5b4a3c4d"
    Channel.objects.filter(pk=scene.channel.pk).update(target=url)
    client.force_login(make_user(scene.team, role))

    page = client.get(reverse("alerts:settings")).content.decode()
    listed = client.get(reverse("api-alert-channels")).json()

    assert [channel["target"] for channel in listed] == [shown]
    assert f"<code>{shown}</code>" in page
    assert ("9f8e7d6c5b" in page) == (role == Role.ADMIN)


def test_a_slack_channel_edited_with_an_empty_target_keeps_its_url_and_never_shows_it(client):
    scene = make_scene()
    url = "https://hooks.slack.com/services/T000/B000/XXXXsecretpart"
    slack = Channel.objects.create(team=scene.team, name="slack", kind="slack", target=url)
    client.force_login(make_user(scene.team, Role.ADMIN))
    edit = reverse("alerts:channel-edit", kwargs={"channel_id": slack.pk})

    form_page = client.get(edit).content.decode()
    answer = client.post(
        edit, channel_form(team=scene.team.pk, name="ops", kind="slack", target="")
    )

    assert "secretpart" not in form_page
    assert "Now https://hooks.slack.com/…part. Left empty: unchanged." in form_page
    assert answer.status_code == 302
    slack.refresh_from_db()
    assert (slack.name, slack.target) == ("ops", url)


def test_an_admin_sends_a_test_through_the_outbox_and_reads_it_in_the_delivery_log(
    client, receiver: Receiver
):
    scene = make_scene()
    scene.channel.target = receiver.url
    scene.channel.save()
    admin = make_user(scene.team, Role.ADMIN)
    client.force_login(admin)

    answer = client.post(reverse("alerts:channel-test", kwargs={"channel_id": scene.channel.pk}))
    sent = send_due(timezone.now)
    page = client.get(reverse("alerts:settings")).content.decode()

    assert (answer.status_code, answer["Location"]) == (302, "/alerts/settings/#deliveries")
    assert sent == 1
    (request,) = receiver.requests
    body = Webhook(HOOK_SECRET).verify(request.body, request.headers)
    assert (body["type"], body["data"]["title"], body["data"]["test"]) == (
        "alert.test",
        "[TEST] Test notification from latencyboard",
        True,
    )
    log = page[page.index('id="deliveries"') :]
    assert f"test by {admin.get_username()}" in log
    assert "Delivered" in log
    assert Delivery.objects.get().status == "delivered"


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL, Role.AUDITOR])
def test_only_admins_see_and_use_the_send_test_button(client, role):
    scene = make_scene()
    client.force_login(make_user(scene.team, role))

    page = client.get(reverse("alerts:settings")).content.decode()
    answer = client.post(reverse("alerts:channel-test", kwargs={"channel_id": scene.channel.pk}))

    assert "Send test" not in page
    assert answer.status_code == 403
    assert Delivery.objects.count() == 0


def test_an_outsider_admin_cannot_test_another_teams_channel(client):
    scene = make_scene()
    client.force_login(make_user(make_team("other"), Role.ADMIN))

    answer = client.post(reverse("alerts:channel-test", kwargs={"channel_id": scene.channel.pk}))

    assert answer.status_code == 404
    assert Delivery.objects.count() == 0


def test_a_test_not_sent_yet_has_no_answer_in_the_delivery_log(client):
    # given a channel test queued but not sent
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))
    client.post(reverse("alerts:channel-test", kwargs={"channel_id": scene.channel.pk}))

    # when the admin reads the delivery log
    page = client.get(reverse("alerts:settings")).content.decode()

    # then its "Last answer" is a dash, not the word None
    row = page[page.index('id="deliveries"') :].split("<tbody>")[1].split("</tr>")[0]
    assert row.endswith("<td>—</td>")
    assert "None" not in row


def test_the_admin_names_deliveries_in_english(admin_client):
    page = admin_client.get("/admin/alerts/delivery/").content.decode()

    assert "Deliveries" in page
    assert "Deliverys" not in page

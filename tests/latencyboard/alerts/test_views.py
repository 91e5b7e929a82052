"""The rule and channel pages: team admins edit them, others are refused (403), outsiders
find nothing (404), and a channel's secret is never rendered back."""

from __future__ import annotations

import pytest
from django.urls import reverse

from latencyboard.alerts.models import Channel, Rule
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user
from tests.latencyboard.alerts.scenes import make_scene

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
    scene.channel.secret = "whsec-very-secret-9876"
    scene.channel.save()
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

    assert "whsec" not in form_page
    assert answer.status_code == 302
    channel = Channel.objects.get(pk=scene.channel.pk)
    assert (channel.name, channel.secret) == ("renamed", "whsec-very-secret-9876")

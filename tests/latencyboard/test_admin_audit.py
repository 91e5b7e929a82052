"""Changes made in the Django admin land in the audit log like the product pages' own: who,
what, from where, and each changed field before → after (secrets as fingerprints only)."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import Group, User

from audits.models import AuditEvent
from latencyboard.alerts.models import Channel
from latencyboard.apitokens.models import Scope
from latencyboard.apitokens.services import issue_api_token
from tests.factories import make_team, make_user
from tests.latencyboard.alerts.scenes import make_scene

pytestmark = pytest.mark.django_db


def test_an_admin_edit_of_a_channel_is_recorded_before_and_after(admin_client):
    # given a webhook channel of a team
    scene = make_scene()
    channel = scene.channel
    old_secret = channel.secret

    # when an operator changes its target and its signing secret in the admin
    answer = admin_client.post(
        f"/admin/alerts/channel/{channel.pk}/change/",
        {
            "team": scene.team.pk,
            "name": channel.name,
            "kind": "webhook",
            "target": "https://hooks.example.org/new",
            "secret": "whsec_bmV3LXNpZ25pbmcta2V5",
            "enabled": "on",
        },
        REMOTE_ADDR="198.51.100.23",
    )

    # then the change is in the team's audit log, field by field, with no secret in it
    assert answer.status_code == 302
    event = AuditEvent.objects.get(action="admin.changed")
    assert (event.actor_username, event.team_id, event.ip) == (
        "admin",
        scene.team.pk,
        "198.51.100.23",
    )
    assert (event.subject_type, event.subject_id) == ("alerts.channel", str(channel.pk))
    changes = event.detail["changes"]
    assert set(changes) == {"target", "secret"}
    assert changes["target"] == {
        "before": "http://127.0.0.1:9/",
        "after": "https://hooks.example.org/new",
    }
    assert changes["secret"]["before"] != changes["secret"]["after"]
    assert old_secret not in str(event.detail)
    assert "bmV3LXNpZ25pbmcta2V5" not in str(event.detail)
    assert Channel.objects.get(pk=channel.pk).target == "https://hooks.example.org/new"


def test_admin_adds_and_deletes_are_recorded_for_django_s_own_models_too(admin_client):
    # when an operator adds a group, renames it, then deletes it with the list's bulk action
    admin_client.post("/admin/auth/group/add/", {"name": "ops"})
    group = Group.objects.get(name="ops")
    admin_client.post(f"/admin/auth/group/{group.pk}/change/", {"name": "on-call"})
    admin_client.post(
        "/admin/auth/group/",
        {"action": "delete_selected", "_selected_action": [group.pk], "post": "yes"},
    )

    # then each step is in the audit log, in order
    assert not Group.objects.exists()
    assert [
        (event.action, event.subject_type, event.detail.get("changes"))
        for event in AuditEvent.objects.order_by("pk")
    ] == [
        ("admin.added", "auth.group", None),
        ("admin.changed", "auth.group", {"name": {"before": "ops", "after": "on-call"}}),
        ("admin.deleted", "auth.group", None),
    ]


def test_revoking_api_tokens_with_the_admin_action_is_recorded(admin_client):
    # given an API token of a user
    issued = issue_api_token(cast(User, make_user(make_team())), "grafana", Scope.READ)

    # when an operator revokes it with the admin list's action
    admin_client.post(
        "/admin/apitokens/apitoken/",
        {"action": "revoke", "_selected_action": [issued.token.pk]},
        REMOTE_ADDR="198.51.100.24",
    )

    # then the revocation is in the audit log, as one from the tokens page would be
    assert list(AuditEvent.objects.values_list("action", "subject_id", "actor_username", "ip")) == [
        ("api_token.revoked", str(issued.token.pk), "admin", "198.51.100.24")
    ]

"""The alerts API and pages: scoped to the user's teams (outsiders get 404 and nothing
changes), responders acknowledge and resolve, viewers and auditors read only, admins write
rules and channels whose secrets never come back."""

from __future__ import annotations

import datetime as dt
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from latencyboard.alerts.models import (
    Alert,
    AlertEvent,
    AlertStatus,
    Channel,
    Delivery,
    Incident,
    Rule,
)
from latencyboard.alerts.outbox import event_notice
from latencyboard.alerts.services import record_event
from latencyboard.apitokens.models import Scope
from latencyboard.apitokens.services import issue_api_token
from latencyboard.teams.models import Role
from tests.factories import incident_for, make_team, make_user
from tests.latencyboard.alerts.scenes import NOW, Scene, make_scene

pytestmark = pytest.mark.django_db


EVIDENCE = {
    "detector": "regression",
    "quantile": "p99",
    "baseline": {"estimate": 20.0, "low": 19.6, "high": 20.4},
    "current": {"estimate": 30.0, "low": 28.1, "high": None},
    "baseline_n": 48000,
    "n": 1200,
    "k": 95,
    "threshold_ms": 20.3,
    "p_value": 1.2e-40,
    "effect_ms": 10.0,
    "effect_percent": 50.0,
    "grew_most": "model_forward",
    "mix": None,
    "window_start": "2026-03-10T11:50:00+00:00",
    "window_end": "2026-03-10T12:00:00+00:00",
}


def firing(scene: Scene) -> Alert:
    alert = Alert.objects.create(
        rule=scene.rule,
        pipeline=scene.pipeline,
        stage=scene.stage,
        incident=incident_for(scene.pipeline, AlertStatus.FIRING, NOW),
        dedup_key="k-1",
        status=AlertStatus.FIRING,
        summary="fraud-scorer · model_forward: p99 20.0 → 30.0 ms (+50%)",
        evidence={"regression": EVIDENCE},
        started_at=NOW,
    )
    record_event(alert, "", AlertStatus.FIRING, NOW)
    return alert


@pytest.mark.parametrize("role", [Role.ONCALL, Role.ADMIN])
def test_responders_acknowledge_and_the_receivers_are_told(client, role):
    scene = make_scene()
    alert = firing(scene)
    user = make_user(scene.team, role)
    client.force_login(user)

    answer = client.post(
        reverse("api-alert-ack", kwargs={"alert_id": alert.pk}),
        {"note": "rolling back 3.4.1"},
        content_type="application/json",
    )

    assert answer.status_code == 200
    assert answer.json()["status"] == "acknowledged"
    event = alert.events.get(to_status="acknowledged")
    assert (event.from_status, event.to_status, event.who, event.note) == (
        "firing",
        "acknowledged",
        user,
        "rolling back 3.4.1",
    )
    assert event.deliveries.count() == 1
    alert.incident.refresh_from_db()
    assert alert.incident.status == "acknowledged"


def test_incidents_list_their_pipeline_state_title_times_and_member_alerts(client):
    scene = make_scene()
    alert = firing(scene)
    client.force_login(make_user(scene.team, Role.VIEWER))

    listed = client.get(reverse("api-incidents"), {"state": "open"}).json()["results"]
    resolved = client.get(reverse("api-incidents"), {"state": "resolved"}).json()["results"]
    alerts = client.get(reverse("api-alerts")).json()["results"]
    bad = client.get(reverse("api-incidents"), {"state": "sideways"})

    assert listed == [
        {
            "id": alert.incident_id,
            "pipeline": "fraud-scorer",
            "pipeline_id": scene.pipeline.pk,
            "state": "firing",
            "title": "incident",
            "dedup_key": f"latencyboard-incident{alert.incident_id}",
            "opened_at": "2026-03-10T12:00:30Z",
            "resolved_at": None,
            "alerts": [alert.pk],
        }
    ]
    assert resolved == []
    assert [a["incident"] for a in alerts] == [alert.incident_id]
    assert bad.status_code == 400


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AUDITOR])
def test_viewers_and_auditors_cannot_acknowledge_or_resolve(client, role):
    scene = make_scene()
    alert = firing(scene)
    client.force_login(make_user(scene.team, role))

    ack = client.post(reverse("api-alert-ack", kwargs={"alert_id": alert.pk}))
    resolve = client.post(reverse("api-alert-resolve", kwargs={"alert_id": alert.pk}))
    page_ack = client.post(reverse("alerts:ack", kwargs={"alert_id": alert.pk}))

    assert (ack.status_code, resolve.status_code, page_ack.status_code) == (403, 403, 403)
    alert.refresh_from_db()
    assert alert.status == "firing"
    assert AlertEvent.objects.count() == 1


def test_an_outsider_sees_no_alert_and_changes_nothing(client):
    scene = make_scene()
    alert = firing(scene)
    client.force_login(make_user(make_team("other"), Role.ADMIN))
    kwargs = {"alert_id": alert.pk}

    listed = client.get(reverse("api-alerts"))
    incidents = client.get(reverse("api-incidents"))
    answers = [
        client.get(reverse("api-incident", kwargs={"incident_id": alert.incident_id})).status_code,
        client.get(reverse("api-alert", kwargs=kwargs)).status_code,
        client.post(reverse("api-alert-ack", kwargs=kwargs)).status_code,
        client.post(reverse("api-alert-resolve", kwargs=kwargs)).status_code,
        client.get(reverse("alerts:detail", kwargs=kwargs)).status_code,
        client.post(reverse("alerts:ack", kwargs=kwargs)).status_code,
        client.post(
            reverse("alerts:silence", kwargs=kwargs), {"minutes": 60, "reason": "x"}
        ).status_code,
        client.get(reverse("api-alert-rule", kwargs={"rule_id": scene.rule.pk})).status_code,
        client.get(
            reverse("api-alert-channel", kwargs={"channel_id": scene.channel.pk})
        ).status_code,
    ]
    page = client.get(reverse("alerts:oncall"))

    assert (listed.json()["count"], incidents.json()["count"]) == (0, 0)
    assert answers == [404] * 9
    assert alert.summary not in page.content.decode()
    alert.refresh_from_db()
    assert alert.status == "firing"
    assert AlertEvent.objects.count() == 1


def test_acknowledging_twice_answers_409_the_second_time(client):
    scene = make_scene()
    alert = firing(scene)
    client.force_login(make_user(scene.team, Role.ONCALL))
    url = reverse("api-alert-ack", kwargs={"alert_id": alert.pk})

    client.post(url)
    again = client.post(url)

    assert again.status_code == 409
    assert again.json() == {
        "detail": "The alert is acknowledged, not firing.",
        "status": "acknowledged",
    }


def test_resolving_by_hand_records_who_and_the_note(client):
    scene = make_scene()
    alert = firing(scene)
    user = make_user(scene.team, Role.ONCALL)
    client.force_login(user)

    answer = client.post(
        reverse("api-alert-resolve", kwargs={"alert_id": alert.pk}),
        {"note": "rolled back v8"},
        content_type="application/json",
    )

    assert answer.status_code == 200
    assert [(e["to_status"], e["who"], e["note"]) for e in answer.json()["events"]] == [
        ("firing", None, ""),
        ("resolved", user.get_username(), "rolled back v8"),
    ]


def test_the_list_filters_by_status_and_refuses_unknown_ones(client):
    scene = make_scene()
    alert = firing(scene)
    client.force_login(make_user(scene.team, Role.VIEWER))

    open_ = client.get(reverse("api-alerts"), {"status": "open"}).json()["results"]
    resolved = client.get(reverse("api-alerts"), {"status": "resolved"}).json()["results"]
    bad = client.get(reverse("api-alerts"), {"status": "gone"})

    assert [row["id"] for row in open_] == [alert.pk]
    assert resolved == []
    assert bad.status_code == 400


def test_the_lists_come_in_pages_of_at_most_500(client):
    scene = make_scene()
    for hour in range(3):
        started = NOW - dt.timedelta(hours=hour)
        Alert.objects.create(
            rule=scene.rule,
            pipeline=scene.pipeline,
            stage=scene.stage,
            incident=incident_for(scene.pipeline, AlertStatus.RESOLVED, started),
            dedup_key=f"k-{hour}",
            status=AlertStatus.RESOLVED,
            summary="resolved",
            started_at=started,
        )
    client.force_login(make_user(scene.team, Role.VIEWER))

    for route in ("api-alerts", "api-incidents"):
        first = client.get(reverse(route), {"limit": 2}).json()
        rest = client.get(first["next"]).json()
        far = client.get(reverse(route), {"offset": 10**30})

        assert (first["count"], len(first["results"]), len(rest["results"])) == (3, 2, 1)
        assert rest["next"] is None
        assert far.status_code == 400


def test_no_page_holds_more_than_500_and_50_unless_asked(client):
    scene = make_scene()
    Incident.objects.bulk_create(
        Incident(
            pipeline=scene.pipeline,
            status=AlertStatus.RESOLVED,
            title="old",
            opened_at=NOW - dt.timedelta(hours=hour),
            resolved_at=NOW - dt.timedelta(hours=hour),
        )
        for hour in range(501)
    )
    client.force_login(make_user(scene.team, Role.VIEWER))

    asked = client.get(reverse("api-incidents"), {"limit": 10**12}).json()
    plain = client.get(reverse("api-incidents")).json()

    assert (asked["count"], len(asked["results"]), len(plain["results"])) == (501, 500, 50)


def test_viewer_page_shows_no_buttons_and_responder_page_does(client):
    scene = make_scene()
    alert = firing(scene)
    url = reverse("alerts:detail", kwargs={"alert_id": alert.pk})

    client.force_login(make_user(scene.team, Role.VIEWER))
    viewer_page = client.get(url).content.decode()
    client.force_login(make_user(scene.team, Role.ONCALL))
    oncall_page = client.get(url).content.decode()

    assert 'id="ack-button"' not in viewer_page
    assert 'id="read-only"' in viewer_page
    assert 'id="ack-button"' in oncall_page


def test_an_alert_stored_before_its_evidence_held_the_change_interval_still_shows(client):
    # Given an alert whose stored evidence has no change interval (written before it was kept).
    scene = make_scene()
    alert = firing(scene)
    assert "change_interval" not in alert.evidence["regression"]
    client.force_login(make_user(scene.team, Role.VIEWER))

    page = client.get(reverse("alerts:detail", kwargs={"alert_id": alert.pk}))
    api = client.get(reverse("api-alert", kwargs={"alert_id": alert.pk}))
    notice = event_notice(alert.events.get())

    # Then the page, the API and the notification show the change without one.
    assert (page.status_code, api.status_code) == (200, 200)
    assert '<dd id="effect-figure">p99 +50%</dd>' in page.content.decode()
    assert api.json()["evidence"]["regression"]["effect_percent"] == 50.0
    assert dict(notice.figures)["change"] == "+50%, +10.0 ms"
    assert dict(notice.numbers)["effect_pct_low"] is None


def test_admin_creates_a_rule_and_a_viewer_cannot(client):
    scene = make_scene()
    payload = {
        "pipeline": scene.pipeline.pk,
        "name": "tail",
        "stages": [scene.stage.pk],
        "channels": [scene.channel.pk],
    }
    client.force_login(make_user(scene.team, Role.VIEWER))
    refused = client.post(reverse("api-alert-rules"), payload, content_type="application/json")
    client.force_login(make_user(scene.team, Role.ADMIN))
    created = client.post(reverse("api-alert-rules"), payload, content_type="application/json")

    assert refused.status_code == 403
    assert created.status_code == 201
    rule = Rule.objects.get(pk=created.json()["id"])
    assert list(rule.stages.all()) == [scene.stage]


def test_an_admin_cannot_aim_a_rule_at_another_teams_pipeline(client):
    scene = make_scene()
    mine = make_team("mine")
    client.force_login(make_user(mine, Role.ADMIN))

    answer = client.post(
        reverse("api-alert-rules"),
        {"pipeline": scene.pipeline.pk, "name": "theirs"},
        content_type="application/json",
    )

    assert answer.status_code == 400
    assert answer.json()["pipeline"] == [
        f'Invalid pk "{scene.pipeline.pk}" - object does not exist.'
    ]


def test_a_channel_secret_is_written_but_never_read_back(client):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))

    created = client.post(
        reverse("api-alert-channels"),
        {
            "team": scene.team.pk,
            "name": "pd",
            "kind": "pagerduty",
            "target": "https://events.pagerduty.com/v2/enqueue",
            "secret": "routing-key-0123456789abcdef",
        },
        content_type="application/json",
    )
    channel_id = created.json()["id"]
    changed = client.patch(
        reverse("api-alert-channel", kwargs={"channel_id": channel_id}),
        {"name": "pagerduty"},
        content_type="application/json",
    )
    page = client.get(reverse("alerts:settings")).content.decode()

    assert created.status_code == 201
    assert "secret" not in created.json()
    assert changed.json()["secret_hint"] == "…cdef"
    assert Channel.objects.get(pk=channel_id).secret == "routing-key-0123456789abcdef"
    assert "routing-key" not in page


SLACK_URL = "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX"


def _slack_channel(scene: Scene) -> Channel:
    return Channel.objects.create(team=scene.team, name="slack", kind="slack", target=SLACK_URL)


def _admin(scene: Scene, via: str) -> Client:
    """A client of an admin of ``scene``'s team, logged in or holding a read-write token."""
    admin = cast(User, make_user(scene.team, Role.ADMIN))
    if via == "token":
        issued = issue_api_token(admin, "provisioning", Scope.READ_WRITE)
        return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    client = Client()
    client.force_login(admin)
    return client


@pytest.mark.parametrize("via", ["session", "token"])
def test_a_slack_url_is_not_read_back_by_changing_the_channels_kind(via):
    # given a Slack channel, and its team's admin
    scene = make_scene()
    channel = _slack_channel(scene)
    client = _admin(scene, via)
    url = reverse("api-alert-channel", kwargs={"channel_id": channel.pk})

    # when the admin makes it a webhook without giving a new target, and reads it
    changed = client.patch(url, {"kind": "webhook"}, content_type="application/json")
    read = client.get(url)

    # then the change is refused, nothing changed, and the URL is not shown
    assert (changed.status_code, list(changed.json())) == (400, ["target"])
    assert (Channel.objects.get(pk=channel.pk).kind, Channel.objects.get(pk=channel.pk).target) == (
        "slack",
        SLACK_URL,
    )
    assert "XXXX/" not in changed.content.decode() + read.content.decode()
    assert read.json()["target"] == "https://hooks.slack.com/…XXXX"


@pytest.mark.parametrize("via", ["session", "token"])
def test_a_kind_change_with_a_new_target_leaves_the_old_secret_behind(via):
    # given a PagerDuty channel holding its routing key
    scene = make_scene()
    channel = Channel.objects.create(
        team=scene.team,
        name="pd",
        kind="pagerduty",
        target="https://events.pagerduty.com/v2/enqueue",
        secret="routing-key-0123456789abcdef",
    )
    client = _admin(scene, via)

    # when the admin makes it a webhook with its new target
    changed = client.patch(
        reverse("api-alert-channel", kwargs={"channel_id": channel.pk}),
        {"kind": "webhook", "target": "https://hooks.example.org/latency"},
        content_type="application/json",
    )

    # then it is one, signing with a new key rather than the routing key
    assert changed.status_code == 200, changed.content
    stored = Channel.objects.get(pk=channel.pk)
    assert (stored.kind, stored.target) == ("webhook", "https://hooks.example.org/latency")
    assert stored.secret.startswith("whsec_")
    assert changed.json()["secret_hint"] == f"whsec_…{stored.secret[-4:]}"


def test_a_slack_url_stored_under_another_kind_is_shown_masked(client):
    # given a webhook channel whose target is a Slack URL (as an earlier kind change left it)
    scene = make_scene()
    channel = Channel.objects.create(team=scene.team, name="old", kind="webhook", target=SLACK_URL)
    client.force_login(make_user(scene.team, Role.ADMIN))

    # when its admin reads it through the API and the settings page
    read = client.get(reverse("api-alert-channel", kwargs={"channel_id": channel.pk}))
    page = client.get(reverse("alerts:settings"))

    # then neither shows the URL's secret path
    assert read.json()["target"] == "https://hooks.slack.com/…XXXX"
    assert "B0000" not in page.content.decode()


def test_an_outsider_cannot_change_a_channels_kind_nor_read_its_target(client):
    # given a Slack channel, and the admin of another team
    scene = make_scene()
    channel = _slack_channel(scene)
    client.force_login(make_user(make_team("elsewhere"), Role.ADMIN))
    url = reverse("api-alert-channel", kwargs={"channel_id": channel.pk})

    # when the outsider changes its kind and target, and reads it
    changed = client.patch(
        url,
        {"kind": "webhook", "target": "https://attacker.example.org/"},
        content_type="application/json",
    )
    read = client.get(url)

    # then both are 404, nothing leaked and nothing changed
    assert (changed.status_code, read.status_code) == (404, 404)
    assert "hooks.slack.com" not in changed.content.decode() + read.content.decode()
    stored = Channel.objects.get(pk=channel.pk)
    assert (stored.kind, stored.target) == ("slack", SLACK_URL)


def test_openapi_schema_documents_the_alerts_api(client):
    client.force_login(make_user(make_team(), Role.VIEWER))

    schema = client.get(reverse("api-schema"), {"format": "json"}).json()

    assert {
        "/api/incidents/",
        "/api/incidents/{incident_id}/",
        "/api/alerts/",
        "/api/alerts/{alert_id}/",
        "/api/alerts/{alert_id}/ack/",
        "/api/alerts/{alert_id}/resolve/",
        "/api/alert-rules/",
        "/api/alert-rules/{rule_id}/",
        "/api/alert-channels/",
        "/api/alert-channels/{channel_id}/",
        "/api/alert-channels/{channel_id}/test/",
    } <= set(schema["paths"])


def test_a_webhook_channel_created_without_a_secret_gets_a_signing_key_and_a_bad_one_is_refused(
    client,
):
    scene = make_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))
    hook = {"team": scene.team.pk, "name": "hook", "kind": "webhook", "target": "https://e.org/"}

    created = client.post(reverse("api-alert-channels"), hook, content_type="application/json")
    refused = client.post(
        reverse("api-alert-channels"), {**hook, "secret": "s"}, content_type="application/json"
    )

    assert created.status_code == 201
    secret = Channel.objects.get(pk=created.json()["id"]).secret
    assert created.json()["secret_hint"] == f"whsec_…{secret[-4:]}"
    assert created.json()["secret"] == secret
    read = client.get(reverse("api-alert-channel", kwargs={"channel_id": created.json()["id"]}))
    assert "secret" not in read.json()
    assert (refused.status_code, refused.json()) == (
        400,
        {"secret": ["The signing secret must look like whsec_<base64>."]},
    )


def test_an_admin_queues_a_channel_test_through_the_api_and_others_cannot(client):
    scene = make_scene()
    url = reverse("api-alert-channel-test", kwargs={"channel_id": scene.channel.pk})
    client.force_login(make_user(scene.team, Role.ONCALL))
    refused = client.post(url)
    client.force_login(make_user(make_team("other"), Role.ADMIN))
    hidden = client.post(url)
    client.force_login(make_user(scene.team, Role.ADMIN))

    queued = client.post(url)

    assert (refused.status_code, hidden.status_code, queued.status_code) == (403, 404, 202)
    assert {k: queued.json()[k] for k in ("channel", "action", "status", "attempts")} == {
        "channel": "hook",
        "action": "test",
        "status": "pending",
        "attempts": 0,
    }
    assert Delivery.objects.count() == 1


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL])
def test_a_receivers_answer_echoing_the_secret_path_is_shown_to_team_admins_only(client, role):
    scene = make_scene()
    alert = firing(scene)
    echoed = "404 Not Found after 0.02 s: no hook at /hooks/tok_s3cr3t_path"
    Delivery.objects.filter(event__alert=alert).update(detail=echoed, last_status_code=404)
    kwargs = {"alert_id": alert.pk}
    shown = {}
    for who in (role, Role.ADMIN):
        client.force_login(make_user(scene.team, who))
        api = client.get(reverse("api-alert", kwargs=kwargs)).json()["deliveries"]
        page = client.get(reverse("alerts:detail", kwargs=kwargs)).content.decode()
        log = client.get(reverse("alerts:settings")).content.decode()
        shown[who] = (
            [row["detail"] for row in api],
            "tok_s3cr3t_path" in page,
            "tok_s3cr3t_path" in log,
        )

    assert shown[role] == ([""], False, False)
    assert shown[Role.ADMIN] == ([echoed], True, True)

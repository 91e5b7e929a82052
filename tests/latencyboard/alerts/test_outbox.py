"""The outbox's retry schedule with a scripted transport (the schedule only), and one
delivery end to end through the notifications transport to a receiver on loopback."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook

from latencyboard.alerts.backoff import Schedule
from latencyboard.alerts.models import Alert, AlertStatus, Delivery, Rule
from latencyboard.alerts.outbox import claim, notice_of, send_due
from latencyboard.alerts.services import record_event, send_test
from latencyboard.notifications.notice import Action, Attempt, Notice, Verdict
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Role
from tests.factories import incident_for, make_user
from tests.latencyboard.alerts.scenes import HOOK_SECRET, NOW, make_scene, queued
from tests.latencyboard.notifications.receiver import Receiver

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at


class Scripted:
    """A transport answering the given attempts in turn, recording what it was handed."""

    def __init__(self, *answers: Attempt) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str, str, Notice, float]] = []

    def __call__(self, kind: str, target: str, secret: str, notice: Notice, timeout: float):
        self.calls.append((kind, target, secret, notice, timeout))
        return self.answers.pop(0)


RETRY_503 = Attempt(Verdict.RETRY, 503, "503 Service Unavailable")
OK = Attempt(Verdict.DELIVERED, 200, "200 OK")


def test_a_receiver_answering_503_three_times_gets_it_on_the_fourth_try_after_backoff():
    scene = make_scene()
    delivery = queued(scene)
    transport = Scripted(RETRY_503, RETRY_503, RETRY_503, OK)
    clock = Clock(NOW)
    schedule = Schedule(base_s=10, cap_s=3600, max_attempts=8)
    waits = []

    for _ in range(4):
        send_due(clock, transport, schedule)
        delivery.refresh_from_db()
        waits.append((delivery.next_attempt_at - clock.at).total_seconds())
        assert send_due(clock, transport, schedule) == 0  # not due again yet
        clock.at = delivery.next_attempt_at

    assert waits[:3] == [10.0, 20.0, 40.0]
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == (
        "delivered",
        4,
        200,
    )
    assert len(transport.calls) == 4
    kind, target, secret, notice, _ = transport.calls[0]
    assert (kind, target, secret) == ("webhook", "http://127.0.0.1:9/", HOOK_SECRET)
    assert (notice.action, notice.dedup_key, notice.stage) == (
        Action.TRIGGER,
        Alert.objects.get().incident.dedup_key,
        "model_forward",
    )


def test_retry_after_pushes_the_next_attempt_later():
    scene = make_scene()
    delivery = queued(scene)
    transport = Scripted(Attempt(Verdict.RETRY, 429, "429 Too Many Requests", retry_after_s=120))

    send_due(Clock(NOW), transport, Schedule(base_s=10))

    delivery.refresh_from_db()
    assert delivery.status == "retrying"
    assert delivery.next_attempt_at == NOW + dt.timedelta(seconds=120)


def test_a_400_gives_up_at_once_and_says_why():
    scene = make_scene()
    delivery = queued(scene)
    transport = Scripted(Attempt(Verdict.FAILED, 400, "400 Bad Request: no such channel"))

    send_due(Clock(NOW), transport)
    later = send_due(Clock(NOW + dt.timedelta(days=1)), transport)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.detail) == (
        "failed",
        1,
        "400 Bad Request: no such channel",
    )
    assert later == 0


def test_retries_stop_after_the_last_attempt():
    scene = make_scene()
    delivery = queued(scene)
    transport = Scripted(RETRY_503, RETRY_503, RETRY_503)
    clock = Clock(NOW)

    for _ in range(3):
        send_due(clock, transport, Schedule(base_s=1, max_attempts=3))
        clock.at += dt.timedelta(hours=1)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 3)
    assert delivery.detail == "gave up after 3 attempts: 503 Service Unavailable"


def test_a_firing_alert_reaches_a_webhook_on_loopback_signed_through_the_real_transport(
    receiver: Receiver,
):
    scene = make_scene()
    scene.channel.target = receiver.url
    scene.channel.save()
    delivery = queued(scene, at=timezone.now())

    send_due(timezone.now)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 200)
    (request,) = receiver.requests
    body = Webhook(HOOK_SECRET).verify(request.body, request.headers)
    assert (body["type"], body["data"]["dedup_key"], body["data"]["stage"]) == (
        "alert.trigger",
        Alert.objects.get().incident.dedup_key,
        "model_forward",
    )


def test_a_receiver_answering_503_three_times_gets_the_message_once_after_retries(
    receiver: Receiver,
):
    scene = make_scene()
    scene.channel.target = receiver.url
    scene.channel.save()
    receiver.fail_then_succeed(3)
    delivery = queued(scene, at=timezone.now())
    clock = Clock(timezone.now())

    for _ in range(4):
        send_due(clock)
        delivery.refresh_from_db()
        clock.at = delivery.next_attempt_at

    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 4, 200)
    # Four tries, one message: every retry carries the same id, for the receiver to dedup.
    assert len(receiver.requests) == 4
    assert len({request.headers["webhook-id"] for request in receiver.requests}) == 1
    assert send_due(Clock(clock.at + dt.timedelta(days=1))) == 0


def test_a_receiver_answering_400_gets_it_once_and_the_delivery_log_says_why(
    receiver: Receiver, client
):
    scene = make_scene()
    scene.channel.target = receiver.url
    scene.channel.save()
    receiver.answer(400, body=b"unknown hook")
    delivery = queued(scene, at=timezone.now())
    # Team admins see receivers' answers (members see the status code alone).
    client.force_login(make_user(scene.team, Role.ADMIN))

    send_due(timezone.now)
    again = send_due(lambda: timezone.now() + dt.timedelta(days=1))
    alert = Alert.objects.get()
    page = client.get(reverse("alerts:detail", kwargs={"alert_id": alert.pk}))

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 1, 400)
    assert (again, len(receiver.requests)) == (0, 1)
    assert delivery.detail in page.content.decode()
    assert "unknown hook" in delivery.detail


def test_an_empty_outbox_sends_nothing():
    make_scene()

    sent = send_due(Clock(NOW))

    assert sent == 0


def test_a_page_is_sent_before_a_test_send_and_a_retry_that_fell_due_earlier():
    # given a retry due a minute ago and the channel's "send test" pressed 30 s ago
    scene = make_scene()
    retry = queued(scene, NOW - dt.timedelta(minutes=5))
    Delivery.objects.filter(pk=retry.pk).update(
        status="retrying", attempts=1, next_attempt_at=NOW - dt.timedelta(minutes=1)
    )
    admin = make_user(scene.team, Role.ADMIN)
    test = send_test(scene.channel, admin, NOW - dt.timedelta(seconds=30))  # type: ignore[arg-type]

    # when an incident of another pipeline of the team opens now, paging the same channel
    pipeline = Pipeline.objects.create(team=scene.team, service_name="recommender")
    rule = Rule.objects.create(pipeline=pipeline, name="end to end")
    rule.channels.add(scene.channel)
    alert = Alert.objects.create(
        rule=rule,
        pipeline=pipeline,
        incident=incident_for(pipeline, AlertStatus.FIRING, NOW),
        dedup_key="k-2",
        status=AlertStatus.FIRING,
        summary="recommender · end to end: p99 80.0 → 120.0 ms (+50%)",
        started_at=NOW,
    )
    record_event(alert, "", AlertStatus.FIRING, NOW, note="fired")
    transport = Scripted(OK, OK, OK)
    send_due(Clock(NOW), transport)

    # then the page went first, then the retry and the test in the order they fell due
    told = [call[3].dedup_key for call in transport.calls]
    assert told == [
        alert.incident.dedup_key,
        retry.event.alert.incident.dedup_key,  # type: ignore[union-attr]
        notice_of(test).dedup_key,
    ]


def test_a_delivery_whose_worker_died_mid_attempt_is_sent_once_after_its_claim_lapses(settings):
    # given a delivery claimed by a worker that was then killed before recording anything
    scene = make_scene()
    delivery = queued(scene)
    assert claim(NOW) == delivery.pk
    lapses = NOW + dt.timedelta(seconds=settings.TASK_TIME_LIMITS["alerts.send_deliveries"].hard)

    # when the outbox is sent just before the claim lapses, and when it has
    transport = Scripted(OK)
    before = send_due(Clock(lapses - dt.timedelta(seconds=1)), transport)
    after = send_due(Clock(lapses), transport)

    # then only the second sends it, once, and its attempts count the lost one
    delivery.refresh_from_db()
    assert (before, after, len(transport.calls)) == (0, 1, 1)
    assert (delivery.status, delivery.attempts) == ("delivered", 2)

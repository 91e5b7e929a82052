"""One delivery attempt against real HTTP servers on loopback."""

from __future__ import annotations

import datetime as dt
import logging
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from standardwebhooks import Webhook

from latencyboard.notifications.delivery import deliver
from latencyboard.notifications.notice import Action, Attempt, Verdict
from tests.latencyboard.notifications.receiver import (
    Receiver,
    allow_loopback_receivers,
    trickling_receiver,
)
from tests.latencyboard.notifications.samples import notice

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ROUTING_KEY = "R0123456789ABCDEF0123456789ABCDE"


# Name lookups and connections made by the thread of a test inside ``network_calls()``, or by
# the delivery's lookup threads then (an audit hook cannot be removed: it records only then).
_watched: list[tuple[int, list[str]]] = []


def _record_network_calls(event: str, args: tuple[object, ...]) -> None:
    if _watched and event in ("socket.connect", "socket.getaddrinfo"):
        thread = threading.current_thread()
        owner, calls = _watched[-1]
        if thread.ident == owner or thread.name.startswith("notification-dns"):
            calls.append(f"{event} {args[1] if event == 'socket.connect' else args[0]}")


sys.addaudithook(_record_network_calls)


@contextmanager
def network_calls() -> Iterator[list[str]]:
    calls: list[str] = []
    _watched.append((threading.get_ident(), calls))
    try:
        yield calls
    finally:
        _watched.pop()


def send(receiver: Receiver, timeout_s: float = 5.0, **changes: object) -> Attempt:
    return deliver("webhook", receiver.url, SECRET, notice(**changes), timeout_s)


def test_a_2xx_is_delivered_with_a_valid_signature(receiver: Receiver) -> None:
    # when a notice is delivered to a webhook receiver that answers 200
    attempt = send(receiver)

    # then the attempt is delivered and the receiver can verify what it got
    assert (attempt.verdict, attempt.status_code) == (Verdict.DELIVERED, 200)
    assert re.fullmatch(r"200 OK after \d+\.\d\d s", attempt.detail)
    (request,) = receiver.requests
    assert (request.method, request.path) == ("POST", "/hook")
    verified = Webhook(SECRET).verify(request.body, request.headers)
    assert verified["data"]["stage"] == "model_forward"


def test_a_503_is_retried(receiver: Receiver) -> None:
    receiver.answer(503, body=b"upstream down")

    attempt = send(receiver)

    assert (attempt.verdict, attempt.status_code, attempt.retry_after_s) == (
        Verdict.RETRY,
        503,
        None,
    )
    assert re.fullmatch(r"503 Service Unavailable after \d+\.\d\d s: upstream down", attempt.detail)


def test_a_429_is_retried_after_the_seconds_the_receiver_asks(receiver: Receiver) -> None:
    receiver.answer(429, headers={"Retry-After": "7"})

    attempt = send(receiver)

    assert (attempt.verdict, attempt.status_code, attempt.retry_after_s) == (
        Verdict.RETRY,
        429,
        7.0,
    )


def test_a_retry_after_date_is_read_as_seconds_from_the_attempt(receiver: Receiver) -> None:
    # given a receiver that asks to wait until 90 s after the attempt
    now = dt.datetime(2026, 11, 24, 10, 0, 0, tzinfo=dt.UTC)
    receiver.answer(503, headers={"Retry-After": "Tue, 24 Nov 2026 10:01:30 GMT"})

    # when the attempt is made at that time
    attempt = deliver("webhook", receiver.url, SECRET, notice(), 5.0, now=now)

    # then the outbox learns to wait 90 s
    assert attempt.retry_after_s == 90.0


def test_a_400_fails_for_good_and_says_what_the_receiver_said(receiver: Receiver) -> None:
    receiver.answer(400, body=b'{"error": "unknown field \\"figures\\""}')

    attempt = send(receiver)

    assert (attempt.verdict, attempt.status_code) == (Verdict.FAILED, 400)
    assert re.fullmatch(
        r'400 Bad Request after \d+\.\d\d s: \{"error": "unknown field \\"figures\\""\}',
        attempt.detail,
    )


def test_a_receiver_answering_503_three_times_gets_the_message_once_retried(
    receiver: Receiver,
) -> None:
    # given a receiver that fails three times, then recovers
    receiver.fail_then_succeed(3)

    # when the outbox tries four times
    verdicts = [send(receiver).verdict for _ in range(4)]

    # then the fourth is delivered, and all four carried one message id
    assert verdicts == [Verdict.RETRY, Verdict.RETRY, Verdict.RETRY, Verdict.DELIVERED]
    assert {request.headers["webhook-id"] for request in receiver.requests} == {
        receiver.requests[0].headers["webhook-id"]
    }


def test_a_hanging_receiver_times_out_within_the_timeout(receiver: Receiver) -> None:
    receiver.hang()

    started = time.monotonic()
    attempt = send(receiver, timeout_s=0.5)
    elapsed = time.monotonic() - started

    assert attempt == Attempt(Verdict.RETRY, None, "timed out after 0.50 s")
    assert 0.5 <= elapsed < 1.5


def test_a_receiver_trickling_its_answer_is_cut_at_the_deadline_of_the_whole_exchange(
    settings: Any,
) -> None:
    allow_loopback_receivers(settings)
    # given a receiver that sends its 200 one byte every 0.4 s: each read is far inside the
    # timeout, the whole answer (56 bytes) takes 22 s
    with trickling_receiver(byte_every_s=0.4) as url:
        # when a notice is sent with a 2 s deadline
        attempt = deliver("webhook", url, SECRET, notice(), 2.0)

    # then the attempt ends at the deadline, to be retried, rather than when the receiver
    # finishes (a 4 s trickle would otherwise hold a worker for minutes)
    assert attempt == Attempt(Verdict.RETRY, None, "timed out after 2 s")


def test_a_closed_port_is_retried(settings: Any) -> None:
    # given a loopback port nothing listens on, loopback allowed
    allow_loopback_receivers(settings)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    attempt = deliver("webhook", f"http://127.0.0.1:{port}/hook", SECRET, notice())

    assert (attempt.verdict, attempt.status_code) == (Verdict.RETRY, None)
    assert attempt.detail.startswith(f"could not reach 127.0.0.1:{port}: ")


def test_a_redirect_is_not_followed(receiver: Receiver) -> None:
    receiver.answer(302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})

    attempt = send(receiver)

    assert (attempt.verdict, attempt.status_code) == (Verdict.FAILED, 302)
    assert attempt.detail.endswith(
        "; redirects are not followed (Location: http://169.254.169.254/latest/meta-data/)"
    )
    assert len(receiver.requests) == 1


def test_a_huge_answer_is_read_only_a_few_kilobytes(receiver: Receiver) -> None:
    receiver.answer(500, body=b"e" * 5_000_000)

    attempt = send(receiver)

    assert attempt.verdict is Verdict.RETRY
    assert attempt.detail.endswith(": " + "e" * 200)


@pytest.mark.parametrize(
    ("target", "detail"),
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            "bad target: 169.254.169.254 is a cloud metadata address: "
            "notifications may not go there",
        ),
        (
            "http://[::ffff:169.254.169.254]/",
            "bad target: ::ffff:169.254.169.254 is a cloud metadata address: "
            "notifications may not go there",
        ),
        (
            "http://[fd00:ec2::254]/",
            "bad target: fd00:ec2::254 is a cloud metadata address: notifications may not go there",
        ),
        ("ftp://example.org/hook", "bad target: the target must be an http:// or https:// URL"),
        (
            "hooks.slack.com/services/T0/B0/x",
            "bad target: the target must be an http:// or https:// URL",
        ),
    ],
    ids=["metadata", "mapped-metadata", "aws-ipv6-metadata", "ftp", "no-scheme"],
)
def test_a_forbidden_target_fails_at_once_without_connecting(target: str, detail: str) -> None:
    with network_calls() as calls:
        attempt = deliver("webhook", target, SECRET, notice(), 10.0)

    assert attempt == Attempt(Verdict.FAILED, None, detail)
    # neither looked up nor connected to: it cannot wait on the network
    assert calls == []


def test_a_host_name_is_resolved_and_sent_its_own_host_header(receiver: Receiver) -> None:
    attempt = deliver("webhook", f"http://localhost:{receiver.port}/hook", SECRET, notice(), 5.0)

    assert attempt.verdict is Verdict.DELIVERED
    assert receiver.requests[0].headers["host"] == f"localhost:{receiver.port}"


def test_a_bad_signing_secret_fails_without_sending(receiver: Receiver) -> None:
    attempt = deliver("webhook", receiver.url, "hunter2", notice())

    assert attempt == Attempt(
        Verdict.FAILED, None, "bad secret: the signing secret must look like whsec_<base64>"
    )
    assert receiver.requests == []


def test_slack_gets_the_block_kit_message(receiver: Receiver) -> None:
    attempt = deliver("slack", receiver.url, "", notice())

    assert attempt.verdict is Verdict.DELIVERED
    assert receiver.requests[0].json()["blocks"][0]["type"] == "header"


def test_pagerduty_gets_the_routing_key_and_dedup_key_on_acknowledge(receiver: Receiver) -> None:
    receiver.answer(202, body=b'{"status":"success","dedup_key":"rule-7"}')

    attempt = deliver("pagerduty", receiver.url, ROUTING_KEY, notice(action=Action.ACKNOWLEDGE))

    assert (attempt.verdict, attempt.status_code) == (Verdict.DELIVERED, 202)
    assert receiver.requests[0].json() == {
        "routing_key": ROUTING_KEY,
        "event_action": "acknowledge",
        "dedup_key": "rule-7:fraud-scorer:model_forward",
    }


def test_pagerduty_without_a_routing_key_fails_without_sending(receiver: Receiver) -> None:
    attempt = deliver("pagerduty", receiver.url, "", notice())

    assert attempt == Attempt(Verdict.FAILED, None, "no routing key: set the channel's secret")
    assert receiver.requests == []


def test_alertmanager_gets_the_bearer_token(receiver: Receiver) -> None:
    attempt = deliver("alertmanager", receiver.url, "tok", notice(action=Action.RESOLVE))

    assert attempt.verdict is Verdict.DELIVERED
    request = receiver.requests[0]
    assert request.headers["authorization"] == "Bearer tok"
    assert orjson.loads(request.body)["status"] == "resolved"


def test_an_unknown_kind_fails_and_is_sent_in_no_other_kinds_format(receiver: Receiver) -> None:
    attempt = deliver("carrier-pigeon", receiver.url, "", notice())

    assert attempt == Attempt(
        Verdict.FAILED,
        None,
        "unknown channel kind 'carrier-pigeon': choose one of alertmanager, email, pagerduty,"
        " slack, webhook",
    )
    assert receiver.requests == []


def test_an_answer_with_a_broken_content_encoding_is_still_judged(receiver: Receiver) -> None:
    receiver.answer(500, headers={"Content-Encoding": "gzip"}, body=b"not gzip at all")

    attempt = send(receiver)

    assert (attempt.verdict, attempt.status_code) == (Verdict.RETRY, 500)
    assert attempt.detail.endswith(": not gzip at all")


def test_the_secret_path_of_a_webhook_url_never_reaches_the_logs(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    # given a Slack-like URL whose path is the credential
    caplog.set_level(logging.DEBUG)

    # when a notice is delivered there
    attempt = deliver("slack", f"{receiver.url}/T000/B000/s3cretpath", "", notice())

    # then nothing logged shows the path
    assert attempt.verdict is Verdict.DELIVERED
    assert "notifications.attempt" in caplog.messages
    assert "s3cretpath" not in caplog.text

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import threading
from typing import Any

import pytest

from latencyboard.notifications.delivery import deliver
from latencyboard.notifications.notice import Attempt, Verdict
from latencyboard.notifications.transport import (
    BadNetworkError,
    parse_networks,
    refused_reason,
    retry_after_s,
)
from tests.latencyboard.notifications.receiver import running_receiver
from tests.latencyboard.notifications.samples import notice

NOW = dt.datetime(2026, 11, 24, 10, 0, 0, tzinfo=dt.UTC)


LINK_LOCAL = "a link-local address"
LOOPBACK = "a loopback address"
METADATA = "a cloud metadata address"
NOT_UNICAST = "not a unicast host address"
PRIVATE = "a private or non-public address"


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("93.184.216.34", None),
        ("2606:4700:4700::1111", None),
        ("127.0.0.1", LOOPBACK),
        ("127.8.9.10", LOOPBACK),
        ("::1", LOOPBACK),
        ("::ffff:127.0.0.1", LOOPBACK),
        ("2002:7f00:1::1", LOOPBACK),
        ("10.1.2.3", PRIVATE),
        ("172.16.5.4", PRIVATE),
        ("192.168.1.20", PRIVATE),
        ("100.64.0.1", PRIVATE),
        ("fc00::1", PRIVATE),
        ("fd12:3456::1", PRIVATE),
        ("192.0.2.1", PRIVATE),
        ("64:ff9b::a00:1", PRIVATE),
        ("169.254.169.254", METADATA),
        ("fd00:ec2::254", METADATA),
        ("100.100.100.200", METADATA),
        ("::ffff:169.254.169.254", METADATA),
        ("64:ff9b::a9fe:a9fe", METADATA),
        ("169.254.0.1", LINK_LOCAL),
        ("fe80::1", LINK_LOCAL),
        ("0.0.0.0", NOT_UNICAST),  # noqa: S104 (a value, never bound)
        ("::", NOT_UNICAST),
        ("224.0.0.1", NOT_UNICAST),
        ("ff02::1", NOT_UNICAST),
        ("240.0.0.1", NOT_UNICAST),
        ("255.255.255.255", NOT_UNICAST),
    ],
)
def test_only_public_unicast_addresses_are_reachable_by_default(
    address: str, reason: str | None
) -> None:
    assert refused_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("10.20.3.4", None),
        ("::ffff:10.20.3.4", None),
        ("10.21.0.1", PRIVATE),
        ("127.0.0.1", None),
        ("169.254.169.254", METADATA),
    ],
)
def test_an_allowed_network_is_reachable_but_never_the_metadata_service(
    address: str, reason: str | None
) -> None:
    allowed = parse_networks(["10.20.0.0/16", "127.0.0.1", "169.254.0.0/16"])

    assert refused_reason(ipaddress.ip_address(address), allowed) == reason


def test_a_malformed_allowed_network_is_refused() -> None:
    with pytest.raises(BadNetworkError):
        parse_networks(["10.0.0.0/33"])


def test_a_name_that_resolves_to_loopback_is_refused_without_connecting() -> None:
    # given a receiver listening on loopback, and no network allowed besides public ones
    with running_receiver() as receiver:
        # when a notice is sent to it by name
        attempt = deliver(
            "webhook", f"http://localhost:{receiver.port}/hook", "whsec_c2VjcmV0", notice(), 5.0
        )

        # then it fails for good, and the receiver heard nothing (so nothing it says is kept)
        assert attempt == Attempt(
            Verdict.FAILED,
            None,
            "bad target: localhost is a loopback address: notifications may not go there",
        )
        assert receiver.requests == []


def test_a_name_whose_dns_answer_is_private_is_refused_without_connecting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a public-looking name whose DNS answer is a loopback address (a rebinding name)
    with running_receiver() as receiver:

        def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

        monkeypatch.setattr(socket, "getaddrinfo", resolve)

        attempt = deliver(
            "webhook", f"http://hooks.example:{receiver.port}/hook", "whsec_c2VjcmV0", notice(), 5.0
        )

        assert attempt == Attempt(
            Verdict.FAILED, None, "refused: hooks.example is 127.0.0.1, a loopback address"
        )
        assert receiver.requests == []


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        (" 120 ", 120.0),
        ("Tue, 24 Nov 2026 10:01:30 GMT", 90.0),
        ("Tue, 24 Nov 2026 09:59:00 GMT", 0.0),
        ("-5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
    ids=["seconds", "padded", "date", "past-date", "negative", "word", "empty", "absent"],
)
def test_retry_after_is_seconds_or_an_http_date(header: str | None, seconds: float | None) -> None:
    assert retry_after_s(header, NOW) == seconds


def test_a_name_that_resolves_to_the_metadata_service_is_refused_without_connecting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a host name whose DNS answer is the cloud metadata address
    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        assert host == "metadata.example"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)

    # when a notice is sent there
    attempt = deliver("webhook", "http://metadata.example/hook", "whsec_c2VjcmV0", notice(), 10.0)

    # then it fails for good, saying why
    assert attempt == Attempt(
        Verdict.FAILED,
        None,
        "refused: metadata.example is 169.254.169.254, a cloud metadata address",
    )


def test_a_name_that_does_not_resolve_is_retried() -> None:
    attempt = deliver("webhook", "http://no-such-host.invalid/hook", "whsec_c2VjcmV0", notice())

    assert (attempt.verdict, attempt.status_code) == (Verdict.RETRY, None)
    assert attempt.detail.startswith("could not resolve no-such-host.invalid: ")


def test_a_dns_lookup_that_hangs_counts_against_the_one_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a resolver that answers only long after the delivery's deadline
    answered = threading.Event()

    def hanging(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        answered.wait(60.0)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hanging)

    try:
        attempt = deliver(
            "webhook", "http://slow-dns.example/hook", "whsec_c2VjcmV0", notice(), 0.5
        )
    finally:
        answered.set()

    assert attempt == Attempt(Verdict.RETRY, None, "timed out after 0.50 s")

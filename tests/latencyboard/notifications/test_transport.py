from __future__ import annotations

import datetime as dt
import ipaddress
import socket
from typing import Any

import pytest

from latencyboard.notifications.delivery import deliver
from latencyboard.notifications.notice import Attempt, Verdict
from latencyboard.notifications.transport import refused_reason, retry_after_s
from tests.latencyboard.notifications.samples import notice

NOW = dt.datetime(2026, 11, 24, 10, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", None),
        ("::1", None),
        ("10.1.2.3", None),
        ("192.168.1.20", None),
        ("93.184.216.34", None),
        ("169.254.169.254", "a link-local or cloud metadata address"),
        ("169.254.0.1", "a link-local or cloud metadata address"),
        ("fe80::1", "a link-local or cloud metadata address"),
        ("fd00:ec2::254", "a link-local or cloud metadata address"),
        ("100.100.100.200", "a link-local or cloud metadata address"),
        ("::ffff:169.254.169.254", "a link-local or cloud metadata address"),
        ("0.0.0.0", "not a unicast host address"),  # noqa: S104 (a value, never bound)
        ("224.0.0.1", "not a unicast host address"),
        ("255.255.255.255", "not a unicast host address"),
    ],
)
def test_which_addresses_a_notification_may_reach(address: str, reason: str | None) -> None:
    assert refused_reason(ipaddress.ip_address(address)) == reason


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
        "refused: metadata.example is 169.254.169.254, a link-local or cloud metadata address",
    )


def test_a_name_that_does_not_resolve_is_retried() -> None:
    attempt = deliver("webhook", "http://no-such-host.invalid/hook", "whsec_c2VjcmV0", notice())

    assert (attempt.verdict, attempt.status_code) == (Verdict.RETRY, None)
    assert attempt.detail.startswith("could not resolve no-such-host.invalid: ")

from __future__ import annotations

from typing import Any

import pytest

from latencyboard.notifications.registry import kind_named
from latencyboard.notifications.targets import mask
from latencyboard.notifications.transport import parse_networks


def validate_target(kind: str, target: str) -> str | None:
    return kind_named(kind).target_problem(target)


@pytest.mark.parametrize(
    ("kind", "target"),
    [
        ("webhook", "https://hooks.example.org/latencyboard"),
        ("webhook", "http://93.184.216.34:8123/hook"),
        ("slack", "https://hooks.slack.com/services/T000/B000/XXXX"),
        ("pagerduty", "https://events.pagerduty.com/v2/enqueue"),
        ("alertmanager", "http://[2606:4700:4700::1111]:9093/api/v2/alerts"),
        ("email", "oncall@example.org"),
        ("email", "oncall@example.org, lead@example.org"),
    ],
)
def test_a_good_target_passes(kind: str, target: str) -> None:
    assert validate_target(kind, target) is None


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("http://127.0.0.1:8123/hook", "127.0.0.1 is a loopback address"),
        ("http://localhost:9093/api/v2/alerts", "localhost is a loopback address"),
        ("http://alertmanager.localhost/", "alertmanager.localhost is a loopback address"),
        ("http://[::1]:9093/", "::1 is a loopback address"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 is a loopback address"),
        ("http://10.0.0.7/hook", "10.0.0.7 is a private or non-public address"),
        ("http://100.64.1.1/hook", "100.64.1.1 is a private or non-public address"),
        ("http://[fd12::7]/hook", "fd12::7 is a private or non-public address"),
        ("https://[fe80::1%25eth0]/", "fe80::1%25eth0 is a link-local address"),
        ("http://239.1.2.3/", "239.1.2.3 is not a unicast host address"),
    ],
)
def test_an_internal_target_is_refused(target: str, error: str) -> None:
    assert validate_target("webhook", target) == f"{error}: notifications may not go there"


def test_an_internal_target_in_an_allowed_network_passes(settings: Any) -> None:
    settings.NOTIFICATION_ALLOWED_NETWORKS = parse_networks(["10.0.0.0/8"])

    assert validate_target("webhook", "http://10.0.0.7/hook") is None


@pytest.mark.parametrize(
    ("kind", "target", "error"),
    [
        ("webhook", "", "the target must be an http:// or https:// URL"),
        ("webhook", "javascript:alert(1)", "the target must be an http:// or https:// URL"),
        ("webhook", "https://", "the URL has no host"),
        (
            "webhook",
            "https://hooks.example.org/a b",
            "the URL contains spaces or control characters",
        ),
        (
            "webhook",
            "https://bücher.example/hook",
            "the URL must be ASCII: an xn-- host name, a percent-encoded path",
        ),
        ("webhook", "http://[::1/hook", "not a valid URL"),
        ("webhook", "http://example.org:99999/", "not a valid URL"),
        ("webhook", "http://example.org:0/", "the URL's port must be from 1 to 65535"),
        (
            "webhook",
            "https://user:pw@hooks.example.org/",
            "the URL must not hold a user name or password: put credentials in the secret",
        ),
        (
            "slack",
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254 is a cloud metadata address: notifications may not go there",
        ),
        ("webhook", "https://example.org/" + "a" * 2048, "the URL is longer than 2048 characters"),
        ("email", " , ", "give at least one e-mail address"),
        ("email", "oncall@example.org, nobody", "'nobody' is not an e-mail address"),
        (
            "email",
            ",".join(f"p{index}@example.org" for index in range(51)),
            "at most 50 e-mail addresses",
        ),
    ],
    ids=[
        "empty",
        "javascript",
        "no-host",
        "space",
        "not-ascii",
        "broken-ipv6",
        "port-too-big",
        "port-zero",
        "credentials",
        "metadata",
        "too-long",
        "no-recipient",
        "bad-recipient",
        "too-many-recipients",
    ],
)
def test_a_bad_target_is_explained(kind: str, target: str, error: str) -> None:
    assert validate_target(kind, target) == error


@pytest.mark.parametrize(
    ("kind", "secret", "shown"),
    [
        ("webhook", "", ""),
        ("alertmanager", "short", "…"),
        ("webhook", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_…LaSw"),
        ("alertmanager", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "…LaSw"),
        ("pagerduty", "R0123456789ABCDEF0123456789ABCDE", "…BCDE"),
    ],
    ids=["empty", "short", "webhook", "whsec-of-another-kind", "routing-key"],
)
def test_a_secret_is_shown_back_masked_as_its_kind_says(kind: str, secret: str, shown: str) -> None:
    assert kind_named(kind).secret_hint(secret) == shown


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("https://hooks.slack.com/services/T000/B000/XXXXabcd", "https://hooks.slack.com/…abcd"),
        ("http://[::1/hook/0123456789abcdef", "…cdef"),
    ],
    ids=["slack-url", "broken-url"],
)
def test_a_url_is_shown_back_masked_to_its_host(target: str, shown: str) -> None:
    assert mask(target) == shown


@pytest.mark.parametrize(
    ("kind", "secret", "error"),
    [
        ("webhook", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", None),
        ("webhook", "s", "the signing secret must look like whsec_<base64>"),
        ("webhook", "whsec_not base64!", "the signing secret after whsec_ is not valid base64"),
        ("pagerduty", "R0123456789ABCDEF0123456789ABCDE", None),
        ("pagerduty", "", "give the integration's routing key"),
        ("slack", "", None),
        ("alertmanager", "", None),
    ],
    ids=[
        "webhook",
        "webhook-not-whsec",
        "webhook-not-base64",
        "pagerduty",
        "pagerduty-without-key",
        "slack",
        "alertmanager-optional",
    ],
)
def test_a_secret_is_checked_as_its_kind_uses_it(kind: str, secret: str, error: str | None) -> None:
    assert kind_named(kind).secret_problem(secret) == error

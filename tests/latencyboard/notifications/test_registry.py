"""The registry of channel kinds: one module of notifications/kinds/ per kind, found on
import; a kind no module declares is an error."""

from __future__ import annotations

import pkgutil
import re

import pytest

from latencyboard.notifications import kinds, registry
from latencyboard.notifications.registry import UnknownChannelKindError


def test_every_module_of_the_kinds_package_is_the_registered_kind_of_its_name() -> None:
    modules = sorted(module.name for module in pkgutil.iter_modules(kinds.__path__))

    assert modules == ["alertmanager", "email", "pagerduty", "slack", "webhook"]
    assert [kind.name for kind in registry.kinds()] == modules
    assert registry.choices() == [
        ("alertmanager", "Alertmanager"),
        ("email", "Email"),
        ("pagerduty", "PagerDuty"),
        ("slack", "Slack"),
        ("webhook", "Webhook (signed)"),
    ]


def test_an_unknown_kind_is_an_error_that_names_the_kinds_there_are() -> None:
    with pytest.raises(UnknownChannelKindError) as raised:
        registry.kind_named("sms")

    assert str(raised.value) == (
        "unknown channel kind 'sms': choose one of alertmanager, email, pagerduty, slack, webhook"
    )
    assert (registry.find("sms"), registry.label("sms")) == (None, "unknown kind “sms”")


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("slack", "the channel kind 'slack' is registered already"),
        ("a" * 17, f"a channel kind's name has 1 to 16 characters: {'a' * 17!r}"),
        ("", "a channel kind's name has 1 to 16 characters: ''"),
    ],
    ids=["taken", "too-long", "empty"],
)
def test_a_kind_whose_name_is_taken_or_does_not_fit_is_not_registered(
    name: str, error: str
) -> None:
    impostor = type(registry.kind_named("slack"))()
    impostor.name = name

    with pytest.raises(ValueError, match=f"^{re.escape(error)}$"):
        registry.register(impostor)

    assert registry.kind_named("slack").label == "Slack"


@pytest.mark.parametrize(
    ("kind", "target", "secret"),
    [
        ("slack", "http://127.0.0.1:9/s", True),
        ("webhook", "https://hooks.slack.com/services/T000/B000/XXXX", True),
        ("webhook", "https://hooks.example.org/x", False),
        ("sms", "https://hooks.example.org/x", True),
    ],
    ids=["slack", "slack-url-of-another-kind", "webhook", "unknown-kind"],
)
def test_a_target_is_a_secret_when_a_kind_says_so(kind: str, target: str, secret: bool) -> None:
    assert registry.target_is_secret(kind, target) is secret

"""A channel's target and secret checked as the transport will use them, for the form,
the API and the admin alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from latencyboard.alerts.models import Channel
from latencyboard.notifications import webhook
from latencyboard.notifications.delivery import validate_secret, validate_target
from latencyboard.notifications.message import ChannelKind


@dataclass(frozen=True)
class CheckedChannel:
    secret: str
    errors: dict[str, str] = field(default_factory=dict)
    generated: bool = False
    """The secret was made here: show it once, for the receiver to verify signatures."""


def check_channel(
    kind: str, target: str, given_secret: str, stored: Channel | None
) -> CheckedChannel:
    """The secret to store (the given one; left empty, the ``stored`` channel's; for a webhook
    with neither, a fresh ``whsec_`` key) and what is wrong with target or secret, by field.

    A channel that changes kind needs a new target and keeps no secret: what was a secret of
    the old kind (a Slack URL, a routing key) may be shown or sent as the new kind's plain
    target, or signed with as its key."""
    kind_changed = stored is not None and stored.kind != kind
    secret = given_secret or ("" if stored is None or kind_changed else stored.secret)
    generated = kind == ChannelKind.WEBHOOK and not secret
    if generated:
        secret = webhook.new_secret()
    errors = {}
    if stored is not None and kind_changed and target == stored.target:
        errors["target"] = "A channel that changes kind needs its new target."
    target_problem = validate_target(kind, target)
    if target_problem and "target" not in errors:
        errors["target"] = target_problem[0].upper() + target_problem[1:] + "."
    secret_problem = validate_secret(kind, secret)
    if secret_problem:
        errors["secret"] = secret_problem[0].upper() + secret_problem[1:] + "."
    return CheckedChannel(secret, errors, generated and not errors)

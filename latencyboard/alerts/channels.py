"""A channel's target and secret checked as its kind will use them, for the form, the API and
the admin alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from latencyboard.alerts.models import Channel
from latencyboard.notifications.registry import UnknownChannelKindError, kind_named


@dataclass(frozen=True)
class CheckedChannel:
    secret: str
    errors: dict[str, str] = field(default_factory=dict)
    generated: bool = False
    """The secret was made here: show it once, for the receiver to verify signatures."""


def _sentence(problem: str) -> str:
    return problem[0].upper() + problem[1:] + "."


def check_channel(
    kind_name: str, target: str, given_secret: str, stored: Channel | None
) -> CheckedChannel:
    """The secret to store (the given one; left empty, the ``stored`` channel's; with neither,
    a fresh one when the kind makes one) and what is wrong with kind, target or secret, by
    field.

    A channel that changes kind needs a new target and keeps no secret: what was a secret of
    the old kind (a Slack URL, a routing key) may be shown or sent as the new kind's plain
    target, or signed with as its key."""
    try:
        kind = kind_named(kind_name)
    except UnknownChannelKindError as exc:
        return CheckedChannel(given_secret, {"kind": _sentence(str(exc))})
    kind_changed = stored is not None and stored.kind != kind_name
    secret = given_secret or ("" if stored is None or kind_changed else stored.secret)
    generated = None if secret else kind.new_secret()
    secret = generated or secret
    errors = {}
    if stored is not None and kind_changed and target == stored.target:
        errors["target"] = "A channel that changes kind needs its new target."
    target_problem = kind.target_problem(target)
    if target_problem and "target" not in errors:
        errors["target"] = _sentence(target_problem)
    secret_problem = kind.secret_problem(secret)
    if secret_problem:
        errors["secret"] = _sentence(secret_problem)
    return CheckedChannel(secret, errors, generated is not None and not errors)

"""What a kind of channel is: everything about it, declared in one module of
:mod:`latencyboard.notifications.kinds` as ``KIND`` (see :mod:`.registry`).

A channel stores its kind's ``name``, a ``target`` and a ``secret``; what those mean, how
they are checked, shown back and sent with is the kind's to say. The defaults fit a kind
that POSTs to a URL: the URL rules of :mod:`.targets` (no internal address, no credentials),
and the URL shown masked to members who are not the team's admins.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod

from django.conf import settings

from latencyboard.notifications.message import HttpMessage
from latencyboard.notifications.notice import Attempt, Notice, Verdict
from latencyboard.notifications.targets import mask, url_problem
from latencyboard.notifications.transport import post


class BadSecretError(ValueError):
    """A secret its kind cannot send with."""


class ChannelKind(ABC):
    name: str
    """What a channel stores as its kind (at most 16 characters)."""
    label: str
    """What a person picking a kind reads."""
    asks_for: str = ""
    """What the secret is, for the channel form ("" when the kind takes none)."""
    issued_note: str = ""
    """What a receiver does with a secret the kind generated (shown with it, once)."""
    target_is_secret: bool = False
    """The target is itself a credential (a Slack URL): shown masked even to the team's
    admins, and left empty on an edit it stays as it is."""

    def target_problem(self, target: str) -> str | None:
        """What is wrong with ``target`` for this kind, or None."""
        return url_problem(target)

    def secret_problem(self, secret: str) -> str | None:
        """What is wrong with ``secret`` for this kind, or None. An empty secret the kind
        generates (:meth:`new_secret`) is fine here: it is made before this is asked."""
        return None

    def new_secret(self) -> str | None:
        """A fresh secret for a new channel saved without one, or None: the kind makes none."""
        return None

    def secret_hint(self, secret: str) -> str:
        """The secret as pages and the API may show it."""
        return mask(secret)

    def members_target(self, target: str) -> str:
        """The target as members who are not the team's admins may see it: any URL may carry
        a token in its path or query, so only its scheme, host and last characters."""
        return mask(target)

    def holds_own_credential(self, target: str) -> bool:
        """Whether ``target`` is a credential of this kind's service whatever kind of channel
        holds it (a Slack webhook URL left on a channel whose kind changed)."""
        return False

    @abstractmethod
    def send(
        self, target: str, secret: str, notice: Notice, timeout_s: float, now: dt.datetime
    ) -> Attempt:
        """Send ``notice`` once to a checked ``target`` within ``timeout_s``; never raises for
        the receiver's fault (see :func:`latencyboard.notifications.delivery.deliver`)."""


class HttpKind(ChannelKind):
    """A kind that POSTs one message per notice to its target URL."""

    @abstractmethod
    def render(self, notice: Notice, secret: str, now: dt.datetime) -> HttpMessage:
        """The request for one attempt at ``now``; raises :class:`BadSecretError`."""

    def send(
        self, target: str, secret: str, notice: Notice, timeout_s: float, now: dt.datetime
    ) -> Attempt:
        try:
            message = self.render(notice, secret, now)
        except BadSecretError as exc:
            return Attempt(Verdict.FAILED, None, f"bad secret: {exc}")
        return post(target, message, timeout_s, now, settings.NOTIFICATION_ALLOWED_NETWORKS)

"""The core's side of the audit log: say what someone did, and the ``audits`` app records it.

The core never imports ``audits`` (dependencies point from it to the core), so views and
admin actions call :func:`act`, which sends :data:`acted`; ``audits`` connects
``audits.log.record`` to it. The receiver runs in the caller's thread and transaction, and an
error in it fails the request: an act that cannot be recorded does not happen silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.dispatch import Signal
from django.http import HttpRequest

acted = Signal()


@dataclass(frozen=True, slots=True)
class Subject:
    """What was acted on: its kind, id and a label a reader recognises, and whose it is."""

    type: str
    id: object
    label: str
    team_id: int | None


def act(
    request: HttpRequest | None,
    action: str,
    subject: Subject,
    detail: Mapping[str, Any] | None = None,
    *,
    actor: User | AnonymousUser | None = None,
    command: str | None = None,
) -> None:
    """Record that ``actor`` (else the request's user) did ``action`` (``"objective.created"``)
    to ``subject``; ``detail`` is JSON-able (numbers as strings where exactness matters).
    A management command acting on its own names itself: ``command="bootstrap_local"``."""
    acted.send(
        Subject,
        request=request,
        action=action,
        subject=subject,
        detail=detail or {},
        actor=actor,
        command=command,
    )

"""Recording what people do: ``record(request, action, subject, detail)``, one row per act.

Code in ``audits`` calls it directly; the core calls ``latencyboard.audit_trail.act`` with the
same arguments, which lands here (:func:`on_acted`). Call either after the change succeeded,
in the same request (inside its transaction when there is one, so a rolled-back change leaves
no event), e.g.::

    act(request, "alert.acknowledged", Subject("alert", alert.pk, str(alert), alert.team_id))
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from axes.helpers import get_client_ip_address
from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest
from django.utils import timezone

from audits.models import AuditEvent
from latencyboard.audit_trail import Subject

logger = logging.getLogger(__name__)

_USER_AGENT_MAX = AuditEvent._meta.get_field("user_agent").max_length or 500
_LABEL_MAX = AuditEvent._meta.get_field("subject_label").max_length or 300


def record(
    request: HttpRequest | None,
    action: str,
    subject: Subject,
    detail: Mapping[str, Any] | None = None,
    *,
    actor: User | AnonymousUser | None = None,
    now: dt.datetime | None = None,
    command: str | None = None,
) -> AuditEvent:
    """Append one event: who (``actor``, else the request's user, else the management
    ``command``, as ``manage.py <command>``; none for the system), ``action``
    (``"objective.created"``), ``subject``, ``detail`` (JSON-able) and from where (the
    request's client address and user agent)."""
    if actor is None and request is not None:
        actor = request.user
    known = actor if actor is not None and actor.is_authenticated else None
    meta = request.META if request is not None else {}
    event = AuditEvent.objects.create(
        at=now or timezone.now(),
        team_id=subject.team_id,
        actor_id=None if known is None else known.pk,
        actor_username=_actor_name(known, command),
        action=action,
        subject_type=subject.type,
        subject_id=str(subject.id),
        subject_label=subject.label[:_LABEL_MAX],
        detail=dict(detail or {}),
        ip=client_ip(request),
        user_agent=str(meta.get("HTTP_USER_AGENT", ""))[:_USER_AGENT_MAX],
    )
    logger.info(
        "audit.recorded",
        extra={"audit_event": event.pk, "action": action, "team": subject.team_id},
    )
    return event


def _actor_name(user: User | AnonymousUser | None, command: str | None) -> str:
    if user is not None:
        return user.get_username()
    return "" if command is None else f"manage.py {command}"


def client_ip(request: HttpRequest | None) -> str | None:
    """The client's address as django-axes sees it (honouring ``TRUSTED_PROXY_COUNT``)."""
    if request is None:
        return None
    return get_client_ip_address(request) or None


def on_acted(sender: object, **kwargs: Any) -> None:
    """Receiver of ``latencyboard.audit_trail.acted``."""
    record(
        kwargs["request"],
        kwargs["action"],
        kwargs["subject"],
        kwargs["detail"],
        actor=kwargs.get("actor"),
        command=kwargs.get("command"),
    )

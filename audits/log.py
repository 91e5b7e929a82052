"""Recording what people do: ``record(request, action, subject, detail)``, one row per act.

Code in ``audits`` calls it directly; the core calls ``latencyboard.audit_trail.act`` with the
same arguments, which lands here (:func:`on_acted`). Call either after the change succeeded,
in the same request (inside its transaction when there is one, so a rolled-back change leaves
no event), e.g.::

    act(request, "alert.acknowledged", Subject("alert", alert.pk, str(alert), alert.team_id))
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from axes.helpers import get_client_ip_address
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection, transaction
from django.http import HttpRequest
from django.utils import timezone

from audits import chain
from audits.models import AuditEvent
from latencyboard.audit_trail import Subject
from latencyboard.storage import locks

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
    request's client address and user agent), chained to the event before it (``audits.chain``).
    Appends take turns (an advisory lock held until the caller's transaction ends)."""
    if actor is None and request is not None:
        actor = request.user
    known = actor if actor is not None and actor.is_authenticated else None
    meta = request.META if request is not None else {}
    with transaction.atomic(), connection.cursor() as cursor:
        locks.hold(cursor, locks.AUDIT_CHAIN)
        # The moment, detail and address as the database will return them: the hash is
        # checked later against what is read back.
        cursor.execute(
            "SELECT %s::timestamptz, %s::jsonb, host(%s::inet)",
            [now or timezone.now(), json.dumps(dict(detail or {})), client_ip(request)],
        )
        at, stored_detail, ip = cursor.fetchone()
        row = {
            "at": at,
            "team_id": subject.team_id,
            "actor_id": None if known is None else known.pk,
            "actor_username": _actor_name(known, command),
            "action": action,
            "subject_type": subject.type,
            "subject_id": str(subject.id),
            "subject_label": subject.label[:_LABEL_MAX],
            "detail": json.loads(stored_detail),
            "ip": ip,
            "user_agent": str(meta.get("HTTP_USER_AGENT", ""))[:_USER_AGENT_MAX],
        }
        head = chain_head()
        seq = head.seq + 1
        event = AuditEvent.objects.create(
            seq=seq, hash=chain.row_hash(head.sha256, seq, row), **row
        )
    logger.info(
        "audit.recorded",
        extra={"audit_event": event.pk, "seq": seq, "action": action, "team": subject.team_id},
    )
    return event


def chained_rows() -> Iterator[chain.Row]:
    """Every event in chain order, as :func:`audits.chain.verify` reads them."""
    events = AuditEvent.objects.order_by("seq").values("id", "seq", "hash", *chain.FIELDS)
    for values in events.iterator(chunk_size=2000):
        yield chain.Row(values.pop("id"), values.pop("seq"), values.pop("hash"), values)


def chain_head() -> chain.Head:
    """The last event of the chain as this transaction sees it."""
    head = AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first()
    return chain.Head(*head) if head else chain.Head(0, chain.GENESIS)


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

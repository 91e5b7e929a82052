"""Editing an objective without rewriting its past: each edit starts a new version.

An edit takes effect from the minute it is made. The counters of earlier minutes stay as they
were counted, with the old threshold; the minutes from the edit on are recounted from the
folded raw spans with the new one, and the rollup worker counts later spans with it. So a
report over a quarter reads each version's own counts over its own period.

One limit, said plainly: a span that arrives after the edit for a minute before it is counted
with the new threshold (the fold counts every new span with the objective's threshold of the
moment). Spans arrive seconds after they end, so this touches at most the edit's first minutes.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from latencyboard.audit_trail import Subject
from latencyboard.db import psycopg_cursor
from latencyboard.sla import counters, queries
from latencyboard.sla.counting import ObjectiveSpec
from latencyboard.sla.models import MaintenanceWindow, Objective, ObjectiveVersion
from latencyboard.storage import fold_lock
from latencyboard.teams.models import Role
from latencyboard.teams.queries import has_role
from latencyboard.windows import floor_minute

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Version:
    """One version of an objective; ``effective_until`` None: still in force."""

    number: int
    name: str
    threshold_ms: float
    target_percent: Decimal
    effective_from: dt.datetime
    effective_until: dt.datetime | None


@dataclass(frozen=True, slots=True)
class Edit:
    objective: Objective
    previous: Version
    current: Version
    recounted_minutes: int


def counted_since(objective: Objective) -> dt.datetime:
    """When ``objective``'s first version took effect: its first counted minute (creation
    back-fills from the retained spans), or its creation's minute when it counted none then."""
    created = floor_minute(objective.created_at)
    first = queries.first_counted_minute(objective, created)
    return created if first is None else first


def versions_of(objective: Objective) -> list[Version]:
    """Every version of ``objective``, oldest first (one when it was never edited); the first
    takes effect at :func:`counted_since`."""
    rows = list(objective.versions.order_by("number"))
    if not rows:
        return [
            Version(
                1,
                objective.name,
                objective.threshold_ms,
                objective.target_percent,
                counted_since(objective),
                None,
            )
        ]
    return [
        Version(
            row.number,
            row.name,
            row.threshold_ms,
            row.target_percent,
            row.effective_from or counted_since(objective),
            row.effective_until,
        )
        for row in rows
    ]


def edit_objective(
    objective: Objective,
    *,
    name: str,
    threshold_ms: float,
    target_percent: Decimal,
    edited_by: User | AnonymousUser,
    now: dt.datetime,
) -> Edit:
    """Change ``objective``'s name, threshold or target from the minute of ``now`` on.

    Raises ``PermissionDenied`` unless ``edited_by`` is an admin of the objective's team,
    ``ValidationError`` for a blank name, a threshold not above 0 or a target outside (0, 100].
    """
    if not has_role(edited_by, objective.team, Role.ADMIN):
        raise PermissionDenied("Only team admins edit SLA objectives.")
    errors = {}
    name = name.strip()
    if not name:
        errors["name"] = "Name the objective."
    if not threshold_ms > 0:
        errors["threshold_ms"] = "Must be greater than 0."
    if not 0 < target_percent <= 100:
        errors["target_percent"] = "Must be greater than 0 and at most 100."
    if errors:
        raise ValidationError(errors)

    since = floor_minute(now)
    editor = edited_by if isinstance(edited_by, User) else None
    with transaction.atomic():
        # Exclusive, as the creation back-fill: no fold counts this objective meanwhile.
        cursor = psycopg_cursor()
        fold_lock.take_exclusive(cursor)
        current = Objective.objects.select_for_update().get(pk=objective.pk)
        last = current.versions.order_by("-number").first()
        if last is None:
            last = ObjectiveVersion.objects.create(
                objective=current,
                number=1,
                name=current.name,
                threshold_ms=current.threshold_ms,
                target_percent=current.target_percent,
                window=current.window,
                effective_from=counted_since(current),
                created_by=None,
                created_at=current.created_at,
            )
        ObjectiveVersion.objects.filter(pk=last.pk).update(effective_until=since)
        ObjectiveVersion.objects.create(
            objective=current,
            number=last.number + 1,
            name=name,
            threshold_ms=threshold_ms,
            target_percent=target_percent,
            window=current.window,
            effective_from=since,
            created_by=editor,
            created_at=now,
        )
        recounted = 0
        if threshold_ms != current.threshold_ms:
            spec = ObjectiveSpec(current.pk, current.pipeline_id, current.stage_id, threshold_ms)
            recounted = counters.recount(cursor, spec, since)
        Objective.objects.filter(pk=current.pk).update(
            name=name, threshold_ms=threshold_ms, target_percent=target_percent
        )
    objective.refresh_from_db()
    versions = versions_of(objective)
    logger.info(
        "sla.objective_edited",
        extra={
            "objective": objective.pk,
            "version": versions[-1].number,
            "user": edited_by.pk,
            "recounted_minutes": recounted,
        },
    )
    return Edit(objective, versions[-2], versions[-1], recounted)


def audit_subject(objective: Objective) -> Subject:
    return Subject("objective", objective.pk, objective.name, objective.team_id)


def audit_detail(objective: Objective) -> dict[str, str | int | None]:
    """What the objective says, for the audit log (numbers as exact strings)."""
    return {
        "pipeline": objective.pipeline_id,
        "stage": objective.stage_id,
        "threshold_ms": repr(objective.threshold_ms),
        "target_percent": str(objective.target_percent),
        "window": objective.window,
    }


def edit_detail(edit: Edit) -> dict[str, object]:
    """An edit for the audit log: the objective as it is now, its version, and under
    ``before`` what the edit changed as it was."""
    previous, current = edit.previous, edit.current
    fields = {
        "name": (previous.name, current.name),
        "threshold_ms": (repr(previous.threshold_ms), repr(current.threshold_ms)),
        "target_percent": (str(previous.target_percent), str(current.target_percent)),
    }
    before: dict[str, object] = {k: old for k, (old, new) in fields.items() if old != new}
    return {
        **audit_detail(edit.objective),
        "version": current.number,
        "before": {**before, "version": previous.number},
    }


def maintenance_detail(window: MaintenanceWindow) -> dict[str, str | int | None]:
    """A maintenance window, for the audit log."""
    return {
        "maintenance_window": window.pk,
        "covers": window.covers,
        "start": window.start.isoformat(),
        "end": window.end.isoformat(),
        "reason": window.reason,
    }

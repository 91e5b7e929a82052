"""Writes for SLA objectives and their maintenance windows.

Creating an objective back-fills its exact counters, deleting one drops them. Maintenance
windows never touch the counters: they are rows that attainment queries leave minutes out by.
"""

from __future__ import annotations

import datetime as dt
import logging
from decimal import Decimal
from typing import cast

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction

from latencyboard.db import psycopg_cursor
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla import counters
from latencyboard.sla.counting import ObjectiveSpec
from latencyboard.sla.models import (
    MAINTENANCE_REASON_MAX_LENGTH,
    Coverage,
    MaintenanceWindow,
    Objective,
    Window,
)
from latencyboard.storage import fold_lock
from latencyboard.teams.models import Role, Team
from latencyboard.teams.queries import has_role

logger = logging.getLogger(__name__)


def _lock_against_rollups() -> None:
    with connection.cursor() as cursor:
        fold_lock.take_exclusive(cursor)


def _require_admin(user: User | AnonymousUser, team: Team) -> User:
    if not has_role(user, team, Role.ADMIN):
        raise PermissionDenied("Only team admins manage SLA objectives.")
    return cast(User, user)  # has_role is False for anonymous users


def create_objective(
    team: Team,
    pipeline: Pipeline,
    stage: Stage | None,
    name: str,
    threshold_ms: float,
    target_percent: Decimal,
    window: str,
    created_by: User | AnonymousUser,
) -> Objective:
    """Create an objective and count every retained span already folded into the rollups,
    with the rule folds count by (:func:`latencyboard.sla.counting.count_minutes`).

    ``stage`` None means end to end: the pipeline's root spans. Raises ``PermissionDenied``
    unless ``created_by`` is an admin of ``team``, ``ValidationError`` for a pipeline or stage
    of another team or an out-of-range threshold or target.
    """
    _require_admin(created_by, team)
    errors = {}
    if pipeline.team_id != team.pk:
        errors["pipeline"] = "Not a pipeline of this team."
    if stage is not None and stage.pipeline_id != pipeline.pk:
        errors["stage"] = "Not a stage of this pipeline."
    if not threshold_ms > 0:
        errors["threshold_ms"] = "Must be greater than 0."
    if not 0 < target_percent <= 100:
        errors["target_percent"] = "Must be greater than 0 and at most 100."
    if window not in Window.values:
        errors["window"] = f"One of {', '.join(Window.values)}."
    if errors:
        raise ValidationError(errors)

    with transaction.atomic():
        # Exclusive: folds in flight commit first (and are counted below as folded batches);
        # folds that start later wait, then see this objective and count their own batches.
        _lock_against_rollups()
        objective = Objective.objects.create(
            team=team,
            pipeline=pipeline,
            stage=stage,
            name=name,
            threshold_ms=threshold_ms,
            target_percent=target_percent,
            window=window,
        )
        minutes = counters.backfill(
            psycopg_cursor(),
            ObjectiveSpec(
                objective.pk, pipeline.pk, None if stage is None else stage.pk, threshold_ms
            ),
        )
    logger.info(
        "sla.objective_created",
        extra={
            "objective": objective.pk,
            "team": team.pk,
            "user": created_by.pk,
            "backfilled_minutes": minutes,
        },
    )
    return objective


def delete_objective(objective: Objective, deleted_by: User | AnonymousUser) -> bool:
    """Delete ``objective`` and its counters; False when it was already gone.

    Raises ``PermissionDenied`` unless ``deleted_by`` is an admin of the objective's team.
    """
    _require_admin(deleted_by, objective.team)
    with transaction.atomic():
        # A fold in flight still upserts counters of this objective; waiting for it keeps its
        # foreign key from failing (and with it the whole fold) after the row is gone.
        _lock_against_rollups()
        deleted, _ = Objective.objects.filter(pk=objective.pk).delete()
    if deleted:
        logger.info(
            "sla.objective_deleted",
            extra={"objective": objective.pk, "team": objective.team_id, "user": deleted_by.pk},
        )
    return bool(deleted)


def add_maintenance_window(
    objective: Objective,
    covers: str,
    start: dt.datetime,
    end: dt.datetime,
    reason: str,
    created_by: User | AnonymousUser,
    now: dt.datetime,
) -> MaintenanceWindow:
    """Record planned work: from now on attainment leaves out the minutes starting in
    ``[start, end)``, for ``objective`` or (``covers`` pipeline) every objective of its pipeline.

    Windows in the past are allowed (work is often declared after the fact); ``created_at``
    says when it was. Raises ``PermissionDenied`` unless ``created_by`` is an admin of the
    objective's team, ``ValidationError`` for naive times, an end not after the start, a
    blank or too long reason, or an unknown ``covers``.
    """
    admin = _require_admin(created_by, objective.team)
    errors = {}
    if start.tzinfo is None or end.tzinfo is None:
        errors["start"] = "Aware times only."
    elif not start < end:
        errors["end"] = "Must be after the start."
    reason = reason.strip()
    if not reason:
        errors["reason"] = "Say what the maintenance is."
    elif len(reason) > MAINTENANCE_REASON_MAX_LENGTH:
        errors["reason"] = f"At most {MAINTENANCE_REASON_MAX_LENGTH} characters."
    if covers not in Coverage.values:
        errors["covers"] = f"One of {', '.join(Coverage.values)}."
    if errors:
        raise ValidationError(errors)

    window = MaintenanceWindow.objects.create(
        objective=objective if covers == Coverage.OBJECTIVE else None,
        pipeline=objective.pipeline if covers == Coverage.PIPELINE else None,
        start=start,
        end=end,
        reason=reason,
        created_by=admin,
        created_at=now,
    )
    logger.info(
        "sla.maintenance_added",
        extra={
            "maintenance_window": window.pk,
            "objective": objective.pk,
            "covers": covers,
            "user": admin.pk,
        },
    )
    return window


def delete_maintenance_window(
    window: MaintenanceWindow, deleted_by: User | AnonymousUser, now: dt.datetime
) -> bool:
    """Stop ``window`` excluding anything; False when it was already deleted.

    The row stays, with who deleted it and when, so an audit can still see it was declared.
    Raises ``PermissionDenied`` unless ``deleted_by`` is an admin of the window's team.
    """
    owner = window.objective if window.objective is not None else window.pipeline
    assert owner is not None  # the check constraint: exactly one of them is set
    team = owner.team
    admin = _require_admin(deleted_by, team)
    changed = MaintenanceWindow.objects.filter(pk=window.pk, deleted_at__isnull=True).update(
        deleted_at=now, deleted_by=admin
    )
    if changed:
        logger.info(
            "sla.maintenance_deleted",
            extra={"maintenance_window": window.pk, "team": team.pk, "user": admin.pk},
        )
    return bool(changed)

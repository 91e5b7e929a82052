"""Writes for SLA objectives: creating one back-fills its exact counters, deleting drops them."""

from __future__ import annotations

import logging
from decimal import Decimal

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla.counting import ADVISORY_LOCK_KEY
from latencyboard.sla.models import Objective, Window
from latencyboard.teams.models import Role, Team
from latencyboard.teams.queries import has_role

logger = logging.getLogger(__name__)

# The same rule as counting.count_minutes (``duration_ms <= threshold_ms``), over the spans of
# batches the rollup worker has already folded: it counts the others itself, after this
# transaction, because it takes the advisory lock before reading the objectives.
# date_trunc in UTC, not the session time zone, to match count_minutes' Unix minute index.
_BACKFILL_SQL = """
INSERT INTO sla_slaminute (objective_id, minute, good, total)
SELECT %(objective)s,
       date_trunc('minute', start_time, 'UTC'),
       count(*) FILTER (WHERE duration_ns <= %(threshold_ns)s),
       count(*)
FROM spans_span
WHERE pipeline_id = %(pipeline)s
  AND {match}
  AND batch_id IN (SELECT id FROM spans_ingestbatch WHERE rolled_up_at IS NOT NULL)
GROUP BY date_trunc('minute', start_time, 'UTC')
"""
_STAGE_MATCH = "stage_id = %(stage)s"
_ROOT_MATCH = "is_root"


def threshold_ns(threshold_ms: float) -> int:
    """The threshold in whole nanoseconds, for comparing with ``spans_span.duration_ns``.

    For a threshold that is itself a whole number of nanoseconds (the API accepts 6 decimals of
    a millisecond) and below 2**52 ns, ``duration_ns <= threshold_ns(t)`` holds exactly when
    ``duration_ns / 1e6 <= t`` does in float64, the comparison ``count_minutes`` makes.
    """
    return round(threshold_ms * 1_000_000)


def _lock_against_rollups() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])


def _require_admin(user: User | AnonymousUser, team: Team) -> None:
    if not has_role(user, team, Role.ADMIN):
        raise PermissionDenied("Only team admins manage SLA objectives.")


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
    """Create an objective and count every retained span already folded into the rollups.

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
        sql = _BACKFILL_SQL.format(match=_ROOT_MATCH if stage is None else _STAGE_MATCH)
        with connection.cursor() as cursor:
            cursor.execute(
                sql,
                {
                    "objective": objective.pk,
                    "threshold_ns": threshold_ns(threshold_ms),
                    "pipeline": pipeline.pk,
                    "stage": None if stage is None else stage.pk,
                },
            )
            minutes = cursor.rowcount
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

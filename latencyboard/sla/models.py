from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Role, Team
from latencyboard.teams.queries import teams_of

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


class Window(models.TextChoices):
    ROLLING_28D = "rolling_28d", "Rolling 28 days"
    CALENDAR_MONTH = "calendar_month", "Calendar month"


class ObjectiveQuerySet(models.QuerySet["Objective"]):
    def visible_to(self, user: User | AnonymousUser, *roles: Role) -> ObjectiveQuerySet:
        """The objectives of ``user``'s teams, by the rule of ``Pipeline.objects.visible_to``."""
        return self.filter(team__in=teams_of(user, *roles))


class Objective(models.Model):
    """ "``target_percent`` of requests under ``threshold_ms``", for a stage or end to end.

    Attainment is computed from exact per-minute counters (:class:`SlaMinute`), never from
    sketch estimates, so an auditor can re-count it from raw spans.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="objectives")
    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="objectives")
    stage = models.ForeignKey(
        Stage,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="objectives",
        help_text="Empty for end-to-end latency (root spans).",
    )
    name = models.CharField(max_length=200)
    threshold_ms = models.FloatField(validators=[MinValueValidator(0)])
    target_percent = models.DecimalField(
        max_digits=6,
        decimal_places=3,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
    )
    window = models.CharField(max_length=16, choices=Window.choices, default=Window.ROLLING_28D)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ObjectiveQuerySet.as_manager()

    def __str__(self) -> str:
        return self.name


class SlaMinute(models.Model):
    """Exact counts of one minute: ``good`` requests met the threshold out of ``total``."""

    objective = models.ForeignKey(Objective, on_delete=models.CASCADE, related_name="minutes")
    minute = models.DateTimeField()
    good = models.BigIntegerField()
    total = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["objective", "minute"], name="sla_minute_unique"),
            models.CheckConstraint(
                condition=models.Q(good__lte=models.F("total")), name="sla_good_within_total"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.objective} {self.minute}: {self.good}/{self.total}"


MAINTENANCE_REASON_MAX_LENGTH = 500


class Coverage(models.TextChoices):
    """What a maintenance window covers (stored as which of its two keys is set)."""

    OBJECTIVE = "objective", "This objective"
    PIPELINE = "pipeline", "Every objective of the pipeline"


class MaintenanceWindow(models.Model):
    """Planned work whose minutes do not count toward attainment or the error budget.

    It covers one objective, or every objective of one pipeline. A minute counter is left out
    when the minute *starts* inside ``[start, end)``; the counters themselves are never
    touched, so attainment can be recomputed with and without any window.

    Rows are only ever added. Deleting one records who and when in ``deleted_at`` and
    ``deleted_by`` (set once); from then on it excludes nothing, but stays for the audit trail.
    """

    objective = models.ForeignKey(
        Objective,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="maintenance_windows",
    )
    pipeline = models.ForeignKey(
        Pipeline,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="maintenance_windows",
        help_text="Set instead of objective: the window covers every objective of the pipeline.",
    )
    start = models.DateTimeField()
    end = models.DateTimeField()
    reason = models.CharField(max_length=MAINTENANCE_REASON_MAX_LENGTH)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    deleted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(objective__isnull=False, pipeline__isnull=True)
                | models.Q(objective__isnull=True, pipeline__isnull=False),
                name="maintenance_covers_objective_or_pipeline",
            ),
            models.CheckConstraint(
                condition=models.Q(start__lt=models.F("end")), name="maintenance_start_before_end"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reason} ({self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC)"

    @property
    def covers(self) -> Coverage:
        return Coverage.OBJECTIVE if self.objective_id is not None else Coverage.PIPELINE


class ObjectiveVersion(models.Model):
    """What an objective said over ``[effective_from, effective_until)``.

    Rows exist once an objective is edited: the first edit records what it said until then
    (``effective_from`` empty: since its counters began) and what it says from the edit's
    minute on. An objective never edited has no rows; it is one version, the objective itself.
    The counters of a version's minutes were counted with that version's threshold, so a
    report over a period reads each version's own counts.
    """

    objective = models.ForeignKey(Objective, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    threshold_ms = models.FloatField()
    target_percent = models.DecimalField(max_digits=6, decimal_places=3)
    window = models.CharField(max_length=16, choices=Window.choices)
    effective_from = models.DateTimeField(null=True)
    effective_until = models.DateTimeField(null=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["objective", "number"], name="objective_version_number_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.objective} v{self.number}"

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Team


class Window(models.TextChoices):
    ROLLING_28D = "rolling_28d", "Rolling 28 days"
    CALENDAR_MONTH = "calendar_month", "Calendar month"


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

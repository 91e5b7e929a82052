from __future__ import annotations

from django.db import models

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Team


class Resolution(models.TextChoices):
    MINUTE = "minute", "Minute"
    HOUR = "hour", "Hour"
    DAY = "day", "Day"


class Rollup(models.Model):
    """Latency of one pipeline stage over one minute, hour or day.

    ``stage`` is empty for end-to-end latency (the pipeline's root spans). ``sketch`` is a
    ``latencyboard.sketch.Sketch`` in its binary form: any window's percentile is a merge of
    rows. Count, errors and sum are exact.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="rollups")
    stage = models.ForeignKey(
        Stage, null=True, blank=True, on_delete=models.CASCADE, related_name="rollups"
    )
    resolution = models.CharField(max_length=8, choices=Resolution.choices)
    bucket_start = models.DateTimeField()
    count = models.BigIntegerField()
    error_count = models.BigIntegerField()
    sum_ms = models.FloatField()
    min_ms = models.FloatField()
    max_ms = models.FloatField()
    sketch = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline", "stage", "resolution", "bucket_start"],
                name="rollup_identity_unique",
                nulls_distinct=False,
            )
        ]
        indexes = [
            models.Index(
                fields=["pipeline", "resolution", "bucket_start"], name="rollup_pipeline_window"
            )
        ]

    def __str__(self) -> str:
        return f"{self.pipeline} {self.stage or 'end-to-end'} {self.resolution} {self.bucket_start}"

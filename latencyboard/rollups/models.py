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
    ``latencyboard.sketches.sketch.Sketch`` in its binary form: any window's percentile is a
    merge of rows. Count, errors and sum are exact.
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


class StageShare(models.Model):
    """Where one pipeline's requests spent their time in one stage over a minute, hour or day.

    A request is a root span of the pipeline and the spans below it; it belongs to the bucket
    its root started in (see ``latencyboard.rollups.stage_share_minutes`` for self time,
    nested roots and orphans). ``requests``, ``tail_requests``, ``root_ms_sum`` and
    ``tail_root_ms_sum`` describe the pipeline's whole bucket and are repeated on each of its
    stages' rows. ``self_ms_sum`` adds this stage's self time over those requests (a stage
    appearing twice in a request counts twice); the ``tail_`` sums do the same over the
    bucket's slowest 1% of requests by root duration (at least one). Means are sums over
    counts, at any resolution.

    Minute rows are written once the minute is complete plus ``STAGE_SHARE_GRACE_SECONDS``:
    spans stored later are in the ``Rollup`` counts and sketches but not here. Hours and days
    are sums of their minutes, so an hour's tail is the union of its minutes' tails, not the
    slowest 1% of the hour's requests: a bad minute weighs in with its own slowest 1% only.
    That is accepted because it is what makes any window a sum of rows, like every other
    figure here (a true hourly cohort needs every request of the hour at once), and because
    the question asked of the tail, where a slow request's time goes, is answered by the
    typical minute's slowest requests as well as by the hour's.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="stage_shares")
    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="stage_shares")
    resolution = models.CharField(max_length=8, choices=Resolution.choices)
    bucket_start = models.DateTimeField()
    requests = models.BigIntegerField()
    self_ms_sum = models.FloatField()
    tail_requests = models.BigIntegerField()
    tail_self_ms_sum = models.FloatField()
    root_ms_sum = models.FloatField()
    tail_root_ms_sum = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline", "stage", "resolution", "bucket_start"],
                name="stage_share_identity_unique",
            )
        ]
        indexes = [
            models.Index(
                fields=["pipeline", "resolution", "bucket_start"],
                name="stage_share_pipeline_window",
            )
        ]

    def __str__(self) -> str:
        return f"{self.pipeline} {self.stage} {self.resolution} {self.bucket_start}"


class StageShareWatermark(models.Model):
    """The minutes of a pipeline whose stage shares are written: every one before
    ``done_until``. Moved forward in the transaction that writes those minutes."""

    pipeline = models.OneToOneField(
        Pipeline, on_delete=models.CASCADE, related_name="stage_share_watermark"
    )
    done_until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.pipeline} shares until {self.done_until}"

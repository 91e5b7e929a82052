from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Team


class Resolution(models.TextChoices):
    MINUTE = "minute", "Minute"
    HOUR = "hour", "Hour"
    DAY = "day", "Day"


class BucketRow(models.Model):
    """A row describing one bucket (minute, hour or day) of one pipeline."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    resolution = models.CharField(max_length=8, choices=Resolution.choices)
    bucket_start = models.DateTimeField()

    class Meta:
        abstract = True


class LatencyRow(BucketRow):
    """Latency over one bucket: exact count, errors, sum, min and max, and a
    ``latencyboard.sketches.sketch.Sketch`` in its binary form (any window's percentile is a
    merge of rows)."""

    count = models.BigIntegerField()
    error_count = models.BigIntegerField()
    sum_ms = models.FloatField()
    min_ms = models.FloatField()
    max_ms = models.FloatField()
    sketch = models.BinaryField()

    class Meta:
        abstract = True


def _identity(fields: list[str], name: str, *, nulls_distinct: bool | None = None) -> list:
    """The unique constraint of a bucketed table: one row per key, resolution and bucket."""
    return [
        models.UniqueConstraint(
            fields=[*fields, "resolution", "bucket_start"],
            name=name,
            nulls_distinct=nulls_distinct,
        )
    ]


def _window_index(name: str) -> list:
    """Reads scan a pipeline's rows of one resolution over a window."""
    return [models.Index(fields=["pipeline", "resolution", "bucket_start"], name=name)]


class Rollup(LatencyRow):
    """Latency of one pipeline stage over one minute, hour or day.

    ``stage`` is empty for end-to-end latency (the pipeline's root spans).

    ``cohorts`` (minute rows only) maps each cohort attribute that every span of the row
    carries with one value to that value: the row is that cohort's row too, which is not
    stored apart (most minutes of a stage see one ``service.version``, and writing the same
    sketch twice doubled a fold's rows). Cohort reads see both
    (``latencyboard.storage.tables.COHORT_ROWS``).
    """

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="rollups")
    stage = models.ForeignKey(
        Stage, null=True, blank=True, on_delete=models.CASCADE, related_name="rollups"
    )
    cohorts = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = _identity(
            ["pipeline", "stage"], "rollup_identity_unique", nulls_distinct=False
        )
        indexes = _window_index("rollup_pipeline_window")

    def __str__(self) -> str:
        return f"{self.pipeline} {self.stage or 'end-to-end'} {self.resolution} {self.bucket_start}"


class CohortRollup(LatencyRow):
    """Latency of one pipeline stage over one bucket, for the spans whose cohort
    ``attribute`` (``model.version``…) has ``value``.

    ``stage`` is empty for end to end. A span counts in the cohort of each cohort attribute
    it carries itself (a stage whose spans lack the attribute has no rows). Past
    ``COHORT_VALUES_PER_DAY`` values of an attribute in one pipeline and UTC day, further
    values count as :data:`latencyboard.rollups.cohorts.OTHER`.
    """

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="+")
    stage = models.ForeignKey(
        Stage, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    attribute = models.CharField(max_length=255)
    value = models.CharField(max_length=255)

    class Meta:
        # The stage last: a fold probes one (pipeline, attribute, value, bucket) for all its
        # stages, end to end (NULL) included, through the index's prefix.
        constraints = _identity(
            ["pipeline", "attribute", "value", "stage"],
            "cohort_rollup_identity_unique",
            nulls_distinct=False,
        )
        indexes = [
            models.Index(
                fields=["pipeline", "attribute", "resolution", "bucket_start"],
                name="cohort_rollup_window",
            )
        ]

    def __str__(self) -> str:
        return (
            f"{self.pipeline} {self.attribute}={self.value} {self.stage or 'end-to-end'} "
            f"{self.resolution} {self.bucket_start}"
        )


class StageShare(BucketRow):
    """Where one pipeline's requests spent their time in one stage over a minute, hour or day.

    A request is a root span of the pipeline and the spans below it; it belongs to the bucket
    its root started in (see ``latencyboard.rollups.stage_share_minutes`` for self time,
    nested roots and orphans). ``requests`` and ``root_ms_sum`` describe the pipeline's whole
    bucket and are repeated on each of its stages' rows, as are ``root_keys`` (the sketch
    buckets of the requests' root durations, ascending), ``key_requests`` (requests per
    bucket) and ``key_root_ms`` (their root durations summed). ``self_ms_sum`` adds this
    stage's self time over the requests (a stage appearing twice in a request counts twice),
    ``key_self_ms`` the same per root bucket. Means are sums over counts, at any resolution.
    ``critical_ms_sum`` and ``key_critical_ms`` are the stage's time on the requests' critical
    paths (``rollups.critical_path``), in all and per root bucket: over a bucket's stages
    they add up to ``root_ms_sum``, where self times add up to the work done.

    The root buckets are what let any window, summed from rows of any resolution, find its
    own slowest 1% (``rollups.tails``): the requests above the window's p99, not each
    minute's slowest few.

    Minute rows are written once the minute is complete plus ``STAGE_SHARE_GRACE_SECONDS``:
    spans stored later are in the ``Rollup`` counts and sketches but not here. Hours and days
    are sums of their minutes, bucket by bucket.
    """

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="stage_shares")
    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="stage_shares")
    requests = models.BigIntegerField()
    self_ms_sum = models.FloatField()
    root_ms_sum = models.FloatField()
    root_keys = ArrayField(models.IntegerField(), default=list)
    key_requests = ArrayField(models.BigIntegerField(), default=list)
    key_root_ms = ArrayField(models.FloatField(), default=list)
    key_self_ms = ArrayField(models.FloatField(), default=list)
    # Null on rows written before critical paths were (and on hours and days summing any).
    critical_ms_sum = models.FloatField(null=True)
    key_critical_ms = ArrayField(models.FloatField(), null=True)

    class Meta:
        constraints = _identity(["pipeline", "stage"], "stage_share_identity_unique")
        indexes = _window_index("stage_share_pipeline_window")

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

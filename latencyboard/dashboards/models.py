from __future__ import annotations

from django.db import models

from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Team


class VersionSegment(models.Model):
    """A stretch of time in which a pipeline's spans carried one value of a version attribute
    (``service.version``, ``model.version``) with no gap over ``deployments.GAP``.

    Written by the version scan (``dashboards.services.scan_versions``); deployment markers
    are where segments start and end (``dashboards.deployments.markers``).
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    pipeline = models.ForeignKey(
        Pipeline, on_delete=models.CASCADE, related_name="version_segments"
    )
    attribute = models.CharField(max_length=100)
    value = models.CharField(max_length=255)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    spans = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(
                fields=["pipeline", "attribute", "value", "last_seen"],
                name="version_segment_latest",
            )
        ]

    def __str__(self) -> str:
        return f"{self.pipeline} {self.attribute}={self.value} {self.first_seen}..{self.last_seen}"


class VersionWatermark(models.Model):
    """Spans of the pipeline starting before ``scanned_until`` are in its version segments.
    Moved forward in the transaction that writes the segments."""

    pipeline = models.OneToOneField(
        Pipeline, on_delete=models.CASCADE, related_name="version_watermark"
    )
    scanned_until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.pipeline} versions until {self.scanned_until}"

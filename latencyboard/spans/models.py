from __future__ import annotations

from django.db import models

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.storage import tables
from latencyboard.teams.models import Team


class IngestBatch(models.Model):
    """One acknowledged export request; spans point at the batch that first stored them.

    Downstream workers claim batches whose ``rolled_up_at`` is empty, fold their spans and set
    it in the same transaction, so every stored span is counted exactly once.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    received_at = models.DateTimeField()
    protocol = models.CharField(max_length=16)
    stored_spans = models.PositiveIntegerField()
    duplicate_spans = models.PositiveIntegerField(default=0)
    rejected_spans = models.PositiveIntegerField(default=0)
    rolled_up_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["id"], name="batch_pending_rollup", condition=models.Q(rolled_up_at=None)
            )
        ]

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.stored_spans} spans)"


class Span(models.Model):
    """A stored span. The table is partitioned by day of ``start_time`` (migrations 0001, 0004).

    Ids are stored in their natural widths: the 16-byte trace id as ``uuid``, the 8-byte span
    ids as ``bigint`` (two's complement of the big-endian bytes). A span written by ingest has
    a template (its resource, name and repeating attributes, see
    ``latencyboard.storage.span_templates``): its own ``name`` is empty and ``attributes``
    holds only what the template does not; rows without a template hold everything. The
    model reads the view of whole spans (name and attributes merged); rows are written by
    binary COPY into the table (``latencyboard.storage.spans_copy``), never through Django.
    """

    pk = models.CompositePrimaryKey("team_id", "trace_id", "span_id", "start_time")
    team = models.ForeignKey(Team, on_delete=models.DO_NOTHING, related_name="+")
    pipeline = models.ForeignKey(Pipeline, on_delete=models.DO_NOTHING, related_name="+")
    stage = models.ForeignKey(Stage, on_delete=models.DO_NOTHING, related_name="+")
    batch = models.ForeignKey(IngestBatch, on_delete=models.DO_NOTHING, related_name="+")
    trace_id = models.UUIDField()
    span_id = models.BigIntegerField()
    parent_span_id = models.BigIntegerField(null=True)
    name = models.TextField()
    kind = models.SmallIntegerField()
    status_code = models.SmallIntegerField()
    status_message = models.TextField()
    start_time = models.DateTimeField()
    duration_ns = models.BigIntegerField()
    is_root = models.BooleanField()
    attributes = models.JSONField()
    template_id = models.BigIntegerField(null=True)

    class Meta:
        managed = False
        db_table = tables.SPAN_VIEW

    def __str__(self) -> str:
        return f"{self.name} ({self.duration_ns / 1e6:.3f} ms)"

from __future__ import annotations

from django.db import models

from latencyboard.storage import tables


class ThinnedDay(models.Model):
    """A UTC day of raw spans thinned past the hot period, and what it kept.

    Written in the transaction that thins the day; its presence is what makes rebuilds and
    back-fills leave the day alone (its rollups and counters were folded from every span)."""

    day = models.DateField(unique=True)
    thinned_at = models.DateTimeField()
    sample_percent = models.PositiveSmallIntegerField()
    spans_before = models.BigIntegerField()
    spans_after = models.BigIntegerField()
    traces_before = models.BigIntegerField()
    error_traces = models.BigIntegerField()
    slow_traces = models.BigIntegerField()
    sampled_traces = models.BigIntegerField()

    class Meta:
        db_table = tables.THINNED_DAY
        ordering = ["day"]

    def __str__(self) -> str:
        return f"{self.day} thinned to {self.sample_percent}%"

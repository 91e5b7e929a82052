"""Reads of spans through the ORM (the bulk reads are in :mod:`latencyboard.storage`)."""

from __future__ import annotations

import datetime as dt

from latencyboard.spans.models import Span


def root_stages(
    pipeline_id: int, since: dt.datetime | None = None, until: dt.datetime | None = None
) -> tuple[int, ...]:
    """The stage of the pipeline's newest root span (of ``[since, until)`` when given): its
    latency is the end-to-end latency under a stage's name."""
    roots = Span.objects.filter(pipeline=pipeline_id, is_root=True)
    if since is not None:
        roots = roots.filter(start_time__gte=since)
    if until is not None:
        roots = roots.filter(start_time__lt=until)
    return tuple(roots.order_by("-start_time").values_list("stage_id", flat=True)[:1])

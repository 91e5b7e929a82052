"""The alert page's chart: the alerted stage's percentile around the alert, from the same
rollups the pipeline page reads, with the baseline's interval as a band and the firing and
resolve times marked."""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from django.contrib.auth.models import AnonymousUser, User

from latencyboard.alerts.models import Alert
from latencyboard.rollups.queries import percentile_series, present

BEFORE: Final = dt.timedelta(hours=1)
"""Shown before the alert fired: the stage as it was."""
AFTER: Final = dt.timedelta(minutes=30)
"""Shown after it resolved: the stage back to normal (or not)."""
MAX_BUCKETS: Final = 360
"""Points of the line at most: a long alert gets a coarser step."""
STEPS: Final = tuple(dt.timedelta(minutes=m) for m in (1, 5, 15, 60, 360, 1440))
"""Steps the rollup grid accepts, finest first."""


def alert_chart(alert: Alert, user: User | AnonymousUser, now: dt.datetime) -> dict[str, Any]:
    """The series, the band and the marks, as the page's script draws them."""
    found = alert.evidence.get("regression") or {}
    quantile = found.get("quantile", "p99")
    start = alert.started_at - BEFORE
    end = min(now, (alert.resolved_at or now) + AFTER)
    step = next((s for s in STEPS if (end - start) / s <= MAX_BUCKETS), STEPS[-1])
    series = percentile_series(
        user,
        alert.pipeline_id,
        [alert.stage_id],
        start,
        end,
        step,
        [float(quantile[1:]) / 100.0],
    )
    step = dt.timedelta(seconds=series.step_seconds)
    return {
        "quantile": quantile,
        "stage": alert.stage_name,
        "step_minutes": series.step_seconds // 60,
        "x": [(series.start + i * step).isoformat() for i in range(series.bucket_count)],
        "y": present(series.points.quantiles_ms[0, :, 0]),
        "baseline": found.get("baseline"),
        "fired_at": alert.started_at.isoformat(),
        "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
    }

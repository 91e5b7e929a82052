"""Where an alert points a person: its page, the pipeline around it, exemplar traces of its
window. The alert page and every receiver's payload use the same links."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse

from latencyboard.alerts.models import Alert


def absolute(path: str) -> str:
    """A path of this site as receivers open it (``PUBLIC_URL``)."""
    return settings.PUBLIC_URL.rstrip("/") + path


def alert_links(alert: Alert) -> dict[str, str]:
    """The pipeline page at the alert's percentile over the last hour, and exemplar traces of
    the window it fired on (paths of this site)."""
    found = alert.evidence.get("regression") or {}
    pipeline = reverse("pipeline", kwargs={"pipeline_id": alert.pipeline_id})
    query = {"window": "1h", "percentile": found.get("quantile", "p99")}
    links = {"pipeline": f"{pipeline}?{urlencode(query)}"}
    if found.get("window_start"):
        minutes = alert.rule.window_minutes
        traces = {
            "pipeline": alert.pipeline_id,
            "stage": alert.stage_id or "e2e",
            "minute": found["window_start"],
            "step": f"{minutes}m",
            "near": found.get("quantile", "p99"),
        }
        links["traces"] = f"{reverse('traces')}?{urlencode(traces)}"
    return links

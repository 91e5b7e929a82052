"""Telling the live pages about newly folded minutes, after the fold has committed."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any, Final

from django.conf import settings

from latencyboard.live.coalescing import Touched
from latencyboard.live.events import POINTS
from latencyboard.live.groups import pipeline_group, team_group
from latencyboard.live.services import publish
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.queries import live_minutes
from latencyboard.rollups.serializers import percentile_series_data

logger = logging.getLogger(__name__)

# A late batch may touch minutes long past; a live chart shows recent ones, and an event
# stays small: at most this many minutes, the newest.
MAX_MINUTES: Final = 60


def points_event(touched: Touched) -> dict[str, Any]:
    """The ``points`` event of a pipeline's touched minutes: every stage's per-minute figures
    in the shape of the percentiles API (``series[].points``), without the window summary."""
    first = max(touched.first, touched.last - (MAX_MINUTES - 1) * 60)
    start = dt.datetime.fromtimestamp(first, dt.UTC)
    end = dt.datetime.fromtimestamp(touched.last + 60, dt.UTC)
    data = percentile_series_data(live_minutes(touched.pipeline_id, start, end))
    for series in data["series"]:
        del series["summary"]
    return {"type": POINTS, **data}


def publish_touched(touched: Sequence[Touched]) -> None:
    """One ``points`` event per pipeline to its pages, and one ``rollup`` event per team to
    its overview naming the pipelines with new figures. Call after the fold's commit.
    Nothing when ``LIVE_UPDATES`` is off."""
    if not settings.LIVE_UPDATES:
        return
    pipelines_of: dict[int, list[int]] = {}
    for item in touched:
        try:
            event = points_event(item)
        except Pipeline.DoesNotExist:  # deleted since its spans were folded
            continue
        publish(pipeline_group(item.pipeline_id), event)
        pipelines_of.setdefault(item.team_id, []).append(item.pipeline_id)
    for team_id, pipelines in pipelines_of.items():
        publish(team_group(team_id), {"type": "rollup", "pipelines": sorted(pipelines)})

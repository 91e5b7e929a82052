"""Soft and hard time limits of every Celery task, per task family (pure: settings reads it).

Past its soft limit a task gets ``SoftTimeLimitExceeded`` where it runs (its transaction rolls
back, the next beat starts it again); past its hard limit the worker kills its process. So no
task, whatever the data or a receiver does, holds a worker process for longer than its hard
limit. Each limit sits well above what the task does on a busy host (the fold and the stage
shares stop themselves after a few seconds; see their tasks) and below its beat interval where
the schedule needs that.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TimeLimit:
    soft: int  # seconds
    hard: int

    def __post_init__(self) -> None:
        if not 0 < self.soft < self.hard:
            raise ValueError(f"need 0 < soft < hard, got {self.soft}:{self.hard}")


# Tasks no family names (a new task gets these until it is given its own).
DEFAULT_LIMIT = TimeLimit(600, 720)
TIME_LIMITS: dict[str, TimeLimit] = {
    "rollups.fold": TimeLimit(120, 180),
    "rollups.stage_shares": TimeLimit(120, 180),
    "rollups.compact": TimeLimit(600, 720),
    "alerts.evaluate": TimeLimit(300, 360),
    "alerts.compute_baselines": TimeLimit(1800, 2100),
    # Each delivery has its own deadline and the task stops starting new ones after a while.
    "alerts.send_deliveries": TimeLimit(150, 180),
    "spans.ensure_partitions": TimeLimit(300, 360),
    "spans.drop_expired_partitions": TimeLimit(300, 360),
    "retention.thin_spans": TimeLimit(3000, 3300),
    "audits.build_report": TimeLimit(1800, 2100),
}


def parse_time_limits(text: str) -> dict[str, TimeLimit]:
    """``"task=soft:hard,…"`` (e.g. ``audits.build_report=3600:3900``) as limits per task."""
    limits: dict[str, TimeLimit] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        soft, _, hard = value.partition(":")
        if not name.strip() or not soft.strip().isdigit() or not hard.strip().isdigit():
            raise ValueError(f"{item!r} is not task=soft:hard (whole seconds)")
        limits[name.strip()] = TimeLimit(int(soft), int(hard))
    return limits


def task_annotations(limits: dict[str, TimeLimit]) -> dict[str, dict[str, int]]:
    """Celery's ``task_annotations``: each named task's limits."""
    return {
        name: {"soft_time_limit": limit.soft, "time_limit": limit.hard}
        for name, limit in limits.items()
    }

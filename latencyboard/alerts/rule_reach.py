"""What a rule can find at its pipeline's traffic now: each watched stage's detectable shift
(:mod:`latencyboard.detectors.reach`) at the last hour's requests, for the rule page and API."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final

from latencyboard.alerts.baselines import detector_baselines
from latencyboard.alerts.evaluation import detector_of, newest_root_stages, watched
from latencyboard.alerts.models import Rule
from latencyboard.detectors.reach import Reach, family_size, reach
from latencyboard.rollups.sketch_windows import stage_sketches
from latencyboard.windows import floor_minute

TRAFFIC_WINDOW: Final = dt.timedelta(hours=1)
"""The traffic a rule's reach is worked out at: the last hour's requests."""
MAX_STAGES: Final = 30
"""Stages whose reach is worked out at most (each takes a few hundredths of a second)."""


@dataclass(frozen=True)
class StageReach:
    """One watched stage: ``reach`` is ``None`` while its baseline is not ready."""

    stage: str
    reach: Reach | None


def rule_reach(rule: Rule, now: dt.datetime) -> list[StageReach]:
    """Each stage the rule watches (the first ``MAX_STAGES`` by name), with its reach at the
    requests of the hour before ``now``."""
    names = watched(rule, newest_root_stages(rule.pipeline_id, now))
    chosen = sorted(names.items(), key=lambda item: item[1])[:MAX_STAGES]
    end = floor_minute(now)
    counts = {
        stage_id: sketch.count
        for stage_id, sketch in stage_sketches(rule.pipeline, end - TRAFFIC_WINDOW, end).items()
    }
    detector = detector_of(rule)
    minutes = TRAFFIC_WINDOW.total_seconds() / 60.0
    ready = {
        stage_id: baseline
        for stage_id, baseline in detector_baselines(rule.pipeline).items()
        if stage_id in names and baseline.count >= detector.min_baseline_count
    }
    per_minute = {stage_id: counts.get(stage_id, 0) / minutes for stage_id, _ in chosen}
    family = family_size(
        [round(per_minute.get(s, 0.0) * rule.window_minutes) for s in ready], detector
    )
    return [
        StageReach(
            name,
            None
            if stage_id not in ready
            else reach(
                ready[stage_id], per_minute[stage_id], rule.window_minutes, detector, family
            ),
        )
        for stage_id, name in chosen
    ]

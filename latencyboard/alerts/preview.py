"""The rule preview: would this rule have fired in the last days? Its regression detector
replayed (``latencyboard.alerts.replay``) over the pipeline's minute rollups, against the
baselines the evaluator uses now."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Final

from django.conf import settings
from django.db.models import Q

from latencyboard.alerts.baselines import detector_baselines
from latencyboard.alerts.evaluation import detector_of, newest_root_stages, watched
from latencyboard.alerts.models import Rule
from latencyboard.alerts.replay import MINUTE, Replay, replay
from latencyboard.pipelines.models import Stage
from latencyboard.rollups.models import Rollup
from latencyboard.sketches.sketch import Sketch
from latencyboard.sla import attainment

PREVIEW_DAYS: Final = 7
"""How far back a preview looks (as far as minute rollups are kept, at most)."""


def unsaved_rule(fields: Mapping[str, Any]) -> tuple[Rule, list[Stage]]:
    """A rule of the form's or the API's validated ``fields``, not saved, and its stages."""
    plain = {name: value for name, value in fields.items() if name not in ("stages", "channels")}
    return Rule(**plain), list(fields.get("stages", []))


def preview_rule(rule: Rule, chosen: list[Stage], now: dt.datetime) -> Replay:
    """The alerts ``rule`` (saved or not; ``chosen`` its stages) would have raised over the
    last ``PREVIEW_DAYS`` days of minute rollups, had it been evaluated every minute with
    today's baselines. Regression only: burn-rate alerts are not replayed."""
    names = watched(rule, newest_root_stages(rule.pipeline_id, now), chosen)
    end = attainment.floor_minute(now)
    start = end - dt.timedelta(days=PREVIEW_DAYS)
    minutes: dict[str, dict[int, Sketch]] = defaultdict(dict)
    stages = Q(stage__in=[pk for pk in names if pk is not None])
    if None in names:
        stages |= Q(stage__isnull=True)
    rows = Rollup.objects.filter(
        stages,
        pipeline=rule.pipeline_id,
        resolution="minute",
        bucket_start__gte=start,
        bucket_start__lt=end,
    ).values_list("stage_id", "bucket_start", "sketch")
    for stage_id, minute, blob in rows.iterator():
        minutes[names[stage_id]][int((minute - start) / MINUTE)] = Sketch.from_bytes(bytes(blob))
    baselines = {names[pk]: b for pk, b in detector_baselines(rule.pipeline).items() if pk in names}
    count = int((end - start) / MINUTE)
    return replay(
        baselines,
        minutes,
        start,
        count,
        rule.window_minutes,
        detector_of(rule),
        settings.ALERT_CLEAN_EVALUATIONS,
    )

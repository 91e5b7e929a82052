"""The rule preview: would this rule have fired in the last days? Its regression detector
replayed (``latencyboard.detectors.replay``) over the pipeline's minute rollups, each hour
against the baselines the baseline job builds today for that hour of the day: the same
hours of the previous days (:mod:`latencyboard.detectors.seasonal`) where they are ready, else
the baseline the evaluator uses now. It runs in a web request, so it is bounded: at most
``PREVIEW_MAX_STAGES`` stages, and ``PREVIEW_SECONDS`` of replaying."""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Final

from django.conf import settings
from django.db.models import Q

from latencyboard.alerts.baselines import detector_baselines, same_hours_sketches
from latencyboard.alerts.evaluation import detector_of, newest_root_stages, watched
from latencyboard.alerts.models import Rule
from latencyboard.detectors import seasonal
from latencyboard.detectors.regression import Baseline
from latencyboard.detectors.replay import OutOfTime, Replay, replay
from latencyboard.pipelines.models import Stage
from latencyboard.rollups.models import Rollup
from latencyboard.windows import HOUR, MINUTE, floor_minute, floor_to

PREVIEW_DAYS: Final = 7
"""How far back a preview looks (as far as minute rollups are kept, at most)."""
PREVIEW_MAX_STAGES: Final = 30
"""Stages a preview replays at most (a week of minutes is ~10 k sketches each)."""
PREVIEW_SECONDS: Final = 10.0
"""How long a preview may replay before it gives up."""


class TooManyStages(ValueError):
    """The rule watches more stages than a preview replays."""


def unsaved_rule(fields: Mapping[str, Any]) -> tuple[Rule, list[Stage]]:
    """A rule of the form's or the API's validated ``fields``, not saved, and its stages."""
    plain = {name: value for name, value in fields.items() if name not in ("stages", "channels")}
    return Rule(**plain), list(fields.get("stages", []))


def preview_rule(
    rule: Rule, chosen: list[Stage], now: dt.datetime, seconds: float = PREVIEW_SECONDS
) -> Replay:
    """The alerts ``rule`` (saved or not; ``chosen`` its stages) would have raised over the
    last ``PREVIEW_DAYS`` days of minute rollups, had it been evaluated every minute with
    each hour's baselines (see the module docstring). Regression only: burn-rate alerts are
    not replayed. Raises :class:`TooManyStages`, or
    :class:`~latencyboard.detectors.replay.OutOfTime` after ``seconds``."""
    deadline = time.monotonic() + seconds
    names = watched(rule, newest_root_stages(rule.pipeline_id, now), chosen)
    if len(names) > PREVIEW_MAX_STAGES:
        raise TooManyStages(
            f"The rule watches {len(names)} stages; a preview replays at most "
            f"{PREVIEW_MAX_STAGES}. Choose its stages."
        )
    end = floor_minute(now)
    start = end - dt.timedelta(days=PREVIEW_DAYS)
    minutes: dict[str, dict[int, bytes]] = defaultdict(dict)
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
        minutes[names[stage_id]][int((minute - start) / MINUTE)] = bytes(blob)
    baselines = {names[pk]: b for pk, b in detector_baselines(rule.pipeline).items() if pk in names}
    count = int((end - start) / MINUTE)
    schedule = _hourly(rule, names, baselines, start, end, deadline)
    return replay(
        schedule,
        minutes,
        start,
        count,
        rule.window_minutes,
        detector_of(rule),
        settings.ALERT_CLEAN_EVALUATIONS,
        deadline,
    )


def _hourly(
    rule: Rule,
    names: Mapping[int | None, str],
    today: Mapping[str, Baseline],
    start: dt.datetime,
    end: dt.datetime,
    deadline: float,
) -> list[tuple[int, dict[str, Baseline]]]:
    """The replay's schedule: from each hour's first evaluation, each stage's baseline for
    that hour of the day as the job builds it today (the same hours of the previous days,
    where ready), else ``today``'s stored one. One baseline per hour of the day, shared by
    the replayed days: 24 to work out per stage, not one per replayed hour."""
    first = floor_to(start + rule.window_minutes * MINUTE, HOUR)
    hours = [first + i * HOUR for i in range(int((end - first) / HOUR) + 1)]
    # The job's last run at each hour of the day, within the day before ``end``.
    latest = {hour.hour: hour for hour in hours[-24:]}
    earliest = seasonal.hour_offsets(settings.ALERT_BASELINE_DAYS)[-1].start * HOUR
    of_day = {}
    for (hour_of_day, hour), same_hours in zip(
        latest.items(), same_hours_sketches(rule.pipeline, list(latest.values())), strict=True
    ):
        if time.monotonic() > deadline:
            raise OutOfTime
        baselines = dict(today)
        for stage_id, sketch in same_hours.items():
            if stage_id in names:
                baselines[names[stage_id]] = Baseline(sketch, hour + earliest, hour, True)
        of_day[hour_of_day] = baselines
    return [(max(int((hour - start) / MINUTE), 0), of_day[hour.hour]) for hour in hours]

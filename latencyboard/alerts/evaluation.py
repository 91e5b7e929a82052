"""The minute evaluation: each enabled rule's detectors over its stages, then each
(rule, stage)'s alert stepped through its lifecycle."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction

from latencyboard.alerts.baselines import detector_baselines
from latencyboard.alerts.cohort_mix import assess_mix
from latencyboard.alerts.models import Rule
from latencyboard.alerts.services import advance
from latencyboard.detectors import burn_rate, evidence, lifecycle, regression
from latencyboard.pipelines.models import Stage
from latencyboard.rollups.queries import END_TO_END
from latencyboard.rollups.sketch_windows import stage_sketches
from latencyboard.sla import queries as sla_queries
from latencyboard.sla.models import Objective
from latencyboard.spans.queries import root_stages
from latencyboard.windows import MINUTE, floor_minute

logger = logging.getLogger(__name__)

ROOT_LOOKBACK = dt.timedelta(hours=1)
"""How far back the stage of the pipeline's root spans is looked for."""
BURN_MINUTES = max(condition.long_minutes for condition in burn_rate.SRE_WORKBOOK)


@dataclass
class Finding:
    """What the detectors found for one (rule, stage) this evaluation."""

    outcomes: list[lifecycle.Outcome] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    current: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> lifecycle.Outcome:
        """Firing when any detector fires, clean when one ran clean, else no data."""
        for outcome in (lifecycle.Outcome.FIRING, lifecycle.Outcome.CLEAN):
            if outcome in self.outcomes:
                return outcome
        return lifecycle.Outcome.NO_DATA


def watched(
    rule: Rule, root_stage_ids: Collection[int] = (), chosen: list[Stage] | None = None
) -> dict[int | None, str]:
    """The rule's stages (``chosen``, when given, stands for its own: a rule not saved yet)
    by id (``None``: end to end) with their names. The stages of the pipeline's root spans
    are end to end under another name: they are watched as end to end, never apart from
    it."""
    chosen = list(rule.stages.all()) if chosen is None else chosen
    stages = chosen if chosen else list(Stage.objects.filter(pipeline=rule.pipeline_id))
    names: dict[int | None, str] = {
        stage.pk: stage.name for stage in stages if stage.pk not in root_stage_ids
    }
    if rule.end_to_end or not chosen or len(names) < len(stages):
        names[None] = END_TO_END
    return names


def newest_root_stages(pipeline_id: int, now: dt.datetime) -> tuple[int, ...]:
    """The stage of the pipeline's root spans in the last ``ROOT_LOOKBACK``."""
    end = floor_minute(now)
    return root_stages(pipeline_id, end - ROOT_LOOKBACK, end)


def detector_of(rule: Rule) -> regression.RegressionRule:
    """The regression detector's settings of ``rule``."""
    return regression.RegressionRule(
        significance=rule.significance,
        confidence=settings.ALERT_EVIDENCE_CONFIDENCE_PERCENT / 100,
        min_relative_effect=rule.min_effect_percent / 100.0,
        min_absolute_effect_ms=rule.min_effect_ms,
        min_baseline_count=settings.ALERT_BASELINE_MIN_COUNT,
    )


def evaluate_rules(now: dt.datetime) -> int:
    """Evaluate every enabled rule at ``now``; returns how many alerts changed status. A rule
    whose evaluation fails is logged and skipped: the other teams' rules are still evaluated."""
    changed = 0
    for rule_id in Rule.objects.filter(enabled=True).order_by("pk").values_list("pk", flat=True):
        try:
            changed += evaluate_rule(rule_id, now)
        except Exception:
            logger.exception("alerts.rule_failed", extra={"rule": rule_id})
    return changed


def evaluate_rule(rule_id: int, now: dt.datetime) -> int:
    """One evaluation of a rule, under its row lock (a concurrent evaluator skips it)."""
    with transaction.atomic():
        rule = (
            Rule.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("pipeline")
            .filter(pk=rule_id, enabled=True)
            .first()
        )
        if rule is None:
            return 0
        names = watched(rule, newest_root_stages(rule.pipeline_id, now))
        findings = {stage_id: Finding() for stage_id in names}
        if rule.regression:
            _regression(rule, names, findings, now)
        if rule.burn_rate:
            _burn_rate(rule, names, findings, now)
        changed = 0
        for stage_id, finding in findings.items():
            transition = advance(
                rule,
                stage_id,
                finding.outcome,
                finding.evidence,
                finding.summary,
                now,
                settings.ALERT_CLEAN_EVALUATIONS,
                finding.current,
            )
            changed += transition is not None
    return changed


def _regression(
    rule: Rule, names: dict[int | None, str], findings: dict[int | None, Finding], now: dt.datetime
) -> None:
    end = floor_minute(now)
    start = end - rule.window_minutes * MINUTE
    windows = stage_sketches(rule.pipeline, start, end)
    baselines = detector_baselines(rule.pipeline)
    by_name = {name: stage_id for stage_id, name in names.items()}
    detector = detector_of(rule)
    result = regression.evaluate(
        {names[s]: b for s, b in baselines.items() if s in names},
        {names[s]: w for s, w in windows.items() if s in names},
        detector,
    )
    for stage in result.stages:
        stage_id = by_name[stage.stage]
        finding = findings[stage_id]
        if not stage.tests:
            continue
        changes = evidence.change_intervals(stage, baselines[stage_id], windows[stage_id], detector)
        finding.current = evidence.current_evidence(stage, changes)
        if stage.status is regression.Status.REGRESSION:
            finding.outcomes.append(lifecycle.Outcome.FIRING)
            found = evidence.regression_evidence(stage, result, changes)
            found["window_start"] = start.isoformat()
            found["window_end"] = end.isoformat()
            found["baseline_seasonal"] = baselines[stage_id].seasonal
            assert stage.strongest is not None, "a regressed stage has a fired test"
            split = assess_mix(
                rule.pipeline,
                stage_id,
                baselines[stage_id],
                start,
                end,
                stage.strongest.q,
                detector,
            )
            if split is not None:
                found["mix"] = evidence.mix_evidence(*split)
                # An open alert keeps the latest split: a rollout's share moves on after firing.
                finding.current["mix"] = found["mix"]
            finding.evidence["regression"] = found
            finding.summary = evidence.regression_summary(str(rule.pipeline), stage.stage, found)
        elif stage.status is regression.Status.OK:
            finding.outcomes.append(lifecycle.Outcome.CLEAN)


def _burn_rate(
    rule: Rule, names: dict[int | None, str], findings: dict[int | None, Finding], now: dt.datetime
) -> None:
    end = floor_minute(now)
    start = end - BURN_MINUTES * MINUTE
    objectives = Objective.objects.filter(pipeline=rule.pipeline_id).order_by("pk")
    for objective in objectives:
        if objective.stage_id not in names:
            continue
        good, total = sla_queries.counted(objective, start, end).per_minute().kept()
        result = burn_rate.evaluate(
            good, total, start, now, objective.target_percent / Decimal(100)
        )
        finding = findings[objective.stage_id]
        if result.severity is not None:
            finding.outcomes.append(lifecycle.Outcome.FIRING)
            found = evidence.burn_evidence(objective.name, result)
            finding.evidence.setdefault("burn_rate", found)
            if not finding.summary:
                name = names[objective.stage_id]
                finding.summary = evidence.burn_summary(str(rule.pipeline), name, found)
        elif any(result.long.total for result in result.conditions):
            finding.outcomes.append(lifecycle.Outcome.CLEAN)

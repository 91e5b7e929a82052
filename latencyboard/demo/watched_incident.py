"""The demo incident service: slow a stage of the running demo, with a rule watching it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from latencyboard.alerts.baselines import compute_pipeline_baselines
from latencyboard.alerts.models import Baseline, Rule
from latencyboard.audit_trail import Subject, act
from latencyboard.demo import incident as demo_incident
from latencyboard.demo.profiles import PIPELINES
from latencyboard.pipelines.models import Pipeline

# The demo's stages take a few ms (model_forward's p90 is about 9 ms), so the default floor
# of +5 ms would hide a +50% slowdown; the relative floor (+20%) still applies.
DEMO_MIN_EFFECT_MS = 1.0


@dataclass(frozen=True)
class StartedIncident:
    until: dt.datetime
    rule: Rule
    baseline_n: int


def start_incident(
    var_dir: str | Path,
    team_slug: str,
    pipeline_name: str,
    stage: str,
    factor: float,
    duration: dt.timedelta,
    now: dt.datetime,
) -> StartedIncident:
    """Write the incident the demo reads, make sure a rule watches the pipeline (a default
    regression rule when it has none) and compute its baselines now rather than at the next
    hourly run. Raises ValueError for an unknown pipeline or stage, or a bad factor."""
    profile = next((p for p in PIPELINES if p.name == pipeline_name), None)
    if profile is None:
        names = ", ".join(p.name for p in PIPELINES)
        raise ValueError(f"No demo pipeline {pipeline_name!r}; the demo runs {names}.")
    if stage not in {s.name for s in profile.stages}:
        names = ", ".join(s.name for s in profile.stages)
        raise ValueError(f"{pipeline_name} has no stage {stage!r}; its stages are {names}.")
    if not 0 < factor <= 100 or duration <= dt.timedelta(0):
        raise ValueError("The factor must lie in (0, 100] and the duration be positive.")
    pipeline = Pipeline.objects.filter(team__slug=team_slug, service_name=pipeline_name).first()
    if pipeline is None:
        raise ValueError(f"Team {team_slug!r} has no pipeline {pipeline_name!r}: is `make run` up?")
    rule = pipeline.alert_rules.filter(enabled=True, regression=True).first()
    if rule is None:
        rule = Rule.objects.create(
            pipeline=pipeline,
            name=f"{pipeline_name} tail regression",
            min_effect_ms=DEMO_MIN_EFFECT_MS,
        )
        act(
            None,
            "alert_rule.created",
            Subject("alert_rule", rule.pk, rule.name, pipeline.team_id),
            {"name": rule.name, "regression": True, "min_effect_ms": DEMO_MIN_EFFECT_MS},
            command="demo_incident",
        )
    compute_pipeline_baselines(pipeline, now)
    until = now + duration
    demo_incident.write(
        demo_incident.incident_path(var_dir),
        demo_incident.Incident(pipeline_name, stage, factor, until.timestamp()),
    )
    baseline = Baseline.objects.filter(pipeline=pipeline, stage__name=stage).first()
    return StartedIncident(until, rule, baseline.n if baseline else 0)

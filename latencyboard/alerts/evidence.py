"""The detectors' conclusions as JSON evidence and one-line summaries (pure: no Django)."""

from __future__ import annotations

import math
from typing import Any

from latencyboard.alerts.burn_rate import BurnEvaluation
from latencyboard.alerts.mix import Label, MixDecomposition
from latencyboard.alerts.regression import Evaluation, StageResult
from latencyboard.stats.interval import Interval


def _finite(value: float) -> float | None:
    """JSON (and PostgreSQL's jsonb) has no infinity: an unbounded side is null."""
    return value if math.isfinite(value) else None


def _interval(interval: Interval) -> dict[str, float | None]:
    return {
        "estimate": _finite(interval.estimate),
        "low": _finite(interval.low),
        "high": _finite(interval.high),
    }


def quantile_name(q: float) -> str:
    return f"p{q * 100:g}"


def regression_evidence(stage: StageResult, evaluation: Evaluation) -> dict[str, Any]:
    """The figures of a firing stage's strongest test (the largest effect in ms)."""
    test = stage.strongest
    assert test is not None, "only firing stages have evidence"
    return {
        "detector": "regression",
        "test": str(test.method),
        "quantile": quantile_name(test.q),
        "baseline": _interval(test.baseline),
        "current": _interval(test.current),
        "baseline_n": stage.baseline_count,
        "n": test.n,
        "k": test.k,
        "threshold_ms": test.threshold_ms,
        "p_value": test.p_value,
        "effect_ms": test.effect_ms,
        "effect_percent": 100.0 * test.effect_relative,
        "grew_most": evaluation.grew_most,
        "mix": None,
    }


def current_evidence(stage: StageResult) -> dict[str, Any]:
    """A tested stage's figures at every quantile this evaluation, firing or not: what an
    open alert shows as "now" beside its figures at firing."""
    return {
        "n": stage.n,
        "quantiles": {
            quantile_name(test.q): {
                "baseline": _interval(test.baseline),
                "current": _interval(test.current),
                "k": test.k,
                "p_value": test.p_value,
                "effect_ms": test.effect_ms,
                "effect_percent": 100.0 * test.effect_relative,
                "fired": test.fired,
            }
            for test in stage.tests
        },
    }


def mix_evidence(attribute: str, split: MixDecomposition) -> dict[str, Any]:
    """The split of the change by ``attribute``'s cohorts, each cohort's share and quantile
    in the baseline and in the window."""
    return {
        "attribute": attribute,
        "label": str(split.label),
        "cohort": split.cohort,
        "message": split.message,
        "quantile": quantile_name(split.q),
        "threshold_ms": split.threshold_ms,
        "n": split.n,
        "k": split.k,
        "expected": split.expected,
        "expected_with_mix": split.expected_with_mix,
        "within_excess": split.within_excess,
        "mix_excess": split.mix_excess,
        "p_value": split.p_value,
        "mix_p_value": split.mix_p_value,
        "within_p_value": split.within_p_value,
        "cohorts": [
            {
                "cohort": c.cohort,
                "baseline_share": c.baseline_share,
                "current_share": c.current_share,
                "baseline_ms": None if c.baseline_ms is None else _finite(c.baseline_ms),
                "current_ms": _finite(c.current_ms),
                "n": c.n,
                "k": c.k,
                "regressed": c.regressed,
            }
            for c in split.cohorts
        ],
    }


NAMED = (Label.MIX_SHIFT, Label.MIX_SHIFT_AND_REGRESSION, Label.REGRESSION)


def regression_summary(pipeline: str, stage: str, evidence: dict[str, Any]) -> str:
    """The cohort split's words when it names a cohort (a mix shift, or the cohort that
    regressed), else the stage's figures."""
    mix = evidence["mix"]
    if mix and mix["cohort"] is not None and mix["label"] in NAMED:
        return f"{pipeline} · {stage}: {mix['message']}"
    return (
        f"{pipeline} · {stage}: {evidence['quantile']} "
        f"{evidence['baseline']['estimate']:.1f} → {evidence['current']['estimate']:.1f} ms "
        f"(+{evidence['effect_percent']:.0f}%)"
    )


def burn_evidence(objective: str, evaluation: BurnEvaluation) -> dict[str, Any]:
    """The firing burn-rate conditions of one objective, burn rates as plain numbers."""
    return {
        "detector": "burn_rate",
        "objective": objective,
        "target": float(evaluation.target),
        "severity": str(evaluation.severity) if evaluation.severity else None,
        "conditions": [
            {
                "severity": str(result.condition.severity),
                "factor": float(result.condition.factor),
                "long_minutes": result.long.minutes,
                "short_minutes": result.short.minutes,
                "long_burn_rate": float(result.long.burn_rate),
                "short_burn_rate": float(result.short.burn_rate),
                "long_bad": result.long.total - result.long.good,
                "long_total": result.long.total,
                "firing": result.firing,
            }
            for result in evaluation.conditions
        ],
    }


def burn_summary(pipeline: str, stage: str, evidence: dict[str, Any]) -> str:
    firing = [c for c in evidence["conditions"] if c["firing"]]
    worst = max(firing, key=lambda c: c["factor"])
    return (
        f"{pipeline} · {stage}: “{evidence['objective']}” burning its error budget at "
        f"{worst['long_burn_rate']:.1f}x over {worst['long_minutes'] // 60 or 1} h"
    )

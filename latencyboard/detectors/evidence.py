"""The detectors' conclusions as JSON evidence and one-line summaries (pure: no Django)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from latencyboard.detectors.burn_rate import BurnEvaluation
from latencyboard.detectors.mix import Label, MixDecomposition
from latencyboard.detectors.regression import (
    MEDIAN,
    Baseline,
    Evaluation,
    QuantileTest,
    RegressionRule,
    StageResult,
)
from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.difference import quantile_change_intervals
from latencyboard.stats.interval import Interval
from latencyboard.stats.labels import quantile_label


def _finite(value: float) -> float | None:
    """JSON (and PostgreSQL's jsonb) has no infinity: an unbounded side is null."""
    return value if math.isfinite(value) else None


def _interval(interval: Interval) -> dict[str, float | None]:
    return {
        "estimate": _finite(interval.estimate),
        "low": _finite(interval.low),
        "high": _finite(interval.high),
    }


def level_words(confidence: float) -> str:
    """An interval's ``confidence`` in percent, to the digits it has: 0.95 is "95%", 0.99999
    "99.999%" (never rounded up to 100%)."""
    miss = Decimal(f"{(1.0 - confidence) * 100:.3g}")
    return f"{Decimal(100) - miss:f}%"


@dataclass(frozen=True)
class Changes:
    """Bounds for the change, window minus baseline, of each tested quantile (ms, by
    quantile), simultaneous at ``confidence`` (``RegressionRule.confidence``) over
    the quantiles ``over``."""

    confidence: float
    over: tuple[float, ...]
    bounds: Mapping[float, tuple[float, float]]


def quoted_quantiles(rule: RegressionRule) -> tuple[float, ...]:
    """The quantiles an alert of ``rule`` quotes: the rule's and its rank test's median."""
    return tuple(sorted({MEDIAN, *rule.quantiles}))


def change_intervals(
    stage: StageResult, baseline: Baseline, window: Sketch, rule: RegressionRule
) -> Changes:
    """The interval of each of ``stage``'s tested quantiles' change from ``baseline`` to
    ``window``, at ``rule``'s confidence, Bonferroni over :func:`quoted_quantiles`: compare's
    rule (:func:`~latencyboard.stats.difference.quantile_change_intervals`, the error split
    over the quantiles as compare splits it over its own), so compare of the same two
    sketches over the same quantiles at the same confidence quotes the same interval.

    Worked out for evidence only: the detector's decision does not use it."""
    over = quoted_quantiles(rule)
    qs = sorted({test.q for test in stage.tests})
    error = (1.0 - rule.confidence) / len(over)
    bounds = quantile_change_intervals(baseline.sketch, window, qs, error) if qs else []
    return Changes(rule.confidence, over, dict(zip(qs, bounds, strict=True)))


def _change(test: QuantileTest, changes: Changes) -> dict[str, Any]:
    """``test``'s change with its interval, in ms and in percent of the baseline."""
    low, high = changes.bounds[test.q]
    base = test.baseline.estimate

    def percent(value: float) -> float | None:
        return _finite(100.0 * value / base) if base > 0 else None

    return {
        "low_ms": _finite(low),
        "high_ms": _finite(high),
        "low_percent": percent(low),
        "high_percent": percent(high),
        "confidence": changes.confidence,
        "over": [quantile_label(q) for q in changes.over],
    }


def regression_evidence(
    stage: StageResult, evaluation: Evaluation, changes: Changes
) -> dict[str, Any]:
    """The figures of a firing stage's strongest test (the largest effect in ms)."""
    test = stage.strongest
    assert test is not None, "only firing stages have evidence"
    return {
        "detector": "regression",
        "test": str(test.method),
        "quantile": quantile_label(test.q),
        "baseline": _interval(test.baseline),
        "current": _interval(test.current),
        "baseline_n": stage.baseline_count,
        "n": test.n,
        "k": test.k,
        "threshold_ms": test.threshold_ms,
        "p_value": test.p_value,
        "effect_ms": test.effect_ms,
        "effect_percent": 100.0 * test.effect_relative,
        "change_interval": _change(test, changes),
        "grew_most": evaluation.grew_most,
        "mix": None,
    }


def current_evidence(stage: StageResult, changes: Changes) -> dict[str, Any]:
    """A tested stage's figures at every quantile this evaluation, firing or not: what an
    open alert shows as "now" beside its figures at firing."""
    return {
        "n": stage.n,
        "quantiles": {
            quantile_label(test.q): {
                "baseline": _interval(test.baseline),
                "current": _interval(test.current),
                "k": test.k,
                "p_value": test.p_value,
                "effect_ms": test.effect_ms,
                "effect_percent": 100.0 * test.effect_relative,
                "change_interval": _change(test, changes),
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
        "quantile": quantile_label(split.q),
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


def _signed(value: float | None, unbounded: str, unit: str) -> str:
    return unbounded if value is None else f"{value:+.{0 if unit == '%' else 1}f}{unit}"


def change_words(figures: Mapping[str, Any], unit: str = "%") -> str:
    """A quantile's change in its evidence ``figures`` (``unit`` ``"%"`` or ``" ms"``), with
    its interval when they hold one (evidence stored before they did has none):
    ``+45% (+30% to +61%)``, ``+12.3 ms (+8.2 ms to +16.7 ms)``."""
    key = "percent" if unit == "%" else "ms"
    words = _signed(figures.get(f"effect_{key}"), "n/a", unit)
    interval = figures.get("change_interval")
    if not interval:
        return words
    low = _signed(interval[f"low_{key}"], "-∞", unit)
    high = _signed(interval[f"high_{key}"], "+∞", unit)
    return f"{words} ({low} to {high})"


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

"""A regression, or a change of traffic mix? Splitting a stage's tail change by cohort.

A cohort is a value of a cohort attribute (``model.version`` by default): v7 and v8. When
traffic moves to a slower cohort, the stage's pooled p99 rises although no cohort got slower;
that is a *mix shift*, and on-call should hear "60% of traffic now on v8" rather than
"regression".

The decomposition, at the pooled baseline's ``q`` quantile threshold ``T`` (counted above its
bucket, as in :mod:`latencyboard.detectors.tail`)::

    k       values of the window above T                      (observed)
    E0      n * r_b, r_b the pooled baseline's rate above T  (no change at all)
    E_mix   sum over cohorts of n_c * b_c                     (the current mix, each cohort
                                                               behaving as in its baseline)
    within  k - E_mix       the part the cohorts' own changes explain
    mix     E_mix - E0      the part the change of mix alone explains

``b_c`` is cohort ``c``'s baseline rate above ``T``. A cohort without a ready baseline (a new
version) has no baseline of its own: its current rate stands in for ``b_c``, so its effect
counts as mix, and it is judged against the version it replaces instead (the cohort with
the largest baseline share): over the same window when that version still has
``MIN_VALUES`` values in it (a canary: both see the same hour's traffic), else against its
baseline (a rollout to 100%), with the rank test of :mod:`latencyboard.stats.rank` (valid
with two samples of any size) at ``significance`` shared among the new versions, and the
rule's minimum effect at the median or ``q``. A new version slower than that is a
*regression of the deploy* ("regression in v8, now 100% of traffic: p99 +35% over v7"),
whatever share of traffic it took. ``within`` is tested properly, cohort by cohort, with the
regression detector's tests against each cohort's own baseline (Holm over cohorts); the mix is
*significant* when the count it predicts, ``E_mix``, would itself be significant against
``Binomial(n, 1 - q)`` at the rule's ``significance``; ``within`` is significant when ``k``
is, against ``Binomial(n, E_mix / n)`` (the current mix with each cohort as in its baseline;
wider than the exact sum of the cohorts' binomials, so it asks more before blaming them).

Labels, when the pooled count or ``E_mix`` is significant:

* ``regression`` naming a new version slower than the one it replaces (above), any cohort's
  own regression added to the message;
* ``regression`` naming the cohort that regressed (the one with the largest effect), or
  ``mix_shift_and_regression`` when the mix is also significant and explains at least
  ``MIX_SHARE`` of the excess ``k - E0``;
* ``mix_shift`` when no cohort regressed and the mix explains at least as much as what is
  left within cohorts, or at least ``MIX_SHARE`` of the excess while what is left is not
  significant: an alert fires at the first window whose count is high, so its window's
  chance excess lands in ``within`` and a pure mix shift caught mid-way (v8 at 40% of the
  window on its way to 90%) often shows ``within`` a little above ``mix``;
* ``regression`` with no cohort named when neither accounts for the excess.

Otherwise ``no_change``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from latencyboard.detectors.regression import (
    Baseline,
    QuantileTest,
    RegressionRule,
    large_enough,
    quantile_tests,
)
from latencyboard.detectors.tail import bucket_counts, count_above, threshold_of
from latencyboard.sketches.sketch import Sketch, merge_many
from latencyboard.stats.binomial import binomial_upper_tail
from latencyboard.stats.labels import quantile_label
from latencyboard.stats.rank import MIN_VALUES, rank_shift

__all__ = ["MIX_SHARE", "CohortChange", "Label", "MixDecomposition", "decompose"]

MIX_SHARE: Final = 0.25
"""Share of the excess the mix must explain to be named next to a cohort's regression, or
alone when the rest is not significant."""


class Label(StrEnum):
    """What a stage's tail change is, once cohorts are taken into account."""

    NO_CHANGE = "no_change"
    MIX_SHIFT = "mix_shift"
    REGRESSION = "regression"
    MIX_SHIFT_AND_REGRESSION = "mix_shift_and_regression"


@dataclass(frozen=True)
class CohortChange:
    """One cohort's part in the change."""

    cohort: str
    baseline_share: float
    current_share: float
    baseline_rate: float | None
    """Share of the cohort's baseline above the pooled threshold; ``None`` without a ready
    baseline (a new cohort)."""
    n: int
    k: int
    """Window values above the pooled threshold."""
    current_ms: float
    """The cohort's window quantile (``NaN`` when the window has none of it)."""
    baseline_ms: float | None
    tests: tuple[QuantileTest, ...]
    """Against the cohort's own baseline (empty when it has none ready)."""
    regressed: bool


@dataclass(frozen=True)
class MixDecomposition:
    """The split of a stage's tail change into within-cohort and mix parts, with a label."""

    q: float
    threshold_ms: float
    n: int
    k: int
    expected: float
    """``E0``: values above the threshold with no change."""
    expected_with_mix: float
    """``E_mix``: with the current mix, each cohort behaving as in its baseline."""
    within_excess: float
    mix_excess: float
    p_value: float
    """Of ``k`` against ``Binomial(n, 1 - q)``."""
    mix_p_value: float
    """Of ``E_mix`` (rounded down) against the same."""
    within_p_value: float
    """Of ``k`` against ``Binomial(n, E_mix / n)``: whether the cohorts' own changes matter."""
    label: Label
    cohort: str | None
    """The cohort that regressed, or the one traffic moved to for a mix shift."""
    message: str
    cohorts: tuple[CohortChange, ...]


def _percent(value: float) -> str:
    return f"{round(value * 100)}%"


def _named(attribute: str, cohort: str) -> str:
    """ "service.version 3.4.1": a cohort with the attribute it is a value of."""
    return f"{attribute} {cohort}" if attribute else cohort


def _mix_message(
    q: float, driver: CohortChange, cohorts: tuple[CohortChange, ...], attribute: str
) -> str:
    text = (
        f"mix shift: {_percent(driver.current_share)} of traffic now on "
        f"{_named(attribute, driver.cohort)}"
    )
    others = [c for c in cohorts if c.cohort != driver.cohort and c.baseline_share > 0]
    if not others:
        return text
    reference = max(others, key=lambda c: c.baseline_share)
    # Its baseline holds many more values, from before any change of its own: steadier.
    reference_ms = reference.baseline_ms if reference.baseline_ms else reference.current_ms
    if not reference_ms or math.isnan(driver.current_ms):
        return text
    change = driver.current_ms / reference_ms - 1.0
    side = "above" if change >= 0 else "below"
    return f"{text}, whose {quantile_label(q)} is {_percent(abs(change))} {side} {reference.cohort}"


def _regression_message(cohort: CohortChange, attribute: str) -> str:
    test = max((t for t in cohort.tests if t.fired), key=lambda t: t.effect_ms)
    return (
        f"regression in {_named(attribute, cohort.cohort)}: {quantile_label(test.q)} "
        f"{test.baseline.estimate:.1f} → {test.current.estimate:.1f} ms "
        f"(+{_percent(test.effect_relative)})"
    )


@dataclass(frozen=True)
class _Deploy:
    """A new version found slower than the one it replaces."""

    cohort: str
    reference: str
    q: float
    reference_ms: float
    current_ms: float
    p_value: float


def _deploys(
    baselines: Mapping[str, Baseline],
    windows: Mapping[str, Sketch],
    q: float,
    rule: RegressionRule,
) -> list[_Deploy]:
    """The new versions (window values, no ready baseline) slower than the version they
    replace, largest effect first (see the module docstring)."""
    ready = {name: b for name, b in baselines.items() if b.count >= rule.min_baseline_count}
    new = [
        name for name, window in windows.items() if name not in ready and window.count >= MIN_VALUES
    ]
    if not ready or not new:
        return []
    reference = max(ready, key=lambda name: ready[name].count)
    same_window = windows.get(reference)
    if same_window is not None and same_window.count >= MIN_VALUES:
        against = same_window
    else:
        against = ready[reference].sketch
    found = []
    for name in new:
        window = windows[name]
        p_value = rank_shift(*bucket_counts(against), *bucket_counts(window)).p_value
        if p_value > rule.significance / len(new):
            continue
        effects = [(level, against.quantile(level), window.quantile(level)) for level in (0.5, q)]
        level, before, now = max(effects, key=lambda e: _ratio(e[1], e[2]))
        if large_enough(now - before, before, rule):
            found.append(_Deploy(name, reference, level, before, now, p_value))
    return sorted(found, key=lambda d: _ratio(d.reference_ms, d.current_ms), reverse=True)


def _ratio(before: float, now: float) -> float:
    """How many times ``before`` is ``now``; from 0 ms any growth is without bound."""
    return now / before if before > 0 else math.inf


def _deploy_message(deploy: _Deploy, share: float, attribute: str) -> str:
    ratio = _ratio(deploy.reference_ms, deploy.current_ms)
    change = f" +{_percent(ratio - 1.0)}" if math.isfinite(ratio) else ""
    return (
        f"regression in {_named(attribute, deploy.cohort)}, now {_percent(share)} of traffic: "
        f"{quantile_label(deploy.q)}{change} over {deploy.reference} "
        f"({deploy.reference_ms:.1f} → {deploy.current_ms:.1f} ms)"
    )


def decompose(
    baselines: Mapping[str, Baseline],
    windows: Mapping[str, Sketch],
    q: float = 0.99,
    rule: RegressionRule | None = None,
    attribute: str = "",
) -> MixDecomposition:
    """Split one stage's change at quantile ``q``: ``baselines`` and ``windows`` map each
    cohort to its baseline and to its recent window's sketch (a cohort may be missing from
    either). ``rule`` gives the cohort tests' settings and their level (its
    ``significance``); ``attribute`` names the cohorts' attribute in the message
    ("service.version 3.4.1"). Raises ValueError when the baselines or the windows are all empty.
    """
    rule = rule or RegressionRule()
    pooled_baseline = merge_many(b.sketch for b in baselines.values())
    pooled_window = merge_many(windows.values())
    if pooled_baseline.count == 0 or pooled_window.count == 0:
        raise ValueError("decompose needs a non-empty baseline and a non-empty window")
    threshold = threshold_of(pooled_baseline, q)
    n, baseline_n = pooled_window.count, pooled_baseline.count
    rate = count_above(pooled_baseline, [threshold])[0] / baseline_n
    tests = quantile_tests(baselines, windows, rule)
    deploys = _deploys(baselines, windows, q, rule)
    slower = {deploy.cohort for deploy in deploys}
    cohorts = []
    expected_with_mix = 0.0
    for name in sorted(set(baselines) | set(windows)):
        baseline = baselines.get(name)
        window = windows.get(name, Sketch())
        k_c = count_above(window, [threshold])[0] if window.count else 0
        b_count = 0 if baseline is None else baseline.count
        b_rate = b_ms = None
        if baseline is not None and b_count >= rule.min_baseline_count:
            b_rate = count_above(baseline.sketch, [threshold])[0] / b_count
            b_ms = baseline.sketch.quantile(q)
        expected_with_mix += k_c if b_rate is None else window.count * b_rate
        cohort_tests = tests.get(name, ())
        cohorts.append(
            CohortChange(
                name,
                b_count / baseline_n,
                window.count / n,
                b_rate,
                window.count,
                k_c,
                window.quantile(q),
                b_ms,
                cohort_tests,
                name in slower or any(test.fired for test in cohort_tests),
            )
        )
    k = sum(c.k for c in cohorts)
    expected = n * rate
    p_value = binomial_upper_tail(k, n, 1.0 - q)
    mix_p_value = binomial_upper_tail(math.floor(expected_with_mix), n, 1.0 - q)
    within_p_value = binomial_upper_tail(k, n, min(1.0, expected_with_mix / n))
    within, mix = k - expected_with_mix, expected_with_mix - expected
    anomalous = p_value <= rule.significance or mix_p_value <= rule.significance
    regressed = [c for c in cohorts if c.regressed and c.cohort not in slower]
    result = tuple(cohorts)
    label, cohort, message = Label.NO_CHANGE, None, "no change"
    if deploys:
        deploy = deploys[0]
        label, cohort = Label.REGRESSION, deploy.cohort
        share = next(c.current_share for c in cohorts if c.cohort == deploy.cohort)
        message = _deploy_message(deploy, share, attribute)
        if regressed:
            worst = max(regressed, key=lambda c: max(t.effect_ms for t in c.tests if t.fired))
            message = f"{message}; {_regression_message(worst, attribute)}"
    elif regressed:
        worst = max(regressed, key=lambda c: max(t.effect_ms for t in c.tests if t.fired))
        cohort, message = worst.cohort, _regression_message(worst, attribute)
        label = Label.REGRESSION
        if mix_p_value <= rule.significance and mix >= MIX_SHARE * (k - expected):
            label = Label.MIX_SHIFT_AND_REGRESSION
            driver = _driver(result, rate)
            message = f"{_mix_message(q, driver, result, attribute)}; {message}"
    elif (
        anomalous
        and mix > 0
        and (
            mix >= within
            or (mix >= MIX_SHARE * (k - expected) and within_p_value > rule.significance)
        )
    ):
        driver = _driver(result, rate)
        label, cohort = Label.MIX_SHIFT, driver.cohort
        message = _mix_message(q, driver, result, attribute)
    elif p_value <= rule.significance:
        label = Label.REGRESSION
        message = (
            f"regression: {k} of {n} above the baseline {quantile_label(q)} "
            f"({expected:.1f} expected)"
        )
    return MixDecomposition(
        q,
        threshold.upper_edge_ms,
        n,
        k,
        expected,
        expected_with_mix,
        within,
        mix,
        p_value,
        mix_p_value,
        within_p_value,
        label,
        cohort,
        message,
        result,
    )


def _driver(cohorts: tuple[CohortChange, ...], pooled_rate: float) -> CohortChange:
    """The cohort whose gain of traffic adds most to the tail: share gained times how much
    more often than the pooled baseline it lands above the threshold."""

    def contribution(c: CohortChange) -> float:
        own_rate = c.baseline_rate if c.baseline_rate is not None else c.k / max(c.n, 1)
        return (c.current_share - c.baseline_share) * (own_rate - pooled_rate)

    return max(cohorts, key=contribution)

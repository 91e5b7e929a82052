"""Did a stage get slower? Changes of latency quantiles between two latency sketches, with
distribution-free confidence intervals and the verdicts they support (pure: the standard
library, the sketch and :mod:`latencyboard.stats`).

Each side is one :class:`~latencyboard.sketches.sketch.Sketch`: every span of the side,
merged from the rollups, so its n is the exact span count and nothing is sampled.

Estimate
    The quantile q of a side is the sketch's estimate of its order statistic of 0-based rank
    ``floor(q * (n - 1))`` (numpy's ``method="lower"``), within the sketch's relative error
    ``RELATIVE_ERROR`` (1%). The change is Δ = q_B - q_A in ms, and Δ% = Δ / q_A.

Confidence interval: binomial rank bounds, read through the sketch, both sides at once
    The spans of a side are taken as n independent draws from that side's latency
    distribution. Each side's rank bounds are those of
    :func:`latencyboard.stats.interval.quantile_intervals`, the rule the regression detector
    quotes too: the order statistics at the binomial rank bounds. The interval of Δ joins
    the two sides in one procedure (:func:`latencyboard.stats.difference.
    quantile_change_intervals`): the distances from each side's estimate to its bounds are
    combined as independent errors (root of the sum of squares), and the sketch's bucket
    error is added once. Measured (``make bench-compare-coverage``, 400 trials per cell, n
    200 to 200,000 a side, log-normal and Lomax shapes): coverage 98.8-100% in every cell
    (the sum of the two sides' intervals at half the budget each: 99.8-100%), and +10% at
    p99 with 20,000 spans a side found in 92.5% at log-sigma 0.5 (was 37.8%), 53% at 0.8
    (was 13%; a test that knew the density: 79%).

Why this method
    Resampling needs the spans, which the rollups do not keep; a bootstrap over the sketch's
    buckets would treat the bucket estimates as exact values. Rank bounds need only n and the
    sketch, cost a handful of array operations per stage, and are reproducible without a
    seed.

Significance
    Each stage's quantiles are one family: intervals are Bonferroni-adjusted to be
    ``confidence`` (95%) simultaneous, so an unchanged stage is called significant at most 5%
    of the time whichever quantile fires. A change is *significant* when its interval excludes
    0 on the side of Δ **and** it is practically large: ``|Δ| >= 1 ms`` and
    ``|Δ| >= 2%`` of A (:class:`Thresholds`). A quantile with fewer than :func:`min_spans`
    spans on a side gets "not enough data", never a verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.difference import quantile_change_intervals
from latencyboard.stats.labels import quantile_label

QUANTILES: Final = (0.5, 0.95, 0.99)
CONFIDENCE: Final = 0.95
MIN_SPANS: Final = 50
"""Spans per side below which no quantile is compared."""
MIN_TAIL_SPANS: Final = 10
"""Spans per side that must lie beyond a quantile (above it for q > 0.5) for it to be
compared: p95 needs 200 spans per side, p99 1,000."""


class Change(StrEnum):
    """What a comparison found, for one quantile or one stage."""

    SLOWER = "slower"
    FASTER = "faster"
    NONE = "none"
    """No significant change."""
    NOT_ENOUGH_DATA = "not_enough_data"


@dataclass(frozen=True)
class Thresholds:
    """The smallest change called significant: at least ``min_delta_ms`` and at least
    ``min_delta_pct`` percent of side A's value."""

    min_delta_ms: float = 1.0
    min_delta_pct: float = 2.0


@dataclass(frozen=True)
class QuantileDelta:
    """Quantile ``q`` on both sides and its change, all in ms.

    ``a_ms``/``b_ms`` are None for a side without spans, ``delta_*`` unless both have some
    (``delta_pct`` also when ``a_ms`` is 0), the interval bounds when a side has fewer than
    ``min_spans`` spans.
    """

    q: float
    a_ms: float | None
    b_ms: float | None
    delta_ms: float | None
    delta_pct: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    min_spans: int
    change: Change

    @property
    def key(self) -> str:
        return quantile_label(self.q)

    @property
    def significant(self) -> bool:
        return self.change in (Change.SLOWER, Change.FASTER)

    @property
    def enough_data(self) -> bool:
        return self.change is not Change.NOT_ENOUGH_DATA


@dataclass(frozen=True)
class SeriesDelta:
    """One stage (or end to end) compared: spans per side and one entry per quantile."""

    n_a: int
    n_b: int
    quantiles: tuple[QuantileDelta, ...]

    @property
    def lead(self) -> QuantileDelta | None:
        """The significant quantile with the largest change in ms, the one a verdict names."""
        significant = [delta for delta in self.quantiles if delta.significant]
        return max(significant, key=lambda d: abs(d.delta_ms or 0.0), default=None)

    @property
    def significant(self) -> bool:
        return self.lead is not None

    @property
    def change(self) -> Change:
        """The lead quantile's change; else NONE when any quantile could be compared."""
        lead = self.lead
        if lead is not None:
            return lead.change
        if any(delta.enough_data for delta in self.quantiles):
            return Change.NONE
        return Change.NOT_ENOUGH_DATA


def min_spans(q: float) -> int:
    """Spans each side needs before quantile ``q`` is compared (see :data:`MIN_TAIL_SPANS`)."""
    tail = min(q, 1.0 - q)
    # Rounded first: 10 / (1 - 0.99) is 999.9999999999991 in floating point.
    return max(MIN_SPANS, math.ceil(round(MIN_TAIL_SPANS / tail, 6)))


def compare_sketches(
    a: Sketch,
    b: Sketch,
    *,
    quantiles: Sequence[float] = QUANTILES,
    confidence: float = CONFIDENCE,
    thresholds: Thresholds = Thresholds(),  # noqa: B008 (frozen, so sharing it is safe)
) -> SeriesDelta:
    """Quantiles of the sketches ``a`` and ``b`` and their changes from A to B, with
    ``confidence`` simultaneous intervals from binomial rank bounds (see the module
    docstring)."""
    if not quantiles or not all(0.0 < q < 1.0 for q in quantiles):
        raise ValueError(f"quantiles must lie strictly between 0 and 1, got {quantiles!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    # Bonferroni over the stage's quantiles; the two sides of each in one interval.
    error = (1.0 - confidence) / len(quantiles)
    testable = [q for q in quantiles if min(a.count, b.count) >= min_spans(q)]
    intervals = dict(zip(testable, quantile_change_intervals(a, b, testable, error), strict=True))
    deltas = []
    for q in quantiles:
        need, a_q, b_q = min_spans(q), _estimate(a, q), _estimate(b, q)
        if q not in intervals:
            deltas.append(_quantile_delta(q, need, False, a_q, b_q, math.nan, math.nan, thresholds))
            continue
        low, high = intervals[q]
        delta = _quantile_delta(q, need, True, a_q, b_q, low, high, thresholds)
        # An upper bound past the data (too few spans above the quantile for this confidence)
        # is infinite: the side of Δ it bounds is reported as none.
        deltas.append(
            dataclasses.replace(
                delta,
                ci_low_ms=_finite(delta.ci_low_ms),
                ci_high_ms=_finite(delta.ci_high_ms),
            )
        )
    return SeriesDelta(n_a=a.count, n_b=b.count, quantiles=tuple(deltas))


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _estimate(sketch: Sketch, q: float) -> float | None:
    return sketch.quantile(q) if sketch.count else None


def _quantile_delta(
    q: float,
    need: int,
    testable: bool,
    a_ms: float | None,
    b_ms: float | None,
    low: float,
    high: float,
    thresholds: Thresholds,
) -> QuantileDelta:
    delta = None if a_ms is None or b_ms is None else b_ms - a_ms
    pct = None if delta is None or not a_ms else 100.0 * delta / a_ms
    if not testable or delta is None:
        return QuantileDelta(q, a_ms, b_ms, delta, pct, None, None, need, Change.NOT_ENOUGH_DATA)
    excludes_zero = (delta > 0 and low > 0) or (delta < 0 and high < 0)
    # A zero A with a positive B is an infinitely large relative change.
    large = abs(delta) >= thresholds.min_delta_ms and (
        pct is None or abs(pct) >= thresholds.min_delta_pct
    )
    change = Change.NONE
    if excludes_zero and large:
        change = Change.SLOWER if delta > 0 else Change.FASTER
    return QuantileDelta(q, a_ms, b_ms, delta, pct, low, high, need, change)


# --- words ---------------------------------------------------------------------------------


def format_ms(value: float) -> str:
    """A signed latency change, about three significant digits: ``+38.2 ms``."""
    size = abs(value)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2
    return f"{value:+.{digits}f} ms"


def format_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def verdict(name: str, series: SeriesDelta) -> str:
    """One line about one stage: its most telling significant change, else why there is none.

    ``model_forward p99 +38.2 ms (+35.0%), significantly slower`` · ``no significant change``
    · ``no significant change (p99: too few spans)`` · ``not enough data: …``.
    """
    lead = series.lead
    if lead is not None:
        return f"{name} {_change_words(lead)}, significantly {lead.change}"
    untested = [delta for delta in series.quantiles if not delta.enough_data]
    if len(untested) == len(series.quantiles):
        first = min(untested, key=lambda d: d.min_spans)
        return (
            f"not enough data: {quantile_label(first.q)} needs {first.min_spans:,} spans "
            f"per side, there are {series.n_a:,} (A) and {series.n_b:,} (B)"
        )
    if untested:
        labels = ", ".join(quantile_label(delta.q) for delta in untested)
        return f"no significant change ({labels}: too few spans)"
    return "no significant change"


def headline(series: Sequence[tuple[str, SeriesDelta]], b_label: str = "B") -> str:
    """One sentence over every stage: what got significantly slower or faster in B, largest
    change first; else that nothing did, or that there was not enough data to tell."""
    parts = []
    for change in (Change.SLOWER, Change.FASTER):
        found = sorted(
            ((name, s.lead) for name, s in series if s.lead is not None and s.change is change),
            key=lambda item: -abs(item[1].delta_ms or 0.0),
        )
        if found:
            changes = ", ".join(f"{name} {_change_words(lead)}" for name, lead in found)
            parts.append(f"Significantly {change} in {b_label}: {changes}.")
    if parts:
        return " ".join(parts)
    if all(s.change is Change.NOT_ENOUGH_DATA for _, s in series):
        return "Not enough data to compare: no stage has enough spans on both sides."
    return "No significant change in any stage."


def _change_words(delta: QuantileDelta) -> str:
    assert delta.delta_ms is not None
    return f"{quantile_label(delta.q)} {format_ms(delta.delta_ms)} ({format_pct(delta.delta_pct)})"

"""Did a stage get slower? Changes of latency quantiles between two samples of spans, with
bootstrap confidence intervals and the verdicts they support (pure: numpy and stdlib only).

Estimate
    The quantile q of a sample of n latencies is its order statistic of rank
    ``floor(q * (n - 1))`` (numpy's ``method="lower"``, as the rollups define it); the change
    is Δ = q_B - q_A in ms, and Δ% = Δ / q_A.

Confidence interval: the percentile bootstrap of Δ, computed exactly
    The bootstrap resamples each side with replacement (n_A and n_B spans), takes Δ* of the
    resamples, and reads the interval off the alpha/2 and 1 - alpha/2 quantiles of Δ*. No
    resample is materialised here: the k-th smallest element of a resample of the sorted sample
    x[0..n-1] is x[floor(n·U)] with U the k-th smallest of n uniforms, U ~ Beta(k, n - k + 1)
    (a resampled index is floor(n·u) with u uniform, and floor(n·u) is monotone in u). One
    Beta draw per resample and quantile therefore has exactly the distribution of
    ``np.quantile(x[rng.integers(n, size=n)], q, method="lower")``, at O(resamples) cost
    instead of O(resamples · n). The sides are independent samples, so Δ* is a difference of
    independent draws; an interval needs only its own quantile's distribution, so the
    quantiles of one resample need not be drawn jointly.

Why this method
    Latencies are skewed and heavy-tailed, so nothing here assumes a distribution. Exact
    binomial order-statistic intervals are also distribution-free, but they bound each side's
    quantile separately, and two such intervals combine into an interval of the difference
    only conservatively (or under a normal approximation of each side). The bootstrap gives
    the difference's interval directly, and drawing it exactly makes it cost next to nothing
    (about 1 ms a stage), so resamples are plentiful and the answer is seeded and
    reproducible.

Assumptions
    The spans of each side are independent draws from that side's latency distribution (a
    uniform sample of the spans, see ``queries``), and the distribution is continuous near the
    quantile. The bootstrap interval of a quantile is then asymptotically exact; it is too
    narrow when few spans lie beyond the quantile, hence :func:`min_spans`: below it a quantile
    gets "not enough data", never a verdict.

Significance
    Each stage's quantiles are one family: its intervals are Bonferroni-adjusted to be
    ``confidence`` (95%) simultaneous, so an unchanged stage is called significant at most 5%
    of the time whichever quantile fires. A change is *significant* when its interval excludes
    0 on the side of Δ **and** it is practically large: ``|Δ| >= 1 ms`` and
    ``|Δ| >= 2%`` of A (:class:`Thresholds`). Real but immaterial changes (0.2 ms of a 0.3 ms
    serialisation, 0.5% of a p50 over 20,000 spans) keep their numbers but are not called.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import numpy as np
import numpy.typing as npt

QUANTILES: Final = (0.5, 0.95, 0.99)
CONFIDENCE: Final = 0.95
RESAMPLES: Final = 2000
MIN_SPANS: Final = 50
"""Spans per side below which no quantile is compared."""
MIN_TAIL_SPANS: Final = 10
"""Spans per side that must lie beyond a quantile (above it for q > 0.5) for it to be
compared: p95 needs 200 spans per side, p99 1,000."""

FloatArray = npt.NDArray[np.float64]


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


def compare_quantiles(
    a_ms: npt.ArrayLike,
    b_ms: npt.ArrayLike,
    rng: np.random.Generator,
    *,
    quantiles: Sequence[float] = QUANTILES,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    thresholds: Thresholds = Thresholds(),  # noqa: B008 (frozen, so sharing it is safe)
) -> SeriesDelta:
    """Quantiles of the latencies ``a_ms`` and ``b_ms`` (finite, in ms) and their changes
    from A to B, with ``confidence`` simultaneous percentile-bootstrap intervals drawn from
    ``rng`` (see the module docstring)."""
    if not quantiles or not all(0.0 < q < 1.0 for q in quantiles):
        raise ValueError(f"quantiles must lie strictly between 0 and 1, got {quantiles!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    a = np.sort(np.asarray(a_ms, dtype=np.float64).ravel())
    b = np.sort(np.asarray(b_ms, dtype=np.float64).ravel())
    levels = np.asarray(quantiles, dtype=np.float64)
    a_values, b_values = _sample_quantiles(a, levels), _sample_quantiles(b, levels)
    needs = [min_spans(q) for q in quantiles]
    testable = np.array([min(a.size, b.size) >= need for need in needs])
    low = np.full(levels.size, math.nan)
    high = np.full(levels.size, math.nan)
    if testable.any():
        # Bonferroni over the stage's quantiles; both tails of each interval.
        alpha = (1.0 - confidence) / levels.size
        tested = levels[testable]
        deltas = bootstrap_quantiles(b, tested, resamples, rng) - bootstrap_quantiles(
            a, tested, resamples, rng
        )
        low[testable], high[testable] = np.quantile(deltas, [alpha / 2, 1 - alpha / 2], axis=1)
    return SeriesDelta(
        n_a=a.size,
        n_b=b.size,
        quantiles=tuple(
            _quantile_delta(q, need, bool(ok), a_q, b_q, lo, hi, thresholds)
            for q, need, ok, a_q, b_q, lo, hi in zip(
                quantiles, needs, testable, a_values, b_values, low, high, strict=True
            )
        ),
    )


def _sample_quantiles(sorted_ms: FloatArray, levels: FloatArray) -> list[float | None]:
    """The order statistics of rank ``floor(q * (n - 1))``; None each for an empty sample."""
    if not sorted_ms.size:
        return [None] * levels.size
    ranks = np.floor(levels * (sorted_ms.size - 1)).astype(np.int64)
    return list(sorted_ms[ranks].tolist())


def bootstrap_quantiles(
    sorted_ms: FloatArray, levels: FloatArray, resamples: int, rng: np.random.Generator
) -> FloatArray:
    """``resamples`` bootstrap replicates of each quantile of the sorted, non-empty sample
    ``sorted_ms``, one row per level: distributed exactly as the ``method="lower"`` quantile
    of a resample with replacement, whose order statistic of rank k = floor(q * (n - 1)) + 1
    (1-based) is x[floor(n * U)] with U ~ Beta(k, n - k + 1)."""
    n = sorted_ms.size
    k = np.floor(levels * (n - 1)) + 1
    u = rng.beta(k[:, None], (n - k + 1)[:, None], size=(levels.size, resamples))
    # u < 1 in exact arithmetic; the clip guards against a draw rounded up to 1.0.
    index = np.minimum((u * n).astype(np.int64), n - 1)
    replicates: FloatArray = sorted_ms[index]
    return replicates


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


def quantile_label(q: float) -> str:
    """``0.99`` → ``p99``, ``0.999`` → ``p99.9``."""
    return f"p{round(q * 100, 6):g}"


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

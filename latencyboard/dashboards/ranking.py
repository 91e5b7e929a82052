"""How far a pipeline is over its latency budget, and the overview's order (pure: stdlib).

A pipeline's *budget* is the threshold of an end-to-end SLA objective ("99% of requests under
250 ms"). The latency the objective is about is the quantile at its target (p99 for 99%): the
objective holds over a period exactly when that quantile is within the threshold. So

    over   = max(0, latency at the target quantile / threshold - 1)
    impact = requests per minute * over

ranks a pipeline whose p99 is 20% over budget at 1,200 requests/min (impact 240) above one
50% over at 100 requests/min (impact 50): more requests hurt, by more.
"""

from __future__ import annotations

from decimal import Decimal


def target_quantile(target_percent: Decimal) -> float:
    """The latency quantile an objective's target is about: 99.9% → 0.999."""
    return float(target_percent / 100)


def over_budget(latency_ms: float | None, threshold_ms: float) -> float | None:
    """How far ``latency_ms`` is above ``threshold_ms``, as a fraction of it (0 when within);
    None without traffic."""
    if latency_ms is None:
        return None
    return max(0.0, latency_ms / threshold_ms - 1.0)


def impact(requests_per_minute: float, over: float | None) -> float | None:
    """Traffic weighted by how far over budget it runs; None when there is no measure."""
    return None if over is None else requests_per_minute * over


def sort_key(
    impact_value: float | None, budget_ratio: float | None, requests_per_minute: float, name: str
) -> tuple[int, float, float, float, str]:
    """Overview order: highest impact first; among equal impact (say all within budget) the
    closest to its budget (``budget_ratio`` = latency / threshold) and then the busiest;
    pipelines without a budget or traffic last, busiest first."""
    measured = impact_value is not None and budget_ratio is not None
    return (
        0 if measured else 1,
        -(impact_value or 0.0),
        -(budget_ratio or 0.0),
        -requests_per_minute,
        name,
    )

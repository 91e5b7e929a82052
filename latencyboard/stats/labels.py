"""What a quantile is called wherever a person reads it (pure): ``p99``, ``p99.9``.

Pages, compare's verdicts, an alert's evidence and words, the rule page's reach and the audit
report's columns all name a quantile with :func:`quantile_label`. Two machine formats differ on
purpose and have names that say so: the value of a Prometheus ``quantile`` label is the level
itself (``latencyboard.prometheus.series.quantile_label_value``: ``0.99``), and a key of the
percentiles API is exact to every digit asked for (``latencyboard.rollups.serializers.
quantile_key``), so two levels that differ past the sixth digit never share one.
"""

from __future__ import annotations

__all__ = ["quantile_label"]


def quantile_label(q: float) -> str:
    """``0.99`` → ``p99``, ``0.999`` → ``p99.9``: the percentage to six significant digits, so
    float noise (``0.07 * 100`` is ``7.000000000000001``) never shows."""
    return f"p{round(q * 100, 6):g}"

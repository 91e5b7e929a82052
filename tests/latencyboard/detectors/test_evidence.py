"""Tests for latencyboard.detectors.evidence: the level an alert quotes its intervals at."""

from __future__ import annotations

import pytest

from latencyboard.detectors.evidence import level_words
from latencyboard.detectors.regression import RegressionRule


@pytest.mark.parametrize(
    ("significance", "words"),
    [
        pytest.param(0.05, "95%", id="compare's"),
        pytest.param(0.025, "97.5%", id="half-percent"),
        pytest.param(1e-5, "99.999%", id="default rule"),
        pytest.param(1e-12, "99.9999999999%", id="strictest rule"),
    ],
)
def test_an_alert_quotes_its_intervals_at_one_minus_its_rules_significance(
    significance: float, words: str
) -> None:
    rule = RegressionRule(significance=significance)

    assert level_words(rule.confidence) == words

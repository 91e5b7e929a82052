"""Tests for latencyboard.detectors.evidence: the level an alert quotes its intervals at."""

from __future__ import annotations

import pytest

from latencyboard.detectors.evidence import level_words


@pytest.mark.parametrize(
    ("confidence", "words"),
    [
        pytest.param(0.95, "95%", id="default"),
        pytest.param(0.975, "97.5%", id="half-percent"),
        pytest.param(0.99999, "99.999%", id="five nines"),
        pytest.param(1 - 1e-12, "99.9999999999%", id="never rounded up to 100%"),
    ],
)
def test_an_alert_states_the_level_of_its_intervals(confidence: float, words: str) -> None:
    assert level_words(confidence) == words

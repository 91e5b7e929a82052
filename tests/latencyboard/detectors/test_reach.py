"""What a rule can find at a stage's traffic (detectors.reach), checked against the detector
itself on samples."""

from __future__ import annotations

import datetime as dt

import numpy as np

from latencyboard.detectors.reach import family_size, reach
from latencyboard.detectors.regression import Baseline, RegressionRule, Status, evaluate
from latencyboard.sketches.sketch import Sketch

AT = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)
RULE = RegressionRule()


def baseline(rng: np.random.Generator, sigma: float) -> Baseline:
    return Baseline(Sketch.from_values(rng.lognormal(np.log(60.0), sigma, 200_000)), AT, AT)


def found_share(
    rng: np.random.Generator, stage: Baseline, sigma: float, n: int, shift: float
) -> float:
    """The share of 60 windows of ``n`` values, ``shift`` slower, the detector fires on."""
    fired = 0
    for _ in range(60):
        window = Sketch.from_values((1 + shift) * rng.lognormal(np.log(60.0), sigma, n))
        fired += evaluate({"s": stage}, {"s": window}).status is Status.REGRESSION
    return fired / 60


def test_the_detectable_shift_is_what_the_detector_finds_four_times_in_five() -> None:
    # given a wide stage (log-sigma 0.7) at 0.5 requests/s: 300 values in a 10-minute window
    rng = np.random.default_rng(31)
    stage = baseline(rng, 0.7)
    found = reach(stage, 30.0, 10, RULE, family_size([300], RULE))
    # then its detectable shift is past the rule's +20% floor, and +25% needs a longer window
    assert found.window_n == 300
    assert found.detectable is not None
    assert 0.25 < found.detectable < 0.6
    assert found.target_minutes is not None
    assert found.target_minutes > 10
    # and the detector fires on windows that much slower about 80% of the time, on windows
    # half as much slower rarely
    assert found_share(rng, stage, 0.7, 300, found.detectable) >= 0.65
    assert found_share(rng, stage, 0.7, 300, found.detectable / 2) <= 0.2


def test_busy_traffic_reaches_the_rules_floor_and_quiet_traffic_less() -> None:
    rng = np.random.default_rng(32)
    stage = baseline(rng, 0.5)
    busy = reach(stage, 180.0, 10, RULE, family_size([1800], RULE))
    quiet = reach(stage, 3.0, 10, RULE, family_size([30], RULE))
    # at 3 requests/s the floor (+20%, at the sketch's resolution) is the limit
    assert busy.detectable is not None
    assert busy.detectable < 0.21
    assert busy.target_minutes is not None
    assert busy.target_minutes <= 10
    # at 0.05 requests/s only the rank test runs (30 values), and needs far more
    assert quiet.detectable is None or quiet.detectable > 0.5
    assert quiet.target_minutes is not None
    assert quiet.target_minutes > busy.target_minutes


def test_a_stage_without_traffic_is_out_of_reach() -> None:
    stage = baseline(np.random.default_rng(33), 0.5)
    found = reach(stage, 0.0, 10, RULE, 1)
    assert (found.window_n, found.detectable, found.target_minutes) == (0, None, None)

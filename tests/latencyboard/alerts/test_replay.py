"""The replay's screen against the detector run at every minute: skipping minutes must never
drop an alert, the rank test's included."""

from __future__ import annotations

import datetime as dt

import numpy as np

from latencyboard.alerts import lifecycle, regression
from latencyboard.alerts.replay import OUTCOMES, replay
from latencyboard.sketches.sketch import Sketch, merge_many

START = dt.datetime(2026, 3, 8, tzinfo=dt.UTC)
MINUTES = 90
WINDOW = 10


def every_minute(
    baselines: dict[str, regression.Baseline], minutes: dict[str, dict[int, bytes]]
) -> list[tuple[str, dt.datetime]]:
    """(stage, firing time) of each alert the detector raises run at every minute."""
    states = {stage: lifecycle.AlertState() for stage in minutes}
    fired = []
    for t in range(WINDOW, MINUTES + 1):
        windows = {
            stage: merge_many(Sketch.from_bytes(rows[i]) for i in range(t - WINDOW, t))
            for stage, rows in minutes.items()
        }
        for stage in regression.evaluate(baselines, windows).stages:
            outcome = OUTCOMES.get(stage.status, lifecycle.Outcome.NO_DATA)
            states[stage.stage], transition = lifecycle.step(states[stage.stage], outcome)
            if transition is lifecycle.Transition.FIRED:
                fired.append((stage.stage, START + t * dt.timedelta(minutes=1)))
    return fired


def test_a_shift_only_the_rank_test_sees_is_replayed() -> None:
    # Given a wide stage (log-sigma 0.8) at 1 request/s, 25% slower from minute 40 to 60:
    # its tail counts stay within noise, its rank test does not.
    rng = np.random.default_rng(3)
    baseline = Sketch.from_values(rng.lognormal(np.log(60.0), 0.8, 200_000))
    baselines = {"generate": regression.Baseline(baseline, START, START)}
    rows = {}
    for m in range(MINUTES):
        factor = 1.25 if 40 <= m < 60 else 1.0
        rows[m] = Sketch.from_values(factor * rng.lognormal(np.log(60.0), 0.8, 60)).to_bytes()
    minutes = {"generate": rows}
    rule = regression.RegressionRule()

    # When replayed, and when the detector runs at every minute.
    replayed = replay(baselines, minutes, START, MINUTES, WINDOW, rule, lifecycle.CLEAN_NEEDED)
    expected = every_minute(baselines, minutes)

    # Then the replay raises the same alert, found by the rank test (p50).
    assert [(a.stage, a.fired_at) for a in replayed.alerts] == expected
    assert expected, "the shift fires"
    assert replayed.alerts[0].quantile == "p50"
    assert replayed.detector_runs < replayed.evaluations

"""The replay's screen against the detector run at every minute: skipping minutes must never
drop an alert, the rank test's included."""

from __future__ import annotations

import datetime as dt

import numpy as np

from latencyboard.detectors import lifecycle, regression
from latencyboard.detectors.replay import OUTCOMES, replay
from latencyboard.sketches.sketch import Sketch, merge_many

START = dt.datetime(2026, 3, 8, tzinfo=dt.UTC)
MINUTES = 90
WINDOW = 10


def every_minute(
    baselines: dict[str, regression.Baseline],
    minutes: dict[str, dict[int, bytes]],
    later: tuple[tuple[int, dict[str, regression.Baseline]], ...] = (),
) -> list[tuple[str, dt.datetime]]:
    """(stage, firing time) of each alert the detector raises run at every minute (against
    each of ``later``'s baselines from its minute on)."""
    states = {stage: lifecycle.AlertState() for stage in minutes}
    fired = []
    for t in range(WINDOW, MINUTES + 1):
        windows = {
            stage: merge_many(Sketch.from_bytes(rows[i]) for i in range(t - WINDOW, t))
            for stage, rows in minutes.items()
        }
        used = baselines
        for since, then in later:
            used = then if t >= since else used
        for stage in regression.evaluate(used, windows).stages:
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


def test_each_hour_is_replayed_against_its_own_baseline() -> None:
    # Given a stage 30% slower from minute 50, as it is every day from then until minute
    # 70: the baselines built at minutes 50 and 70 are those hours' (same hours of the
    # previous days), 30% slower and back to normal.
    rng = np.random.default_rng(5)

    def baseline(scale: float) -> regression.Baseline:
        values = scale * rng.lognormal(np.log(40.0), 0.3, 100_000)
        return regression.Baseline(Sketch.from_values(values), START, START, True)

    day, night = {"embed": baseline(1.0)}, {"embed": baseline(1.3)}
    rows = {}
    for m in range(MINUTES):
        # Today the stage stays slow after minute 70: that is a regression.
        factor = 1.3 if m >= 50 else 1.0
        rows[m] = Sketch.from_values(factor * rng.lognormal(np.log(40.0), 0.3, 60)).to_bytes()
    minutes = {"embed": rows}
    rule = regression.RegressionRule()
    schedule = ((50, night), (70, day))

    # When replayed with each hour's baselines, and against the day's baseline throughout.
    hourly = replay(
        [(0, day), *schedule], minutes, START, MINUTES, WINDOW, rule, lifecycle.CLEAN_NEEDED
    )
    throughout = replay(day, minutes, START, MINUTES, WINDOW, rule, lifecycle.CLEAN_NEEDED)

    # Then the replay raises what the detector run at every minute with them does: the
    # slow hour pages only once it outlasts its hours, where the day's baseline paged for it
    # from its start.
    assert [(a.stage, a.fired_at) for a in hourly.alerts] == every_minute(day, minutes, schedule)
    assert [a.fired_at for a in hourly.alerts] == [START + 70 * dt.timedelta(minutes=1)]
    assert throughout.alerts[0].fired_at < START + 60 * dt.timedelta(minutes=1)

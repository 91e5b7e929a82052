"""Tests for latencyboard.detectors.lifecycle: firing, acknowledged, resolved."""

from __future__ import annotations

from latencyboard.detectors.lifecycle import (
    AlertState,
    Outcome,
    Status,
    Transition,
    acknowledge,
    step,
)


def run(outcomes: list[Outcome], clean_needed: int = 3) -> list[tuple[Status, Transition | None]]:
    state, seen = AlertState(), []
    for outcome in outcomes:
        state, transition = step(state, outcome, clean_needed)
        seen.append((state.status, transition))
    return seen


def test_fires_once_and_resolves_after_enough_clean_evaluations() -> None:
    seen = run([Outcome.FIRING, Outcome.FIRING, Outcome.CLEAN, Outcome.CLEAN, Outcome.CLEAN])
    assert seen == [
        (Status.FIRING, Transition.FIRED),
        (Status.FIRING, None),
        (Status.FIRING, None),
        (Status.FIRING, None),
        (Status.RESOLVED, Transition.RESOLVED),
    ]


def test_a_firing_evaluation_restarts_the_clean_count() -> None:
    seen = run([Outcome.FIRING, Outcome.CLEAN, Outcome.CLEAN, Outcome.FIRING, Outcome.CLEAN])
    assert [status for status, _ in seen] == [Status.FIRING] * 5
    assert [transition for _, transition in seen].count(Transition.FIRED) == 1


def test_evaluations_without_data_neither_fire_nor_count_as_clean() -> None:
    seen = run([Outcome.FIRING, Outcome.CLEAN, Outcome.NO_DATA, Outcome.NO_DATA, Outcome.CLEAN])
    assert seen[-1] == (Status.FIRING, None)


def test_an_acknowledged_alert_resolves_the_same_way() -> None:
    state, _ = step(AlertState(), Outcome.FIRING)
    state, transition = acknowledge(state)
    assert (state.status, transition) == (Status.ACKNOWLEDGED, Transition.ACKNOWLEDGED)
    state, _ = step(state, Outcome.CLEAN, clean_needed=2)
    state, transition = step(state, Outcome.CLEAN, clean_needed=2)
    assert (state.status, transition) == (Status.RESOLVED, Transition.RESOLVED)


def test_only_a_firing_alert_can_be_acknowledged() -> None:
    assert acknowledge(AlertState()) == (AlertState(), None)


def test_a_resolved_alert_fires_again_as_a_new_alert() -> None:
    seen = run([Outcome.FIRING, Outcome.CLEAN, Outcome.FIRING], clean_needed=1)
    assert [transition for _, transition in seen] == [
        Transition.FIRED,
        Transition.RESOLVED,
        Transition.FIRED,
    ]

"""An alert's lifecycle as a pure state machine: firing, acknowledged, resolved.

An alert fires on the first firing evaluation, stays open (firing or acknowledged) while
evaluations keep firing, and resolves after ``clean_needed`` clean evaluations in a row, so
one quiet minute in the middle of an incident does not resolve and re-page it. Evaluations
that could not run (baseline not ready, no data) are neither firing nor clean: they leave the
count where it is. The caller stores the state and appends each transition.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

__all__ = ["CLEAN_NEEDED", "AlertState", "Outcome", "Status", "Transition", "acknowledge", "step"]

CLEAN_NEEDED: Final = 5


class Status(StrEnum):
    INACTIVE = "inactive"
    FIRING = "firing"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


class Outcome(StrEnum):
    """What one evaluation found for the alert's (rule, pipeline, stage)."""

    FIRING = "firing"
    CLEAN = "clean"
    NO_DATA = "no_data"


class Transition(StrEnum):
    FIRED = "fired"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


@dataclass(frozen=True)
class AlertState:
    status: Status = Status.INACTIVE
    clean_streak: int = 0
    """Clean evaluations in a row while open."""

    @property
    def open(self) -> bool:
        return self.status in (Status.FIRING, Status.ACKNOWLEDGED)


def step(
    state: AlertState, outcome: Outcome, clean_needed: int = CLEAN_NEEDED
) -> tuple[AlertState, Transition | None]:
    """The state after one evaluation, and the transition it made (``None``: no change of
    status)."""
    if outcome is Outcome.NO_DATA:
        return state, None
    if outcome is Outcome.FIRING:
        if state.open:
            return replace(state, clean_streak=0), None
        return AlertState(Status.FIRING), Transition.FIRED
    if not state.open:
        return state, None
    streak = state.clean_streak + 1
    if streak >= clean_needed:
        return AlertState(Status.RESOLVED), Transition.RESOLVED
    return replace(state, clean_streak=streak), None


def acknowledge(state: AlertState) -> tuple[AlertState, Transition | None]:
    """On-call acknowledged: a firing alert becomes acknowledged (other states unchanged)."""
    if state.status is Status.FIRING:
        return replace(state, status=Status.ACKNOWLEDGED), Transition.ACKNOWLEDGED
    return state, None

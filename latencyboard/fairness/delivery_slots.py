"""Which due delivery takes a free slot of the notifier next (pure: no Django).

The notifier sends at most ``slots`` deliveries at once (its workers' processes), and a slow
receiver holds one for up to its attempt deadline; so the slots are shared per team. A team
with nothing in flight goes before one that has; a team takes a second slot only while no
other team has a delivery due, and never the last free slot, which is kept for a team that
falls due while the others' receivers are slow. Among the teams that may go, the most urgent
delivery goes first (a page before other notices, those before test sends and retries), then
the one due longest.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum


class Urgency(IntEnum):
    PAGE = 0
    """The first attempt at telling a channel of an incident that opened."""
    NOTICE = 1
    """The first attempt at telling of an acknowledgement or a resolution."""
    LATER = 2
    """A channel's "send test", and every retry."""


@dataclass(frozen=True, slots=True)
class Head:
    """A team's most urgent due delivery."""

    team_id: int
    urgency: Urgency
    due_at: dt.datetime
    delivery_id: int


def _order(head: Head) -> tuple[Urgency, dt.datetime, int]:
    return head.urgency, head.due_at, head.delivery_id


def next_delivery(heads: Sequence[Head], held: Mapping[int, int], slots: int) -> Head | None:
    """The head to send now, of ``heads`` (one per team with a delivery due), given the
    slots each team ``held`` (deliveries in flight by team id) of ``slots``; None while it
    must wait for a slot."""
    free = slots - sum(held.values())
    if free <= 0:
        return None
    idle = [head for head in heads if not held.get(head.team_id)]
    if idle:
        return min(idle, key=_order)
    if len(heads) == 1 and free > 1:
        return heads[0]
    return None

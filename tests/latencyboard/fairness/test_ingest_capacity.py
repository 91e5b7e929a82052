"""The work-conserving share rule of ingest's bytes in flight and gRPC handlers (pure)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from latencyboard.fairness.ingest_capacity import CapacityShares, CapacityTaken, Claim, ShareTaken


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_team_alone_may_hold_the_whole_capacity(clock):
    # given 8 units, of which a team's share is 4
    shares = CapacityShares(8, 4, clock=clock)

    # when one team takes all 8, nobody else asking
    claims = [shares.take("a", 1) for _ in range(8)]

    # then it holds them all, and only the capacity stops it
    assert (len(claims), shares.held_by("a")) == (8, 8)
    with pytest.raises(CapacityTaken) as refused:
        shares.take("a", 1)
    assert refused.value.may_wait is False


def test_a_team_within_its_share_refused_for_room_makes_the_others_keep_to_theirs(clock):
    # given team A holds all 8 units alone
    shares = CapacityShares(8, 4, clock=clock)
    held = [shares.take("a", 1) for _ in range(8)]

    # when team B asks for a unit, finds no room, and A then asks for more
    with pytest.raises(CapacityTaken) as refused:
        shares.take("b", 1)
    shares.release(held.pop())

    # then B counts as waiting: A, past its share, is refused as its own (429), and B is
    # served the room A gave back
    assert refused.value.may_wait is True
    with pytest.raises(ShareTaken):
        shares.take("a", 1)
    assert shares.take("b", 1).units == 1


def test_a_waiting_team_is_forgotten_after_its_patience(clock):
    # given B was refused for room while A held everything
    shares = CapacityShares(4, 2, patience_s=3.0, clock=clock)
    held = [shares.take("a", 1) for _ in range(4)]
    with pytest.raises(CapacityTaken):
        shares.take("b", 1)
    shares.release(held.pop())

    # when B does not come back within its patience
    clock.now += 3.0

    # then A may grow past its share again
    assert shares.take("a", 1).units == 1


def test_a_body_growing_past_its_share_is_refused_only_while_another_team_waits(clock):
    # given team A's body holds 6 of 8 units (past its share of 4), alone
    shares = CapacityShares(8, 4, clock=clock)
    body = shares.take("a", 6)
    shares.grow(body, 1)

    # when B asks for 2 units and is refused for room
    with pytest.raises(CapacityTaken):
        shares.take("b", 2)

    # then A's body may not grow further
    with pytest.raises(ShareTaken):
        shares.grow(body, 1)
    assert shares.held_by("a") == 7


def test_a_waiting_team_reclaims_what_another_holds_past_its_share(clock):
    # given team A holds 4 units alone, two of them in claims that can be given back
    shares = CapacityShares(4, 2, clock=clock)
    claims = [shares.take("a", 1) for _ in range(4)]
    given_back: list[Claim] = []

    def giving_back(claim: Claim) -> Callable[[], None]:
        def reclaim() -> None:
            given_back.append(claim)
            shares.release(claim)

        return reclaim

    for claim in claims[2:]:
        claim.reclaim = giving_back(claim)

    # when B waits for a unit
    served = shares.take("b", 1, wait_s=1.0)

    # then A's newest reclaimable claim was given back, and B holds its unit
    assert (given_back, served.units, shares.held_by("a")) == ([claims[3]], 1, 3)


def test_a_settled_claim_is_not_reclaimed(clock):
    # given A's only claim past its share is settled (being served)
    shares = CapacityShares(2, 1, clock=clock)
    first, second = shares.take("a", 1), shares.take("a", 1)
    second.reclaim = lambda: pytest.fail("a settled claim was reclaimed")
    shares.settle(second)

    # when B asks for room
    with pytest.raises(CapacityTaken):
        shares.take("b", 1)

    # then A still holds both
    assert shares.held_by("a") == 2
    shares.release(first)


def test_a_team_within_its_share_waits_for_a_release(clock):
    # given A holds all 2 units
    shares = CapacityShares(2, 1)
    held = [shares.take("a", 1) for _ in range(2)]
    served = []
    waiter = threading.Thread(target=lambda: served.append(shares.take("b", 1, wait_s=10)))

    # when B waits and A then releases one
    waiter.start()
    while not shares._waiting_until:
        threading.Event().wait(0.01)
    shares.release(held.pop())
    waiter.join(10)

    # then B is served
    assert [claim.team for claim in served] == ["b"]

"""Which team's delivery takes a free notifier slot (latencyboard.fairness.delivery_slots)."""

from __future__ import annotations

import datetime as dt

import pytest

from latencyboard.fairness.delivery_slots import Head, Urgency, next_delivery

T0 = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)
A, B, C = 1, 2, 3


def head(team: int, urgency: Urgency = Urgency.PAGE, due_s: int = 0, pk: int = 0) -> Head:
    return Head(team, urgency, T0 + dt.timedelta(seconds=due_s), pk or team * 100 + due_s)


def test_a_team_with_nothing_in_flight_goes_before_an_older_delivery_of_a_busy_team():
    b_older, a_newer = head(B, due_s=0), head(A, due_s=30)
    assert next_delivery([b_older, a_newer], {B: 1}, slots=4) == a_newer


def test_a_busy_team_takes_no_second_slot_while_another_team_holds_its_first_and_has_more_due():
    assert next_delivery([head(A), head(B)], {A: 1, B: 1}, slots=4) is None


def test_a_team_alone_with_deliveries_due_keeps_the_last_free_slot_for_others():
    b = head(B)
    assert next_delivery([b], {B: 1}, slots=2) is None
    assert next_delivery([b], {B: 1}, slots=3) == b
    assert next_delivery([b], {B: 2}, slots=3) is None


def test_a_team_falling_due_takes_the_last_free_slot():
    a = head(A)
    assert next_delivery([head(B), a], {B: 1}, slots=2) == a


def test_nothing_starts_while_every_slot_is_held():
    assert next_delivery([head(A)], {B: 1, C: 1}, slots=2) is None


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(Urgency.PAGE, Urgency.LATER, id="page-before-retry-or-test"),
        pytest.param(Urgency.PAGE, Urgency.NOTICE, id="page-before-resolve"),
        pytest.param(Urgency.NOTICE, Urgency.LATER, id="resolve-before-retry-or-test"),
    ],
)
def test_the_more_urgent_delivery_goes_first_however_long_the_other_has_waited(first, second):
    urgent, waited = head(A, first, due_s=60), head(B, second, due_s=0)
    assert next_delivery([waited, urgent], {}, slots=2) == urgent


def test_of_equally_urgent_deliveries_the_one_due_longest_goes_first():
    older, newer = head(B, due_s=0), head(A, due_s=5)
    assert next_delivery([newer, older], {}, slots=2) == older

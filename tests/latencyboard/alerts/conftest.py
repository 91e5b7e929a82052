"""Fixtures for alert tests: a real HTTP receiver on loopback (the notifications tests' one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.latencyboard.notifications.receiver import Receiver, running_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as started:
        yield started

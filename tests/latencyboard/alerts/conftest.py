"""Fixtures for alert tests: a real HTTP receiver on loopback (the notifications tests' one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.latencyboard.notifications.receiver import (
    Receiver,
    allow_loopback_receivers,
    running_receiver,
)


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    allow_loopback_receivers(settings)
    with running_receiver() as started:
        yield started

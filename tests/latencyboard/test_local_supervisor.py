"""Restart backoff of the local runner's supervisor (pure)."""

from __future__ import annotations

import pytest

from latencyboard.local.supervisor import backoff, exit_words


@pytest.mark.parametrize(
    ("crashes_in_a_row", "seconds"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, None)],
    ids=["first", "second", "third", "fourth", "fifth-gives-up"],
)
def test_backoff_doubles_then_gives_up_at_the_fifth_crash(crashes_in_a_row, seconds):
    assert backoff(crashes_in_a_row) == seconds


@pytest.mark.parametrize(
    ("code", "words"),
    [(1, "exited with code 1"), (0, "exited with code 0"), (-9, "was killed by SIGKILL")],
    ids=["error", "clean-exit", "signal"],
)
def test_exit_words_name_the_signal_that_ended_a_process(code, words):
    assert exit_words(code) == words

"""Length or speed, from sketches of known requests: the factors against the exact ones."""

from __future__ import annotations

import numpy as np
import pytest

from latencyboard.compare.length_split import split
from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.sketches.sketch import Sketch


def side(tokens_median: float, tpot_ms: float, seed: int) -> tuple[dict[str, Sketch], np.ndarray]:
    """Requests whose answers have about ``tokens_median`` tokens, each at about ``tpot_ms``."""
    rng = np.random.default_rng(seed)
    tokens = np.clip(np.rint(tokens_median * np.exp(0.6 * rng.standard_normal(20_000))), 2, None)
    tpot = tpot_ms * np.exp(0.15 * rng.standard_normal(tokens.size))
    decode = (tokens - 1) * tpot
    return {
        "decode": Sketch.from_values(decode),
        "time_per_output_token": Sketch.from_values(tpot),
    }, tokens


def test_longer_answers_and_slower_tokens_are_told_apart():
    # given model B answering 60% longer and 28% slower per token than model A
    a, tokens_a = side(160, 18.0, 1)
    b, tokens_b = side(260, 23.0, 2)

    found = split(a, b)

    # then length is the ratio of tokens after the first, speed the ratio of TPOT medians
    assert found is not None
    assert found.length_factor == pytest.approx(
        (tokens_b - 1).mean() / (tokens_a - 1).mean(), rel=0.02
    )
    assert found.speed_factor == pytest.approx(23.0 / 18.0, rel=3 * RELATIVE_ERROR)
    assert found.decode_factor == pytest.approx(found.length_factor * found.speed_factor, rel=0.1)
    assert found.tokens_a == pytest.approx(tokens_a.mean(), rel=0.02)
    assert "answers longer x1.6" in found.sentence
    assert "each token slower x1.2" in found.sentence


def test_same_speed_is_said_unchanged():
    a, _ = side(160, 18.0, 3)
    b, _ = side(320, 18.0, 4)

    found = split(a, b)

    assert found is not None
    assert "each token unchanged" in found.sentence
    assert "answers longer x2.0" in found.sentence


def test_no_split_without_both_figures_on_both_sides():
    a, _ = side(160, 18.0, 5)
    assert split(a, {"decode": a["decode"]}) is None
    assert split({}, a) is None

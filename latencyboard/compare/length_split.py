"""Length or speed: how much of an LLM pipeline's decode change is longer answers and how much
slower tokens (pure: the sketch module and stdlib).

An LLM request's decode time is its output tokens after the first times its time per output
token (TPOT), so when a new model version answers at greater length, decode and end-to-end
latency grow though no token got slower. Both factors come from the sides' sketches of the
``decode`` stage and the ``time_per_output_token`` measure, every request of each side counted:

- *per-token speed*: the ratio of TPOT medians, B over A;
- *length*: the ratio of the sides' output tokens after the first, each estimated as the mean
  decode time over the mean TPOT (exact sums, not sketch estimates; it is the mean token count
  when length and per-token speed vary independently of each other);
- decode's median ratio, which is about their product.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from latencyboard.sketches.sketch import Sketch

DECODE: Final = "decode"
TPOT: Final = "time_per_output_token"
NOTABLE: Final = 0.05
"""A factor further than this from 1 is said to have changed."""


@dataclass(frozen=True, slots=True)
class LengthSplit:
    """Both sides' figures (ms, tokens) and the factors B over A."""

    tokens_a: float  # estimated mean output tokens
    tokens_b: float
    tpot_a_ms: float  # medians
    tpot_b_ms: float
    decode_a_ms: float
    decode_b_ms: float
    n_a: int  # requests with a TPOT on each side
    n_b: int

    @property
    def length_factor(self) -> float:
        return (self.tokens_b - 1) / (self.tokens_a - 1)

    @property
    def speed_factor(self) -> float:
        """TPOT B over A: above 1, each token took longer."""
        return self.tpot_b_ms / self.tpot_a_ms

    @property
    def decode_factor(self) -> float:
        return self.decode_b_ms / self.decode_a_ms

    @property
    def sentence(self) -> str:
        """What changed, in one sentence."""
        parts = [
            _part(
                self.length_factor,
                "answers",
                ("longer", "shorter"),
                f"mean about {self.tokens_a:.0f} → {self.tokens_b:.0f} output tokens",
            ),
            _part(
                self.speed_factor,
                "each token",
                ("slower", "faster"),
                f"time per output token p50 {self.tpot_a_ms:.1f} → {self.tpot_b_ms:.1f} ms",
            ),
        ]
        return (
            f"Decode p50 x{self.decode_factor:.2f} ({self.decode_a_ms:.0f} → "
            f"{self.decode_b_ms:.0f} ms): {'; '.join(parts)}."
        )


def _part(factor: float, noun: str, words: tuple[str, str], figures: str) -> str:
    if abs(factor - 1) <= NOTABLE:
        return f"{noun} unchanged (x{factor:.2f}, {figures})"
    return f"{noun} {words[0] if factor > 1 else words[1]} x{factor:.2f} ({figures})"


def split(a: Mapping[str, Sketch], b: Mapping[str, Sketch]) -> LengthSplit | None:
    """The split of side ``a``'s and side ``b``'s sketches (of milliseconds) by stage name;
    None unless both sides have decode and TPOT figures (an LLM pipeline with requests of two
    tokens or more)."""
    figures = []
    for side in (a, b):
        decode, tpot = side.get(DECODE), side.get(TPOT)
        if decode is None or tpot is None or not decode.count or not tpot.count or not tpot.sum:
            return None
        tokens = 1 + (decode.sum / decode.count) / (tpot.sum / tpot.count)
        figures.append((tokens, tpot.quantile(0.5), decode.quantile(0.5), tpot.count))
    (tokens_a, tpot_a, decode_a, n_a), (tokens_b, tpot_b, decode_b, n_b) = figures
    if tokens_a <= 1 or not tpot_a or not decode_a:
        return None
    return LengthSplit(
        tokens_a=tokens_a,
        tokens_b=tokens_b,
        tpot_a_ms=tpot_a,
        tpot_b_ms=tpot_b,
        decode_a_ms=decode_a,
        decode_b_ms=decode_b,
        n_a=n_a,
        n_b=n_b,
    )

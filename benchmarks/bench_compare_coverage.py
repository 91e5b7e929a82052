"""Compare's intervals and verdicts on samples of known distributions (issue #25); run:
make bench-compare-coverage   (or python benchmarks/bench_compare_coverage.py [--trials 400
--workers 2]).

Each trial draws ``n`` spans a side from a known latency distribution, builds one sketch
per side (``Sketch.from_values``, as the rollups hold them) and calls
:func:`latencyboard.stats.comparison.compare_sketches`, the function the compare page and API
call, with its defaults (p50, p95 and p99, 95% simultaneous). For every cell of
n in {200, 2,000, 20,000, 200,000} x p50 / p95 / p99 it reports, over ``--trials``:

* coverage: the share of trials whose interval holds the true change (B's true quantile
  minus A's), with B drawn from A's distribution (no change) and from it 10% slower (every
  value x1.1): the target is >= 95% in every cell;
* the family's coverage: all three quantiles' intervals holding at once (what "95%
  simultaneous" promises);
* significant: the share of trials called significantly slower at that quantile, with no
  change (false verdicts) and with +10% (power; the target is >= 80% at p99 with 20,000
  spans a side).

Distributions: log-normal of log-sigma 0.25, 0.5, 0.8 and 1.0, and Lomax (Pareto II) of
shape 2.5; for each, the power at p99 of an ideal test (one that knew the density) says
where +10% with 20,000 spans a side is out of any test's reach.
A quantile with fewer spans than compare needs (p99: 1,000 a side) is "not compared", never
a verdict; its cell says so. Seeded: the same arguments print the same figures.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from statistics import NormalDist
from typing import Final

import numpy as np

from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.comparison import QUANTILES, Change, compare_sketches

SIZES: Final = (200, 2_000, 20_000, 200_000)
SHIFT: Final = 1.10


@dataclass(frozen=True)
class Shape:
    """A latency distribution: ``lognormal`` (log-sigma ``spread``, median ``scale``) or
    ``lomax`` (shape ``spread``, scale ``scale``)."""

    name: str
    kind: str
    spread: float
    scale: float

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "lognormal":
            return rng.lognormal(math.log(self.scale), self.spread, n)
        return self.scale * rng.pareto(self.spread, n)

    def ideal_power(self, q: float, n: int, z: float) -> float:
        """The share of trials in which the change of ``q`` from +10% would be significant
        for a test that knew the distribution's density (the quantiles' normal
        approximation, no sketch error): what no test can beat by much."""
        step = 1e-6
        slope = math.log(self.quantile(q + step) / self.quantile(q - step)) / (2 * step)
        sd = slope * math.sqrt(2.0 * q * (1.0 - q) / n)
        return NormalDist().cdf(math.log(SHIFT) / sd - z)

    def quantile(self, q: float) -> float:
        if self.kind == "lognormal":
            return self.scale * math.exp(self.spread * NormalDist().inv_cdf(q))
        return self.scale * ((1.0 - q) ** (-1.0 / self.spread) - 1.0)


SHAPES: Final = (
    Shape("log-normal sigma 0.25", "lognormal", 0.25, 40.0),
    Shape("log-normal sigma 0.5", "lognormal", 0.5, 40.0),
    Shape("log-normal sigma 0.8", "lognormal", 0.8, 40.0),
    Shape("log-normal sigma 1.0", "lognormal", 1.0, 40.0),
    Shape("Lomax shape 2.5", "lomax", 2.5, 60.0),
)


@dataclass(frozen=True)
class Cell:
    """Counts over one (shape, n) batch of trials, per quantile (in ``QUANTILES`` order)."""

    shape: str
    n: int
    trials: int
    compared: tuple[int, ...]
    covered_null: tuple[int, ...]
    covered_shift: tuple[int, ...]
    family_null: int
    family_shift: int
    slower_null: tuple[int, ...]
    slower_shift: tuple[int, ...]


def _covers(low: float | None, high: float | None, truth: float) -> bool:
    return (low is None or low <= truth) and (high is None or truth <= high)


def run_cell(shape_index: int, n: int, trials: int) -> Cell:
    """``trials`` comparisons at ``n`` spans a side, without and with the shift."""
    shape = SHAPES[shape_index]
    rng = np.random.default_rng(1000 * shape_index + n)
    truths = [shape.quantile(q) for q in QUANTILES]
    size = len(QUANTILES)
    compared, covered = [0] * size, {False: [0] * size, True: [0] * size}
    family = {False: 0, True: 0}
    slower = {False: [0] * size, True: [0] * size}
    for _ in range(trials):
        a = Sketch.from_values(shape.draw(rng, n))
        for shifted in (False, True):
            factor = SHIFT if shifted else 1.0
            b = Sketch.from_values(factor * shape.draw(rng, n))
            result = compare_sketches(a, b)
            all_covered = True
            for j, (delta, truth) in enumerate(zip(result.quantiles, truths, strict=True)):
                if not delta.enough_data:
                    continue
                compared[j] += not shifted
                hit = _covers(delta.ci_low_ms, delta.ci_high_ms, (factor - 1.0) * truth)
                covered[shifted][j] += hit
                all_covered &= hit
                slower[shifted][j] += delta.change is Change.SLOWER
            family[shifted] += all_covered
    return Cell(
        shape.name,
        n,
        trials,
        tuple(compared),
        tuple(covered[False]),
        tuple(covered[True]),
        family[False],
        family[True],
        tuple(slower[False]),
        tuple(slower[True]),
    )


def _share(count: int, total: int) -> str:
    return f"{count / total:6.1%}" if total else "   n/a"


def _print(cells: list[Cell]) -> list[str]:
    """The table; returns the cells that miss a target."""
    misses = []
    # The two-sided z of each quantile's test: 95% simultaneous over the three.
    z = NormalDist().inv_cdf(1.0 - 0.05 / len(QUANTILES) / 2)
    for shape in SHAPES:
        ideal = shape.ideal_power(0.99, 20_000, z)
        print(f"{shape.name} (+10% at p99 with 20,000 a side, ideal test: {ideal:.0%}):")
        print(
            "  n         q    coverage (no change / +10%)  significant (no change / +10%)"
            "  family coverage"
        )
        for cell in (c for c in cells if c.shape == shape.name):
            for j, q in enumerate(QUANTILES):
                label = f"p{round(q * 100):d}"
                if not cell.compared[j]:
                    print(f"  {cell.n:<9,} {label:<4} not compared (too few spans a side)")
                    continue
                total = cell.compared[j]
                print(
                    f"  {cell.n:<9,} {label:<4} {_share(cell.covered_null[j], total)} / "
                    f"{_share(cell.covered_shift[j], total)}"
                    f"{'':17}{_share(cell.slower_null[j], total)} / "
                    f"{_share(cell.slower_shift[j], total)}"
                    f"{'':16}{_share(cell.family_null, cell.trials)} / "
                    f"{_share(cell.family_shift, cell.trials)}"
                )
                for kind, covered in (
                    ("no change", cell.covered_null),
                    ("+10%", cell.covered_shift),
                ):
                    if covered[j] < 0.95 * total:
                        misses.append(f"{shape.name} n={cell.n:,} {label} coverage ({kind})")
                if cell.n == 20_000 and q == 0.99 and cell.slower_shift[j] < 0.8 * total:
                    misses.append(f"{shape.name} n=20,000 p99 +10% significant in < 80%")
    return misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400, help="per shape and n")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    jobs = [(s, n) for s in range(len(SHAPES)) for n in SIZES]
    with ProcessPoolExecutor(args.workers) as pool:
        cells = list(
            pool.map(
                run_cell,
                [s for s, _ in jobs],
                [n for _, n in jobs],
                [args.trials] * len(jobs),
            )
        )
    print(
        f"compare_sketches (95% simultaneous over p50/p95/p99), {args.trials} trials per shape "
        f"and n, B without change and B x{SHIFT}"
    )
    misses = _print(cells)
    print("targets missed: " + ("; ".join(misses) if misses else "none"))
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

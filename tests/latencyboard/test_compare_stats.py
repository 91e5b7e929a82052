"""The statistics of compare and its sampling plan, without a database: seeded simulations of
demo-like latencies (a log-normal body with a Pareto tail, as ``demo.profiles`` draws them)."""

from __future__ import annotations

import numpy as np
import pytest

from latencyboard.compare import sampling, stats
from latencyboard.demo.profiles import LatencyDist

# model_forward of the demo's fraud-scorer: 6 ms median, 1% of requests in a heavy tail.
FORWARD = LatencyDist(median_ms=6.0, sigma=0.3)
# A plain log-normal, whose quantiles are known exactly: exp(mu + sigma * z_q).
MU, SIGMA = np.log(20.0), 0.5
Z = {0.5: 0.0, 0.95: 1.6448536269514722, 0.99: 2.3263478740408408}


def forward_ms(n: int, rng: np.random.Generator, factor: float = 1.0) -> np.ndarray:
    return factor * FORWARD.sample_ns(n, rng) / 1e6


def by_key(series: stats.SeriesDelta) -> dict[str, stats.QuantileDelta]:
    return {delta.key: delta for delta in series.quantiles}


def test_the_exact_bootstrap_draws_what_resampling_draws():
    # given a small skewed sample
    rng = np.random.default_rng(7)
    sample = np.sort(forward_ms(300, rng))
    levels = np.array(stats.QUANTILES)

    # when each quantile's bootstrap distribution is drawn from the Beta of its order
    # statistic, and by resampling with replacement the slow way
    exact = stats.bootstrap_quantiles(sample, levels, 40_000, rng)
    indices = rng.integers(sample.size, size=(40_000, sample.size))
    resampled = np.quantile(sample[indices], levels, axis=1, method="lower")

    # then both put the same mass on each order statistic (within Monte Carlo error)
    for row in range(levels.size):
        support = np.union1d(exact[row], resampled[row])
        exact_cdf = np.searchsorted(np.sort(exact[row]), support, side="right") / 40_000
        resampled_cdf = np.searchsorted(np.sort(resampled[row]), support, side="right") / 40_000
        assert np.max(np.abs(exact_cdf - resampled_cdf)) < 0.015


def test_no_difference_gets_no_significant_verdict_in_at_least_95_percent_of_repetitions():
    # given 400 seeded repetitions of two samples from the same distribution
    rng = np.random.default_rng(20261121)
    called = 0
    for _ in range(400):
        a, b = forward_ms(3_000, rng), forward_ms(3_000, rng)

        # when they are compared
        series = stats.compare_quantiles(a, b, rng)

        called += series.significant

    # then at most 5% of the stage verdicts call a change
    assert called / 400 <= 0.05


def test_a_ten_percent_slower_tail_is_significant_and_the_median_is_not():
    # given B whose slowest 10% of requests are 10% slower, the rest unchanged
    rng = np.random.default_rng(5)
    a = rng.lognormal(MU, SIGMA, 20_000)
    b = rng.lognormal(MU, SIGMA, 20_000)
    tail = b > np.quantile(b, 0.9)
    b[tail] *= 1.10

    # when A and B are compared
    series = stats.compare_quantiles(a, b, rng)

    # then p95 and p99 are significantly slower by about 10%, p50 is unchanged
    quantiles = by_key(series)
    assert quantiles["p99"].change is stats.Change.SLOWER
    assert quantiles["p95"].change is stats.Change.SLOWER
    assert quantiles["p99"].delta_pct == pytest.approx(10.0, abs=4.0)
    assert quantiles["p50"].change is stats.Change.NONE
    assert series.change is stats.Change.SLOWER
    assert stats.verdict("model_forward", series).startswith("model_forward p99 +")
    assert stats.verdict("model_forward", series).endswith(", significantly slower")


def test_a_faster_stage_is_called_faster():
    rng = np.random.default_rng(11)
    a, b = rng.lognormal(MU, SIGMA, 5_000), 0.7 * rng.lognormal(MU, SIGMA, 5_000)

    series = stats.compare_quantiles(a, b, rng)

    assert series.change is stats.Change.FASTER
    assert all(delta.change is stats.Change.FASTER for delta in series.quantiles)
    assert stats.verdict("model_forward", series).endswith(", significantly faster")


@pytest.mark.parametrize(
    ("n", "compared"),
    [
        pytest.param(0, set(), id="no-spans"),
        pytest.param(49, set(), id="below-p50-minimum"),
        pytest.param(50, {"p50"}, id="p50-only"),
        pytest.param(999, {"p50", "p95"}, id="no-p99"),
        pytest.param(1_000, {"p50", "p95", "p99"}, id="all"),
    ],
)
def test_small_samples_get_not_enough_data_never_a_verdict(n, compared):
    # given a sample of n spans on one side and B three times slower
    rng = np.random.default_rng(n)
    a, b = forward_ms(n, rng), forward_ms(5_000, rng, 3.0)

    # when compared
    series = stats.compare_quantiles(a, b, rng)

    # then only the quantiles with enough spans on both sides have an interval and a verdict
    for key, delta in by_key(series).items():
        assert delta.enough_data is (key in compared)
        if key not in compared:
            assert (delta.ci_low_ms, delta.ci_high_ms) == (None, None)
            assert delta.change is stats.Change.NOT_ENOUGH_DATA
            assert not delta.significant


def test_a_stage_without_enough_data_says_so_in_words():
    rng = np.random.default_rng(3)

    series = stats.compare_quantiles(forward_ms(12, rng), forward_ms(40, rng), rng)

    assert series.change is stats.Change.NOT_ENOUGH_DATA
    assert stats.verdict("serialize", series) == (
        "not enough data: p50 needs 50 spans per side, there are 12 (A) and 40 (B)"
    )
    assert stats.headline([("serialize", series)]) == (
        "Not enough data to compare: no stage has enough spans on both sides."
    )


def test_a_side_without_spans_has_no_quantile():
    rng = np.random.default_rng(4)

    series = stats.compare_quantiles([], forward_ms(100, rng), rng)

    p50 = by_key(series)["p50"]
    assert (series.n_a, series.n_b) == (0, 100)
    assert (p50.a_ms, p50.delta_ms, p50.delta_pct) == (None, None, None)
    assert p50.b_ms is not None


def test_simultaneous_intervals_cover_the_true_change_about_95_percent_of_the_time():
    # given 300 seeded repetitions of log-normal samples, B 10% slower throughout, whose
    # true quantiles (and so their changes) are known exactly
    rng = np.random.default_rng(99)
    true_delta = {q: 0.1 * np.exp(MU + SIGMA * z) for q, z in Z.items()}
    covered = 0
    for _ in range(300):
        a = rng.lognormal(MU, SIGMA, 2_000)
        b = 1.1 * rng.lognormal(MU, SIGMA, 2_000)

        # when compared
        series = stats.compare_quantiles(a, b, rng)

        covered += all(
            delta.ci_low_ms is not None
            and delta.ci_high_ms is not None
            and delta.ci_low_ms <= true_delta[delta.q] <= delta.ci_high_ms
            for delta in series.quantiles
        )

    # then all three intervals of a stage hold the true changes in about 95% of them
    assert 0.92 <= covered / 300 <= 0.99


def test_a_real_but_immaterial_change_is_not_called_significant():
    # given B exactly 0.5 ms slower than A on a 100 ms median: certain, but under 1 ms and 2%
    rng = np.random.default_rng(8)
    a = rng.lognormal(np.log(100.0), 0.01, 20_000)
    b = a + 0.5

    series = stats.compare_quantiles(a, b, rng)

    p50 = by_key(series)["p50"]
    assert p50.ci_low_ms is not None
    assert p50.ci_low_ms > 0
    assert p50.delta_ms == pytest.approx(0.5)
    assert p50.change is stats.Change.NONE
    assert stats.verdict("postprocess", series) == "no significant change"


def test_the_same_seed_gives_the_same_answer():
    rng = np.random.default_rng(1)
    a, b = forward_ms(2_000, rng), forward_ms(2_000, rng, 1.1)

    first = stats.compare_quantiles(a, b, np.random.default_rng(42))
    second = stats.compare_quantiles(a, b, np.random.default_rng(42))

    assert first == second


def test_headline_names_the_largest_significant_changes_first():
    rng = np.random.default_rng(2)

    def sample(factor: float) -> np.ndarray:
        return factor * rng.lognormal(MU, SIGMA, 5_000)

    a = sample(1.0)
    slower = stats.compare_quantiles(a, sample(1.35), rng)
    barely = stats.compare_quantiles(a, sample(1.1), rng)
    unchanged = stats.compare_quantiles(a, sample(1.0), rng)

    line = stats.headline(
        [("preprocess", barely), ("model_forward", slower), ("serialize", unchanged)],
        "B (model.version = v8)",
    )

    assert line.startswith("Significantly slower in B (model.version = v8): model_forward p")
    assert line.index("model_forward") < line.index("preprocess")
    assert "serialize" not in line
    assert stats.headline([("serialize", unchanged)]) == "No significant change in any stage."


@pytest.mark.parametrize(("q", "spans"), [(0.5, 50), (0.95, 200), (0.99, 1_000), (0.999, 10_000)])
def test_minimum_spans_keep_ten_beyond_the_quantile(q, spans):
    assert stats.min_spans(q) == spans


@pytest.mark.parametrize(
    ("value", "text"),
    [(38.24, "+38.2 ms"), (-0.456, "-0.46 ms"), (123.4, "+123 ms"), (0.0, "+0.00 ms")],
)
def test_changes_are_written_with_their_sign_and_unit(value, text):
    assert stats.format_ms(value) == text


def test_a_busy_pipeline_is_sampled_at_the_rate_that_yields_the_cap():
    # given a pilot of 10% of the blocks that found 20,000 spans (an estimated 200,000)
    plan = sampling.plan_scan(blocks=sampling.MAX_BLOCKS_PER_SCAN, pilot=0.1, pilot_counts=[20_000])

    # then the scan reads about the cap's worth of blocks and keeps every span in them
    target = sampling.MAX_SPANS_PER_SIDE * sampling.HEADROOM
    assert plan.rate == pytest.approx(target / 200_000)
    assert plan.keeps == (1.0,)
    assert plan.fraction(0) == pytest.approx(target / 200_000)


def test_a_small_part_of_a_big_table_is_limited_by_the_block_budget():
    plan = sampling.plan_scan(blocks=1_000_000, pilot=0.0003, pilot_counts=[3])

    assert plan.rate == pytest.approx(sampling.MAX_BLOCKS_PER_SCAN / 1_000_000)


def test_the_common_side_of_a_shared_scan_is_thinned_to_the_cap():
    # given a canary: side B has a twentieth of side A's spans (estimated 200,000 and 10,000)
    plan = sampling.plan_scan(
        blocks=sampling.MAX_BLOCKS_PER_SCAN, pilot=0.1, pilot_counts=[20_000, 1_000]
    )

    # then the scan reads every block for B, and thins A to the cap
    target = sampling.MAX_SPANS_PER_SIDE * sampling.HEADROOM
    assert (plan.rate, plan.fraction(1)) == (1.0, 1.0)
    assert plan.fraction(0) * 200_000 == pytest.approx(target)


def test_a_side_the_pilot_missed_gets_everything_the_budget_allows():
    plan = sampling.plan_scan(blocks=2_000, pilot=0.15, pilot_counts=[0])

    assert (plan.rate, plan.keeps) == (1.0, (1.0,))

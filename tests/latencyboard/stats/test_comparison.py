"""The statistics of compare, without a database: seeded simulations of demo-like latencies (a
log-normal body with a Pareto tail, as ``demo.profiles`` draws them), each side a sketch."""

from __future__ import annotations

import numpy as np
import pytest

from latencyboard.demo.profiles import (
    FORWARD_INDEX,
    FRAUD_SCORER,
    PIPELINES,
    STAGE_NAMES,
    LatencyDist,
    sample_requests,
)
from latencyboard.sketches.sketch import Sketch
from latencyboard.stats import comparison

# model_forward of the demo's fraud-scorer: 6 ms median, 1% of requests in a heavy tail.
FORWARD = LatencyDist(median_ms=6.0, sigma=0.3)
# A plain log-normal, whose quantiles are known exactly: exp(mu + sigma * z_q).
MU, SIGMA = np.log(20.0), 0.5
Z = {0.5: 0.0, 0.95: 1.6448536269514722, 0.99: 2.3263478740408408}


def forward_ms(n: int, rng: np.random.Generator, factor: float = 1.0) -> np.ndarray:
    return factor * FORWARD.sample_ns(n, rng) / 1e6


def compare(a_ms: np.ndarray | list[float], b_ms: np.ndarray) -> comparison.SeriesDelta:
    return comparison.compare_sketches(Sketch.from_values(a_ms), Sketch.from_values(b_ms))


def by_key(series: comparison.SeriesDelta) -> dict[str, comparison.QuantileDelta]:
    return {delta.key: delta for delta in series.quantiles}


def test_no_difference_gets_no_significant_verdict_in_at_least_95_percent_of_repetitions():
    # given 400 seeded repetitions of two samples from the same distribution
    rng = np.random.default_rng(20261121)
    called = 0
    for _ in range(400):
        a, b = forward_ms(3_000, rng), forward_ms(3_000, rng)

        # when they are compared
        series = compare(a, b)

        called += series.significant

    # then at most 5% of the stage verdicts call a change
    assert called / 400 <= 0.05


def test_a_ten_percent_slower_tail_is_significant_and_the_median_is_not():
    # given B whose slowest 10% of requests are 10% slower, the rest unchanged (the intervals
    # are conservative: a 10% change of p99 needs tens of thousands of spans a side)
    rng = np.random.default_rng(5)
    a = rng.lognormal(MU, SIGMA, 100_000)
    b = rng.lognormal(MU, SIGMA, 100_000)
    tail = b > np.quantile(b, 0.9)
    b[tail] *= 1.10

    # when A and B are compared
    series = compare(a, b)

    # then p95 and p99 are significantly slower by about 10%, p50 is unchanged
    quantiles = by_key(series)
    assert quantiles["p99"].change is comparison.Change.SLOWER
    assert quantiles["p95"].change is comparison.Change.SLOWER
    assert quantiles["p99"].delta_pct == pytest.approx(10.0, abs=4.0)
    assert quantiles["p50"].change is comparison.Change.NONE
    assert series.change is comparison.Change.SLOWER
    assert comparison.verdict("model_forward", series).startswith("model_forward p99 +")
    assert comparison.verdict("model_forward", series).endswith(", significantly slower")


def test_a_faster_stage_is_called_faster():
    rng = np.random.default_rng(11)
    a, b = rng.lognormal(MU, SIGMA, 5_000), 0.7 * rng.lognormal(MU, SIGMA, 5_000)

    series = compare(a, b)

    assert series.change is comparison.Change.FASTER
    assert all(delta.change is comparison.Change.FASTER for delta in series.quantiles)
    assert comparison.verdict("model_forward", series).endswith(", significantly faster")


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
    series = compare(a, b)

    # then only the quantiles with enough spans on both sides have an interval and a verdict
    for key, delta in by_key(series).items():
        assert delta.enough_data is (key in compared)
        if key not in compared:
            assert (delta.ci_low_ms, delta.ci_high_ms) == (None, None)
            assert delta.change is comparison.Change.NOT_ENOUGH_DATA
            assert not delta.significant


def test_a_stage_without_enough_data_says_so_in_words():
    rng = np.random.default_rng(3)

    series = compare(forward_ms(12, rng), forward_ms(40, rng))

    assert series.change is comparison.Change.NOT_ENOUGH_DATA
    assert comparison.verdict("serialize", series) == (
        "not enough data: p50 needs 50 spans per side, there are 12 (A) and 40 (B)"
    )
    assert comparison.headline([("serialize", series)]) == (
        "Not enough data to compare: no stage has enough spans on both sides."
    )


def test_a_side_without_spans_has_no_quantile():
    rng = np.random.default_rng(4)

    series = compare([], forward_ms(100, rng))

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
        series = compare(a, b)

        covered += all(
            delta.ci_low_ms is not None
            and delta.ci_high_ms is not None
            and delta.ci_low_ms <= true_delta[delta.q] <= delta.ci_high_ms
            for delta in series.quantiles
        )

    # then all three intervals of a stage hold the true changes in at least 95% of them
    assert covered / 300 >= 0.95


def test_a_real_but_immaterial_change_is_not_called_significant():
    # given B exactly 8% slower than A on a 10 ms median: certain, but under 1 ms
    rng = np.random.default_rng(8)
    a = rng.lognormal(np.log(10.0), 0.01, 20_000)
    b = 1.08 * a

    series = compare(a, b)

    p50 = by_key(series)["p50"]
    assert p50.ci_low_ms is not None
    assert p50.ci_low_ms > 0
    assert p50.delta_ms == pytest.approx(0.8, abs=0.22)  # each side within 1%
    assert p50.change is comparison.Change.NONE
    assert comparison.verdict("postprocess", series) == "no significant change"


def test_headline_names_the_largest_significant_changes_first():
    rng = np.random.default_rng(2)

    def sample(factor: float) -> np.ndarray:
        return factor * rng.lognormal(MU, SIGMA, 5_000)

    a = sample(1.0)
    slower = compare(a, sample(1.35))
    barely = compare(a, sample(1.1))
    unchanged = compare(a, sample(1.0))

    line = comparison.headline(
        [("preprocess", barely), ("model_forward", slower), ("serialize", unchanged)],
        "B (model.version = v8)",
    )

    assert line.startswith("Significantly slower in B (model.version = v8): model_forward p")
    assert line.index("model_forward") < line.index("preprocess")
    assert "serialize" not in line
    assert comparison.headline([("serialize", unchanged)]) == "No significant change in any stage."


@pytest.mark.parametrize(("q", "spans"), [(0.5, 50), (0.95, 200), (0.99, 1_000), (0.999, 10_000)])
def test_minimum_spans_keep_ten_beyond_the_quantile(q, spans):
    assert comparison.min_spans(q) == spans


@pytest.mark.parametrize(
    ("value", "text"),
    [(38.24, "+38.2 ms"), (-0.456, "-0.46 ms"), (123.4, "+123 ms"), (0.0, "+0.00 ms")],
)
def test_changes_are_written_with_their_sign_and_unit(value, text):
    assert comparison.format_ms(value) == text


# --- sketch intervals and the acceptance figures ---------------------------------------


def test_no_change_is_no_significant_change_in_at_least_38_of_40_seeded_trials():
    # given 40 seeded pairs of 10-minute windows of the same model_forward latency
    verdicts = []
    for seed in range(40):
        rng = np.random.default_rng([20261124, seed])
        a, b = forward_ms(6_000, rng), forward_ms(6_000, rng)

        # when each pair is compared as sketches
        verdicts.append(comparison.verdict("model_forward", compare(a, b)))

    # then at least 95% say so
    assert verdicts.count("no significant change") >= 38


def test_thirty_percent_more_model_forward_is_significant_and_named():
    rng = np.random.default_rng(30)
    a, b = forward_ms(6_000, rng), forward_ms(6_000, rng, 1.3)

    series = compare(a, b)

    assert series.change is comparison.Change.SLOWER
    assert comparison.headline([("model_forward", series)]).startswith(
        "Significantly slower in B: model_forward p"
    )


def test_fraud_scorer_v8_model_forward_p99_is_the_demos_factor_inside_the_interval():
    # given a day of the demo's fraud-scorer (15 requests a second), half of it on v8
    rng = np.random.default_rng(24)
    batch = sample_requests(FRAUD_SCORER, 24 * 3600 * 15, rng, candidate_share=0.5)
    forward = batch.stage_ns[:, FORWARD_INDEX] / 1e6
    ran = batch.ran[:, FORWARD_INDEX]
    v7 = forward[ran & (batch.model_version_idx == 0)]
    v8 = forward[ran & (batch.model_version_idx == 1)]
    factors = {v.name: v.forward_factor for v in FRAUD_SCORER.model_versions}
    assert factors == {"v7": 1.0, "v8": 1.35}

    # when v7 is compared with v8 as sketches
    series = compare(v7, v8)

    # then the change the factor makes to p99 lies inside p99's interval, the stage's verdict
    # is significant, and the quantiles the profile pins down (p50, p95) are 1.35 times higher.
    # (p99 sits where the profile's 1% Pareto tail meets the log-normal body, a flat stretch
    # of the distribution: its estimate wanders over that stretch and its interval is wide.)
    quantiles = by_key(series)
    p99 = quantiles["p99"]
    assert p99.a_ms is not None
    assert p99.ci_low_ms is not None
    assert p99.ci_high_ms is not None
    assert p99.ci_low_ms <= 0.35 * p99.a_ms <= p99.ci_high_ms
    assert series.change is comparison.Change.SLOWER
    assert comparison.verdict("model_forward", series).endswith("significantly slower")
    for key in ("p50", "p95"):
        a_ms, b_ms = quantiles[key].a_ms, quantiles[key].b_ms
        assert a_ms is not None
        assert b_ms is not None
        assert b_ms / a_ms == pytest.approx(1.35, rel=0.02)


def test_each_sides_quantiles_are_within_one_percent_of_the_exact_order_statistic():
    # given the percentiles benchmark's data: the demo pipelines' stages
    rng = np.random.default_rng(90)
    for pipeline in PIPELINES:
        batch = sample_requests(pipeline, 200_000, rng, candidate_share=0.3)
        for index in range(len(STAGE_NAMES)):
            values = batch.stage_ns[batch.ran[:, index], index] / 1e6

            # when a side's sketch estimates its quantiles
            series = compare(values, values)

            # then each is within 1% of the order statistic of rank floor(q * (n - 1))
            for delta in series.quantiles:
                exact = float(np.quantile(values, delta.q, method="lower"))
                assert delta.a_ms == pytest.approx(exact, rel=0.01), (pipeline.name, index)

"""Derived stages and LLM measures, computed without a database."""

from __future__ import annotations

import pytest

from latencyboard.pipelines import derivation
from latencyboard.pipelines.derivation import DerivedRule, SpanView, derive

TRACE = b"\x01" * 16


def _span(
    span_id: int,
    parent: int | None = None,
    *,
    start: int = 0,
    end: int = 10**9,
    attributes: dict[str, object] | None = None,
    events: list[tuple[int, str]] | None = None,
) -> SpanView:
    return SpanView(
        TRACE,
        span_id.to_bytes(8, "big"),
        None if parent is None else parent.to_bytes(8, "big"),
        start,
        end,
        attributes or {},
        events or [],
    )


@pytest.mark.parametrize(
    ("count", "band"),
    [(0, "0"), (1, "1"), (2, "2-3"), (3, "2-3"), (255, "128-255"), (256, "256-511")],
)
def test_token_bands_are_powers_of_two(count, band):
    assert derivation.token_band(count) == band


def test_attribute_stages_follow_each_other_from_the_span_start_in_rule_order():
    rules = [DerivedRule("queue", "q"), DerivedRule("compute", "c", unit="ms")]
    span = _span(1, start=1000, attributes={"q": 0.5, "c": 20})

    found = derive([span], rules, measures=False)

    assert [(d.stage, d.start_ns, d.end_ns) for d in found] == [
        ("queue", 1000, 1000 + 500_000_000),
        ("compute", 1000 + 500_000_000, 1000 + 520_000_000),
    ]


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf"), "0.5", True, None])
def test_a_duration_that_is_no_finite_non_negative_number_derives_nothing(value):
    span = _span(1, attributes={"q": value})

    assert derive([span], [DerivedRule("queue", "q")], measures=False) == []


def test_an_event_stage_finds_its_end_on_a_span_below_and_not_beside():
    rule = DerivedRule("queue", start_event="QUEUE_START", end_event="COMPUTE_START")
    model = _span(1, events=[(100, "QUEUE_START")])
    compute = _span(2, parent=1, events=[(400, "COMPUTE_START")])
    sibling = _span(3, events=[(150, "COMPUTE_START")])  # another root: not below the model

    found = derive([sibling, model, compute], [rule], measures=False)

    assert [(d.anchor, d.stage, d.start_ns, d.end_ns) for d in found] == [(1, "queue", 100, 400)]


def test_an_event_stage_whose_end_is_missing_from_the_request_is_not_derived():
    rule = DerivedRule("queue", start_event="QUEUE_START", end_event="COMPUTE_START")

    assert derive([_span(1, events=[(100, "QUEUE_START")])], [rule], measures=False) == []


def test_a_rule_of_the_pipeline_replaces_the_presets_rules_of_its_stage():
    own = DerivedRule("queue", "my.queue_seconds")

    rules = derivation.effective_rules([own], presets=True)

    assert [rule for rule in rules if rule.stage == "queue"] == [own]
    assert {rule.stage for rule in rules} >= {"prefill", "decode", "compute_infer"}
    assert derivation.effective_rules([own], presets=False) == (own,)


def test_client_ttft_and_tpot_from_a_genai_span():
    # a client span of 2.5 s whose first chunk came after 0.5 s, with 101 output tokens
    span = _span(
        1,
        start=0,
        end=2_500_000_000,
        attributes={"gen_ai.response.time_to_first_chunk": 0.5, "gen_ai.usage.output_tokens": 101},
    )

    found = {d.stage: d for d in derive([span], [], measures=True)}

    assert found["time_to_first_token"].end_ns == 500_000_000
    assert "network" in found["time_to_first_token"].source
    tpot = found["time_per_output_token"]
    assert tpot.end_ns - tpot.start_ns == 20_000_000  # 2 s / 100
    assert all(d.measure for d in found.values())


def test_one_output_token_has_no_time_per_output_token():
    span = _span(
        1,
        attributes={"gen_ai.latency.time_to_first_token": 0.1, "gen_ai.usage.completion_tokens": 1},
    )

    assert [d.stage for d in derive([span], [], measures=True)] == ["time_to_first_token"]


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.usage.input_tokens": 300, "gen_ai.usage.output_tokens": 40},
        {"gen_ai.usage.prompt_tokens": 300, "gen_ai.usage.completion_tokens": 40},
        {"llm.token_count.prompt": 300, "llm.token_count.completion": 40},
        {"llm.usage.prompt_tokens": 300, "llm.usage.completion_tokens": 40},
    ],
    ids=["genai", "genai-old", "openinference", "traceloop"],
)
def test_token_bands_read_every_dialect(attributes):
    assert derivation.token_bands(attributes) == {
        "input_tokens.band": "256-511",
        "output_tokens.band": "32-63",
    }


def test_derived_span_ids_are_stable_and_distinct_per_stage():
    queue = derivation.Derived(0, "queue", 0, 1, "", False)
    decode = queue._replace(stage="decode")

    assert queue.span_id(b"12345678") == queue.span_id(b"12345678")
    assert queue.span_id(b"12345678") != decode.span_id(b"12345678")

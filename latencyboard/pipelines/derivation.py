"""Stages and LLM measures derived from a span's attributes and events (pure: no Django).

Inference servers say where a request's time goes in three ways: child spans (stages as they
are), **duration attributes** on one span (vLLM and SGLang's ``llm_request``:
``gen_ai.latency.time_in_queue`` …) and **span events** with timestamps (Triton's
``QUEUE_START`` … ``COMPUTE_END``). A :class:`DerivedRule` turns either of the last two into
a stage; :func:`derive` applies the rules to the spans of one export request and returns one
:class:`Derived` interval per stage found, which ingest stores as a synthetic child span of
the span it was read from (flagged derived), so that every fold downstream (sketches, exact
counts, stage shares, compare, cohorts, SLOs, alerts) takes it like any other stage. Being a
child inside its parent, a derived stage is subtracted from the parent's self time: the
budget breakdown never counts the two twice.

Placement: a duration attribute says how long, not when. The attribute stages of one span
are laid end to end from the span's start, in rule order (vLLM's span starts at the request's
arrival, and queue, prefill and decode follow each other). An event stage runs from the first
``start_event`` on a span to the first ``end_event`` at or after it on that span or a span
below it. Only the spans of one export request are searched: an SDK's batch exporter sends a
trace's spans from one process together as a rule, but an end event whose span arrives in a
later request is not found, and the stage is not derived; nor is one further than
:data:`MAX_SEARCHED` spans into the search.

Bounds: a derived stage or measure lies within the span it is read from; one that would not
(a duration longer than the span, an event stamped outside it) is not derived, so that a
broken or hostile attribute cannot store a row in another day or overflow a column. A
duration is allowed :data:`SLACK_NS` past the span's end, where float seconds round, and is
then cut at the end.

**Measures** (:data:`MEASURES`) are figures of a whole LLM request that overlap its stages
(time to first token spans queue and prefill): they are folded into sketches like stages, but
the budget breakdown leaves them out. Each carries its source's definition.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

Unit = Literal["s", "ms", "us", "ns"]
NS_PER_UNIT: Final[Mapping[str, int]] = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
TIME_TO_FIRST_TOKEN: Final = "time_to_first_token"  # noqa: S105 - a stage name
TIME_PER_OUTPUT_TOKEN: Final = "time_per_output_token"  # noqa: S105 - a stage name
MEASURES: Final = frozenset({TIME_TO_FIRST_TOKEN, TIME_PER_OUTPUT_TOKEN})
"""Stage names that are measures, not stages of the budget."""
DERIVED_ATTRIBUTE: Final = "latencyboard.derived"
"""The attribute of a derived row saying where it was read from."""
MEASURE_ATTRIBUTE: Final = "latencyboard.measure"
"""The attribute of a measure row giving its definition."""
INPUT_BAND: Final = "input_tokens.band"
OUTPUT_BAND: Final = "output_tokens.band"
BAND_ATTRIBUTES: Final = (INPUT_BAND, OUTPUT_BAND)
"""Token-count bands (powers of two) added to LLM spans: cohort attributes of every pipeline."""
MAX_SEARCHED: Final = 64
"""Spans an event stage's end is looked for on: its own and the nearest below it."""
SLACK_NS: Final = 1000


@dataclass(frozen=True, slots=True)
class DerivedRule:
    """Stage ``stage`` is the duration in ``attribute`` (in ``unit``), or runs from event
    ``start_event`` to event ``end_event``."""

    stage: str
    attribute: str = ""
    unit: Unit = "s"
    start_event: str = ""
    end_event: str = ""

    @property
    def source(self) -> str:
        """Where the stage is read from, in words."""
        if self.attribute:
            return f"attribute {self.attribute} ({self.unit})"
        return f"events {self.start_event} → {self.end_event}"


def _events(stage: str, start: str, end: str) -> DerivedRule:
    return DerivedRule(stage, start_event=start, end_event=end)


PRESETS: Final[Mapping[str, tuple[DerivedRule, ...]]] = {
    # vLLM (vllm/tracing.py SpanAttributes) and SGLang: float seconds on ``llm_request``.
    "vLLM / SGLang": (
        DerivedRule("queue", "gen_ai.latency.time_in_queue"),
        DerivedRule("prefill", "gen_ai.latency.time_in_model_prefill"),
        DerivedRule("decode", "gen_ai.latency.time_in_model_decode"),
    ),
    # Triton (docs/user_guide/trace.md, mode=opentelemetry): QUEUE_START on the model span,
    # COMPUTE_* on its ``compute`` child.
    "Triton": (
        _events("queue", "QUEUE_START", "COMPUTE_START"),
        _events("compute_input", "COMPUTE_START", "COMPUTE_INPUT_END"),
        _events("compute_infer", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"),
        _events("compute_output", "COMPUTE_OUTPUT_START", "COMPUTE_END"),
    ),
}
PRESET_RULES: Final = tuple(rule for rules in PRESETS.values() for rule in rules)


def effective_rules(own: Sequence[DerivedRule], presets: bool) -> tuple[DerivedRule, ...]:
    """A pipeline's rules: its own, then (when ``presets``) the presets' for stages it does
    not define itself: a rule of its own for ``queue`` replaces both presets' ``queue``."""
    if not presets:
        return tuple(own)
    mine = {rule.stage for rule in own}
    return (*own, *(rule for rule in PRESET_RULES if rule.stage not in mine))


# --- LLM measures -------------------------------------------------------------------------------

_INPUT_TOKENS: Final = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "llm.usage.prompt_tokens",
)
_OUTPUT_TOKENS: Final = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "llm.usage.completion_tokens",
)


class _Ttft(NamedTuple):
    attribute: str
    definition: str
    server: bool  # the span has the server's decode time too


_TTFT_SOURCES: Final = (
    _Ttft(
        "gen_ai.latency.time_to_first_token",
        "server: request arrival to first output token, queue and prefill included "
        "(vLLM / SGLang gen_ai.latency.time_to_first_token)",
        True,
    ),
    _Ttft(
        "gen_ai.response.time_to_first_chunk",
        "client: request sent to first response chunk, network and server queue included "
        "(OTel GenAI gen_ai.response.time_to_first_chunk)",
        False,
    ),
)
_SERVER_DECODE: Final = "gen_ai.latency.time_in_model_decode"
TPOT_DEFINITIONS: Final = {
    True: "decode time / (output tokens - 1) (vLLM / SGLang gen_ai.latency.time_in_model_decode)",
    False: "(span duration - time to first chunk) / (output tokens - 1), as the client saw it",
}
TRIGGERS: Final = frozenset(
    {
        *_INPUT_TOKENS,
        *_OUTPUT_TOKENS,
        *(source.attribute for source in _TTFT_SOURCES),
        *(rule.attribute for rule in PRESET_RULES if rule.attribute),
    }
)
"""Attributes that make a span worth a look: any derivation needs one of them (or events)."""


def token_band(count: int) -> str:
    """The power-of-two band of a token count: ``0``, ``1``, ``2-3``, ``4-7`` …"""
    if count <= 1:
        return str(max(count, 0))
    low = 1 << (count.bit_length() - 1)
    return f"{low}-{2 * low - 1}"


def _number(attributes: Mapping[str, object], key: str) -> float | None:
    value = attributes.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _first(attributes: Mapping[str, object], keys: Iterable[str]) -> float | None:
    for key in keys:
        found = _number(attributes, key)
        if found is not None:
            return found
    return None


def token_bands(attributes: Mapping[str, object]) -> dict[str, str]:
    """The token bands of an LLM span's attributes (none when it has no token counts)."""
    bands = {}
    for band, keys in ((INPUT_BAND, _INPUT_TOKENS), (OUTPUT_BAND, _OUTPUT_TOKENS)):
        count = _first(attributes, keys)
        if count is not None:
            bands[band] = token_band(int(count))
    return bands


# --- derivation ---------------------------------------------------------------------------------


class SpanView(NamedTuple):
    """What derivation reads of a span."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes | None
    start_ns: int
    end_ns: int
    attributes: Mapping[str, object]  # its whole attribute set
    events: Sequence[tuple[int, str]]  # (Unix ns, name), oldest first


class Derived(NamedTuple):
    """A stage or measure read from span ``anchor`` (an index into the spans given)."""

    anchor: int
    stage: str
    start_ns: int
    end_ns: int
    source: str  # where it was read from (derived stage) or its definition (measure)
    measure: bool

    def span_id(self, anchor_span_id: bytes) -> bytes:
        """A span id for the derived row, the same for the same span and stage (so that a
        retried export stores it once), never all zero."""
        digest = hashlib.blake2b(anchor_span_id + self.stage.encode(), digest_size=8).digest()
        return digest if any(digest) else b"\x00" * 7 + b"\x01"


def derive(
    spans: Sequence[SpanView], rules: Sequence[DerivedRule], measures: bool
) -> list[Derived]:
    """The stages (and, with ``measures``, the LLM measures) of ``spans``, one export
    request's spans of one pipeline rule set."""
    found: list[Derived] = []
    attribute_rules = [rule for rule in rules if rule.attribute]
    event_rules = [rule for rule in rules if not rule.attribute]
    children: dict[tuple[bytes, bytes], list[int]] | None = None
    for index, span in enumerate(spans):
        of_span: list[Derived] = []
        if attribute_rules:
            of_span.extend(_from_attributes(index, span, attribute_rules))
        if event_rules and span.events:
            if children is None:
                children = _children(spans)
            of_span.extend(_from_events(index, spans, event_rules, children))
        if measures:
            of_span.extend(_measures(index, span))
        found.extend(_within(span, of_span))
    return found


def _within(span: SpanView, found: Iterable[Derived]) -> Iterable[Derived]:
    """The first of ``found`` of each stage that lies in ``span`` (two rules for one stage
    would give two rows of one span id), an end up to :data:`SLACK_NS` past its end cut."""
    stages = set()
    for derived in found:
        end = derived.end_ns
        if span.end_ns < end <= span.end_ns + SLACK_NS:
            end = span.end_ns
        if derived.stage not in stages and span.start_ns <= derived.start_ns <= end <= span.end_ns:
            stages.add(derived.stage)
            yield derived._replace(end_ns=end)


def _ns(seconds: float, per_second: int, span: SpanView) -> int | None:
    """``seconds`` (of ``per_second`` ns) in ns; None when longer than ``span`` allows, so
    that no huge float is rounded."""
    ns = seconds * per_second
    return round(ns) if ns <= span.end_ns - span.start_ns + SLACK_NS else None


def _from_attributes(index: int, span: SpanView, rules: Sequence[DerivedRule]) -> list[Derived]:
    found: list[Derived] = []
    at = span.start_ns
    for rule in rules:
        seconds = _number(span.attributes, rule.attribute)
        duration = None if seconds is None else _ns(seconds, NS_PER_UNIT[rule.unit], span)
        if duration is None or any(d.stage == rule.stage for d in found):
            continue
        found.append(Derived(index, rule.stage, at, at + duration, rule.source, False))
        at += duration
    return found


def _children(spans: Sequence[SpanView]) -> dict[tuple[bytes, bytes], list[int]]:
    children: dict[tuple[bytes, bytes], list[int]] = {}
    for index, span in enumerate(spans):
        if span.parent_span_id is not None:
            children.setdefault((span.trace_id, span.parent_span_id), []).append(index)
    return children


def _first_event(span: SpanView, name: str, after: int) -> int | None:
    for time_ns, event in span.events:
        if event == name and time_ns >= after:
            return time_ns
    return None


def _from_events(
    index: int,
    spans: Sequence[SpanView],
    rules: Sequence[DerivedRule],
    children: Mapping[tuple[bytes, bytes], list[int]],
) -> list[Derived]:
    span = spans[index]
    found = []
    for rule in rules:
        start = _first_event(span, rule.start_event, -(2**63))
        if start is None:
            continue
        # This span first, then the spans below it, breadth first; each span once, and no
        # more than MAX_SEARCHED of them (a request may hold a chain of thousands).
        queue, seen, end = deque([index]), {index}, None
        while queue and end is None:
            current = queue.popleft()
            end = _first_event(spans[current], rule.end_event, start)
            for child in children.get((span.trace_id, spans[current].span_id), ()):
                if child not in seen and len(seen) < MAX_SEARCHED:
                    seen.add(child)
                    queue.append(child)
        if end is not None:
            found.append(Derived(index, rule.stage, start, end, rule.source, False))
    return found


def _measures(index: int, span: SpanView) -> list[Derived]:
    attributes = span.attributes
    source = next((s for s in _TTFT_SOURCES if _number(attributes, s.attribute) is not None), None)
    if source is None:
        return []
    ttft = _ns(_number(attributes, source.attribute), 10**9, span)  # type: ignore[arg-type]
    if ttft is None:
        return []
    first_token = span.start_ns + ttft
    found = [
        Derived(index, TIME_TO_FIRST_TOKEN, span.start_ns, first_token, source.definition, True)
    ]
    output = _first(attributes, _OUTPUT_TOKENS)
    decode_s = _number(attributes, _SERVER_DECODE) if source.server else None
    decode = _ns(decode_s, 10**9, span) if decode_s is not None else span.end_ns - first_token
    if output is not None and output >= 2 and decode is not None and decode >= 0:
        per_token = round(decode / (output - 1))
        found.append(
            Derived(
                index,
                TIME_PER_OUTPUT_TOKEN,
                first_token,
                first_token + per_token,
                TPOT_DEFINITIONS[source.server],
                True,
            )
        )
    return found

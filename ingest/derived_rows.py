"""Span rows of the stages and measures derived from one export request's spans.

:func:`latencyboard.pipelines.derivation.derive` finds them; this module stores each as a
synthetic child span of the span it was read from: same trace, a span id of its own (the same
on a retried export, so it is stored once), that span as parent, the stage as name, never a
root. Its attributes are its parent's own, less what it was derived from, plus
``latencyboard.derived`` (where it was read from) or ``latencyboard.measure`` (its
definition): it falls in the parent's cohorts (model version, token bands) and the waterfall
can tell it from a real span.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ingest.decoding import DecodedSpan
from latencyboard.pipelines import derivation, mapping
from latencyboard.storage import pipelines, spans_copy

_INTERNAL = 1  # SpanKind
# What it was derived from, and ids of the request (its parent has them).
_LEFT_OUT = derivation.TRIGGERS | {"inference.stage", "gen_ai.request.id", "gen_ai.response.id"}


class Lookups(NamedTuple):
    """The writer's dictionaries: a stage id by (pipeline, name, definition) and a span's
    template id and own attributes by (resource, name, attributes)."""

    stage: Callable[[int, str, str], int]
    template: Callable[[int, str, dict[str, object]], tuple[int, dict[str, object]]]


@dataclass(frozen=True, slots=True)
class PipelineRules:
    """How a pipeline's spans are put in stages: mapping rules and cap, derived stage rules,
    and the attributes and event names that make a span worth a derivation look."""

    mapping: list[mapping.CompiledRule]
    cap: int
    derived: tuple[derivation.DerivedRule, ...]
    keys: frozenset[str]
    measures: bool
    starts: frozenset[str] = frozenset()  # start events of its event rules

    def by_events(self, span: DecodedSpan) -> bool:
        """Whether ``span`` has an event some rule starts a stage at."""
        starts = self.starts
        return bool(starts) and any(event.name in starts for event in span.events)

    @classmethod
    def of(cls, stored: pipelines.StageRules, default_cap: int) -> PipelineRules:
        own = [derivation.DerivedRule(*row) for row in stored.derived]  # type: ignore[arg-type]
        derived = derivation.effective_rules(own, stored.presets)
        keys = frozenset(rule.attribute for rule in derived if rule.attribute)
        return cls(
            [mapping.Rule(*row).compiled() for row in stored.mapping],
            default_cap if stored.cap is None else stored.cap,
            derived,
            keys | derivation.TRIGGERS if stored.presets else keys,
            stored.presets,
            frozenset(rule.start_event for rule in derived if not rule.attribute),
        )


def _view(span: DecodedSpan) -> derivation.SpanView:
    return derivation.SpanView(
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.start_ns,
        span.end_ns,
        span.attributes,
        [(event.time_ns, event.name) for event in span.events],
    )


def encode(
    team_id: int,
    spans: Sequence[DecodedSpan],
    looked: Mapping[int, tuple[PipelineRules, Sequence[int]]],
    resource_of: Callable[[DecodedSpan], int],
    lookups: Lookups,
) -> list[bytes]:
    """The rows derived from ``spans``: for each pipeline in ``looked``, from the spans at
    the indexes given, with its rules; ``resource_of`` gives a span's resource id."""
    rows = []
    for pipeline_id, (rules, indexes) in looked.items():
        views = [_view(spans[i]) for i in indexes]
        for found in derivation.derive(views, rules.derived, rules.measures):
            parent = spans[indexes[found.anchor]]
            attributes = {k: v for k, v in parent.attributes.items() if k not in _LEFT_OUT}
            flag = derivation.MEASURE_ATTRIBUTE if found.measure else derivation.DERIVED_ATTRIBUTE
            attributes[flag] = found.source
            template_id, own = lookups.template(resource_of(parent), found.stage, attributes)
            rows.append(
                spans_copy.encode_span(
                    team_id,
                    pipeline_id,
                    lookups.stage(pipeline_id, found.stage, found.source),
                    template_id,
                    parent.trace_id,
                    found.span_id(parent.span_id),
                    parent.span_id,
                    _INTERNAL,
                    0,
                    "",
                    found.start_ns,
                    max(0, found.end_ns - found.start_ns),
                    False,
                    own,
                )
            )
    return rows

"""Which stage a span belongs to (pure: no Django).

Order of precedence: the span's ``inference.stage`` attribute, then the pipeline's mapping rules
in order, then the span name. A per-pipeline cap on distinct stages protects the rollup tables
from cardinality explosions (span names with ids in them); past the cap, new names map to
``OVERFLOW_STAGE``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

OVERFLOW_STAGE = "other"
END_TO_END = "end-to-end"
"""The series of a pipeline's root spans, whole requests: its name in answers, and the token
that asks for it where a stage id is expected (``stages=end-to-end,12``)."""
MAX_STAGE_NAME = 100
DEFAULT_STAGE_CAP = 32


@dataclass(frozen=True, slots=True)
class Rule:
    """Maps spans to ``stage`` when the name pattern and/or the attribute pattern match.

    ``name_pattern`` is a regular expression matched (``re.search``) against the span name;
    ``attribute``/``value_pattern`` match a span attribute's string form. Empty parts match all.
    """

    stage: str
    name_pattern: str = ""
    attribute: str = ""
    value_pattern: str = ""

    def compiled(self) -> CompiledRule:
        return CompiledRule(
            stage=self.stage,
            name=re.compile(self.name_pattern) if self.name_pattern else None,
            attribute=self.attribute,
            value=re.compile(self.value_pattern) if self.value_pattern else None,
        )


@dataclass(frozen=True, slots=True)
class CompiledRule:
    stage: str
    name: re.Pattern[str] | None
    attribute: str
    value: re.Pattern[str] | None

    def matches(self, span_name: str, attributes: Mapping[str, object]) -> bool:
        if self.name is not None and not self.name.search(span_name):
            return False
        if self.attribute:
            if self.attribute not in attributes:
                return False
            if self.value is not None and not self.value.search(str(attributes[self.attribute])):
                return False
        return True


def resolve_stage(
    span_name: str,
    stage_attribute: str | None,
    attributes: Mapping[str, object],
    rules: Sequence[CompiledRule],
) -> str:
    """The stage name for one span, before the cardinality cap."""
    if stage_attribute:
        return stage_attribute[:MAX_STAGE_NAME]
    for rule in rules:
        if rule.matches(span_name, attributes):
            return rule.stage
    return span_name[:MAX_STAGE_NAME] or "unnamed"


def apply_cap(stage: str, known: frozenset[str] | set[str], cap: int) -> str:
    """``stage`` itself if already known or there is room under ``cap``, else the overflow."""
    if stage in known or len(known) < cap:
        return stage
    return OVERFLOW_STAGE

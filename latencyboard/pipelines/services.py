"""Changes to how a pipeline's spans are put in stages: its derived stage rules and presets.

Ingest reads them again within ``ingest.directories.DICTIONARY_TTL`` seconds; spans stored before
keep the stages they were given.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from latencyboard.pipelines.models import DerivedStageRule, Pipeline


def set_presets(pipeline: Pipeline, on: bool) -> bool:
    """Turn the pipeline's presets on or off; whether this changed anything."""
    changed = Pipeline.objects.filter(pk=pipeline.pk).exclude(stage_presets=on)
    return bool(changed.update(stage_presets=on))


@transaction.atomic
def add_derived_rule(pipeline: Pipeline, rule: DerivedStageRule) -> DerivedStageRule:
    """Store ``rule`` (validated) as the pipeline's last derived stage rule."""
    last = DerivedStageRule.objects.select_for_update().filter(pipeline=pipeline)
    position = last.aggregate(last=Max("position"))["last"]
    rule.pipeline = pipeline
    rule.position = 0 if position is None else position + 1
    rule.save()
    return rule


def delete_derived_rule(pipeline: Pipeline, rule_id: int) -> DerivedStageRule | None:
    """Delete the pipeline's rule ``rule_id``; the rule, or None when it has no such rule."""
    rule = DerivedStageRule.objects.filter(pipeline=pipeline, pk=rule_id).first()
    if rule is None:
        return None
    rule.delete()
    return rule

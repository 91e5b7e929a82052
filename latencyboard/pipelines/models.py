from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import models

from latencyboard.pipelines import derivation, mapping
from latencyboard.teams.models import Role, Team
from latencyboard.teams.queries import teams_of

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


class PipelineQuerySet(models.QuerySet["Pipeline"]):
    def visible_to(self, user: User | AnonymousUser, *roles: Role) -> PipelineQuerySet:
        """The access rule: the pipelines of ``user``'s teams (those where ``user`` has one of
        ``roles``, when given); none for anonymous users. Every page, API, socket and task
        that reads a pipeline for a user starts here, so another team's pipeline is exactly
        as missing as one that never existed."""
        return self.filter(team__in=teams_of(user, *roles))


class Pipeline(models.Model):
    """What a team watches: one ``service.name`` in one deployment environment."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="pipelines")
    service_name = models.CharField(max_length=255)
    environment = models.CharField(max_length=100, blank=True, default="")
    stage_cap = models.PositiveIntegerField(
        default=mapping.DEFAULT_STAGE_CAP,
        help_text=f"Distinct stages kept; spans of further stages count as "
        f"'{mapping.OVERFLOW_STAGE}'.",
    )
    stage_presets = models.BooleanField(
        default=True,
        db_default=True,  # ingest creates pipelines in SQL
        help_text="Recognise vLLM / SGLang, Triton and LLM spans with no configuration "
        "(stages from their attributes and events, LLM measures, token bands).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PipelineQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "service_name", "environment"], name="pipeline_identity_unique"
            )
        ]
        ordering = ["service_name", "environment"]

    def __str__(self) -> str:
        return (
            f"{self.service_name} ({self.environment})" if self.environment else self.service_name
        )


class StageQuerySet(models.QuerySet["Stage"]):
    def visible_to(self, user: User | AnonymousUser, *roles: Role) -> StageQuerySet:
        """The stages of the pipelines :meth:`PipelineQuerySet.visible_to` ``user``."""
        return self.filter(pipeline__in=Pipeline.objects.visible_to(user, *roles))


class Stage(models.Model):
    """A step of a pipeline (``model_forward``, ``queue_wait``…): a dictionary row for spans."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="stages")
    name = models.CharField(max_length=mapping.MAX_STAGE_NAME)
    definition = models.CharField(
        max_length=300,
        blank=True,
        default="",
        db_default="",  # ingest creates stages in SQL
        help_text="Where a derived stage is read from, or a measure's definition; empty for "
        "stages of child spans.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StageQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pipeline", "name"], name="stage_pipeline_name_unique")
        ]
        ordering = ["pipeline", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def kind(self) -> str:
        """``measure`` (an LLM figure outside the budget), ``derived`` (read from a span's
        attributes or events) or ``span`` (child spans)."""
        if self.name in derivation.MEASURES:
            return "measure"
        return "derived" if self.definition else "span"


def _validate_regex(value: str) -> None:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValidationError(f"Not a valid regular expression: {exc}") from exc


class StageRule(models.Model):
    """Maps spans without an ``inference.stage`` attribute to a stage, first match wins."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="stage_rules")
    position = models.PositiveIntegerField(default=0)
    stage = models.CharField(max_length=mapping.MAX_STAGE_NAME)
    name_pattern = models.CharField(
        max_length=255, blank=True, validators=[_validate_regex], help_text="Regex on span name"
    )
    attribute = models.CharField(max_length=255, blank=True, help_text="Span attribute key")
    value_pattern = models.CharField(
        max_length=255,
        blank=True,
        validators=[_validate_regex],
        help_text="Regex on the attribute's value",
    )

    class Meta:
        ordering = ["pipeline", "position", "id"]

    def __str__(self) -> str:
        return f"→ {self.stage}"

    def clean(self) -> None:
        if not (self.name_pattern or self.attribute):
            raise ValidationError("A rule needs a name pattern or an attribute to match.")


class DerivedStageRule(models.Model):
    """A stage read from one span's attributes or events (see
    :mod:`latencyboard.pipelines.derivation`): the duration in ``attribute``, or the time
    from event ``start_event`` to event ``end_event``. A rule for a stage replaces the
    presets' rules for that stage."""

    pipeline = models.ForeignKey(
        Pipeline, on_delete=models.CASCADE, related_name="derived_stage_rules"
    )
    position = models.PositiveIntegerField(default=0)
    stage = models.CharField(max_length=mapping.MAX_STAGE_NAME)
    attribute = models.CharField(
        max_length=255, blank=True, help_text="Span attribute holding a duration"
    )
    unit = models.CharField(
        max_length=2,
        choices=[
            ("s", "seconds"),
            ("ms", "milliseconds"),
            ("us", "microseconds"),
            ("ns", "nanoseconds"),
        ],
        default="s",
    )
    start_event = models.CharField(max_length=255, blank=True, help_text="Span event name")
    end_event = models.CharField(
        max_length=255, blank=True, help_text="Span event name, on this span or one below it"
    )

    class Meta:
        ordering = ["pipeline", "position", "id"]

    def __str__(self) -> str:
        return f"{self.stage} ← {self.as_rule().source}"

    def clean(self) -> None:
        by_attribute = bool(self.attribute)
        by_events = bool(self.start_event or self.end_event)
        if by_attribute == by_events:
            raise ValidationError("A rule reads either a duration attribute or two events.")
        if by_events and not (self.start_event and self.end_event):
            raise ValidationError("An event rule needs a start event and an end event.")
        if self.stage in derivation.MEASURES:
            raise ValidationError({"stage": f"{self.stage} is a measure, not a stage."})

    def as_rule(self) -> derivation.DerivedRule:
        return derivation.DerivedRule(
            stage=self.stage,
            attribute=self.attribute,
            unit=self.unit,  # type: ignore[arg-type]
            start_event=self.start_event,
            end_event=self.end_event,
        )


DEFAULT_COHORT_ATTRIBUTES = ("model.version", "service.version")
"""Cohort attributes of every pipeline: what changes with a deployment."""
LLM_COHORT_ATTRIBUTES = derivation.BAND_ATTRIBUTES
"""Cohort attributes of LLM pipelines too: the input- and output-token bands ingest gives LLM
spans, so that "answers got longer" is told from "decode got slower". Folded for every
pipeline (spans without them cost nothing), offered where a pipeline has LLM measures."""
FOLDED_COHORT_ATTRIBUTES = (*DEFAULT_COHORT_ATTRIBUTES, *LLM_COHORT_ATTRIBUTES)
MAX_EXTRA_COHORT_ATTRIBUTES = 3
"""Cohort attributes a pipeline may add to the defaults: each multiplies its rollup rows."""


class CohortAttribute(models.Model):
    """A span attribute (``cache_hit``, ``gpu.type``…) whose values get their own latency
    sketches in this pipeline, on top of :data:`DEFAULT_COHORT_ATTRIBUTES`.

    Spans are folded by the attributes configured when they are folded: adding one here
    answers questions about spans from then on, not about earlier ones.
    """

    pipeline = models.ForeignKey(
        Pipeline, on_delete=models.CASCADE, related_name="cohort_attributes"
    )
    key = models.CharField(max_length=255, help_text="Span attribute key, e.g. cache_hit")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pipeline", "key"], name="cohort_attribute_unique")
        ]
        ordering = ["key"]

    def __str__(self) -> str:
        return f"{self.pipeline}: {self.key}"

    def clean(self) -> None:
        if self.key in DEFAULT_COHORT_ATTRIBUTES:
            raise ValidationError({"key": f"{self.key} is a cohort attribute of every pipeline."})


def cohort_attributes(pipeline: Pipeline) -> list[str]:
    """The attributes whose values have their own sketches in this pipeline."""
    extra = [
        key
        for key in pipeline.cohort_attributes.values_list("key", flat=True)
        if key not in LLM_COHORT_ATTRIBUTES
    ]
    llm = pipeline.stages.filter(name__in=derivation.MEASURES).exists()
    return [*DEFAULT_COHORT_ATTRIBUTES, *(LLM_COHORT_ATTRIBUTES if llm else ()), *extra]

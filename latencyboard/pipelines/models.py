from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import models

from latencyboard.pipelines import mapping
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
    def visible_to(self, user: User | AnonymousUser) -> StageQuerySet:
        """The stages of the pipelines :meth:`PipelineQuerySet.visible_to` ``user``."""
        return self.filter(pipeline__in=Pipeline.objects.visible_to(user))


class Stage(models.Model):
    """A step of a pipeline (``model_forward``, ``queue_wait``…): a dictionary row for spans."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="stages")
    name = models.CharField(max_length=mapping.MAX_STAGE_NAME)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StageQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pipeline", "name"], name="stage_pipeline_name_unique")
        ]
        ordering = ["pipeline", "id"]

    def __str__(self) -> str:
        return self.name


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

    def as_rule(self) -> mapping.Rule:
        return mapping.Rule(
            stage=self.stage,
            name_pattern=self.name_pattern,
            attribute=self.attribute,
            value_pattern=self.value_pattern,
        )


DEFAULT_COHORT_ATTRIBUTES = ("model.version", "service.version")
"""Cohort attributes of every pipeline: what changes with a deployment."""
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
    extra = pipeline.cohort_attributes.values_list("key", flat=True)
    return [*DEFAULT_COHORT_ATTRIBUTES, *extra]

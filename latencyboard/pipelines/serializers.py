"""JSON shape of pipelines in the REST API."""

from __future__ import annotations

from rest_framework import serializers

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Team


class TeamRefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["id", "name", "slug"]


class StageRefSerializer(serializers.ModelSerializer):
    kind = serializers.ChoiceField(
        choices=["span", "derived", "measure"],
        read_only=True,
        help_text="span: child spans; derived: read from a span's attributes or events; "
        "measure: an LLM figure beside the stages (time to first token, time per output "
        "token), not part of the latency budget.",
    )

    class Meta:
        model = Stage
        fields = ["id", "name", "kind", "definition"]


class PipelineSerializer(serializers.ModelSerializer):
    """A pipeline with its team and stages (ids as the percentiles API takes them)."""

    name = serializers.CharField(
        source="__str__", read_only=True, help_text="Service name (and environment)."
    )
    team = TeamRefSerializer(read_only=True)
    stages = StageRefSerializer(many=True, read_only=True)

    class Meta:
        model = Pipeline
        fields = ["id", "name", "service_name", "environment", "team", "stages"]

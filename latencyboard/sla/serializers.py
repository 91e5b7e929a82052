"""Input and output shapes of the SLA API."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from latencyboard import bounds
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla import attainment as maths
from latencyboard.sla.models import (
    MAINTENANCE_REASON_MAX_LENGTH,
    Coverage,
    MaintenanceWindow,
    Objective,
    Window,
)


class ObjectiveSerializer(serializers.ModelSerializer[Objective]):
    class Meta:
        model = Objective
        fields = [
            "id",
            "team",
            "pipeline",
            "stage",
            "name",
            "threshold_ms",
            "target_percent",
            "window",
            "created_at",
        ]
        read_only_fields = fields


class _MyPipelineField(serializers.PrimaryKeyRelatedField[Pipeline]):
    """A pipeline of one of the requesting user's teams; others read as nonexistent."""

    def get_queryset(self) -> QuerySet[Pipeline]:
        return Pipeline.objects.visible_to(self.context["request"].user)


class _MyStageField(serializers.PrimaryKeyRelatedField[Stage]):
    """A stage of one of the requesting user's teams' pipelines; others read as nonexistent."""

    def get_queryset(self) -> QuerySet[Stage]:
        return Stage.objects.visible_to(self.context["request"].user)


class ObjectiveCreateSerializer(serializers.Serializer[Objective]):
    """A new objective; its team is the pipeline's."""

    pipeline = _MyPipelineField(queryset=Pipeline.objects.all())
    stage = _MyStageField(
        queryset=Stage.objects.all(),
        allow_null=True,
        required=False,
        default=None,
        help_text="Empty for end-to-end latency (the pipeline's root spans).",
    )
    name = serializers.CharField(max_length=200)
    # Whole nanoseconds at most (6 decimals), so the database's ``duration_ns <= threshold``
    # and the rollup worker's float comparison agree; 15 digits stay below 2**52 ns.
    threshold_ms = serializers.DecimalField(
        max_digits=15, decimal_places=6, min_value=Decimal("0.000001")
    )
    target_percent = serializers.DecimalField(
        max_digits=6, decimal_places=3, min_value=Decimal("0.001"), max_value=Decimal(100)
    )
    window = serializers.ChoiceField(choices=Window.choices, default=Window.ROLLING_28D)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        stage = attrs.get("stage")
        if stage is not None and stage.pipeline_id != attrs["pipeline"].pk:
            raise serializers.ValidationError({"stage": "Not a stage of this pipeline."})
        return attrs


_WINDOW_PARAMS = {"28d": maths.ROLLING_28D, "month": maths.CALENDAR_MONTH}


class AttainmentQuerySerializer(serializers.Serializer[Any]):
    """``start`` and ``end``, or ``window``; neither means the objective's own window.

    Needs ``now`` and ``default_window`` in its context.
    """

    start = bounds.MomentField(required=False)
    end = bounds.MomentField(required=False)
    window = serializers.ChoiceField(choices=list(_WINDOW_PARAMS), required=False)
    step = bounds.DurationField(
        default=dt.timedelta(hours=1),
        help_text="Whole minutes, in seconds (3600) or ISO 8601 (PT1H); default one hour.",
    )

    def validate_step(self, step: dt.timedelta) -> dt.timedelta:
        if step < maths.MINUTE or step % maths.MINUTE:
            raise serializers.ValidationError("Must be a whole number of minutes.")
        return step

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if bounds.given_window(attrs, window="window" in attrs) is None:
            kind = _WINDOW_PARAMS.get(attrs.get("window", ""), self.context["default_window"])
            window = maths.objective_window(kind, self.context["now"])
            attrs["start"], attrs["end"] = window.start, window.end
        start = maths.floor_minute(attrs["start"])
        end = maths.floor_minute(attrs["end"])
        if end <= start:
            raise serializers.ValidationError({"end": "Must be at least a minute after start."})
        if maths.bucket_count(start, end, attrs["step"]) > maths.MAX_BUCKETS:
            raise serializers.ValidationError(
                {"step": f"Too small for this range: at most {maths.MAX_BUCKETS} steps."}
            )
        attrs["start"], attrs["end"] = start, end
        return attrs


class BucketSerializer(serializers.Serializer[maths.Bucket]):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    good = serializers.IntegerField()
    total = serializers.IntegerField()
    attainment_percent = serializers.FloatField(allow_null=True)


class WindowSerializer(serializers.Serializer[maths.Window]):
    # Not a ChoiceField: the same choices as Objective.window would be a second enum.
    kind = serializers.CharField(help_text="The objective's window: rolling_28d or calendar_month.")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class BudgetSerializer(serializers.Serializer[maths.Budget]):
    good = serializers.IntegerField()
    total = serializers.IntegerField()
    bad = serializers.IntegerField()
    target_percent = serializers.DecimalField(max_digits=6, decimal_places=3)
    attainment_percent = serializers.FloatField(
        allow_null=True, help_text="Empty when nothing was counted."
    )
    met = serializers.BooleanField(allow_null=True, help_text="Empty when nothing was counted.")
    allowed_bad = serializers.DecimalField(
        max_digits=30, decimal_places=5, help_text="(1 - target) * total, exactly."
    )
    remaining_bad = serializers.DecimalField(
        max_digits=30, decimal_places=5, help_text="Negative once the budget is overspent."
    )
    consumed_percent = serializers.FloatField(
        allow_null=True, help_text="Empty when there is no budget (nothing counted, 100% target)."
    )
    remaining_percent = serializers.FloatField(allow_null=True)


class BudgetPointSerializer(serializers.Serializer[maths.BudgetPoint]):
    at = serializers.DateTimeField()
    good = serializers.IntegerField(help_text="Since the series' start.")
    total = serializers.IntegerField(help_text="Since the series' start.")
    remaining_percent = serializers.FloatField(
        allow_null=True, help_text="Empty until something was counted, or for a 100% target."
    )


class MinuteRangeSerializer(serializers.Serializer[maths.MinuteRange]):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class CountsSerializer(serializers.Serializer[maths.Counts]):
    good = serializers.IntegerField()
    total = serializers.IntegerField()


class AttainmentSeriesSerializer(serializers.Serializer[maths.AttainmentSeries]):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step_seconds = serializers.SerializerMethodField()
    buckets = BucketSerializer(many=True, help_text="Maintenance minutes left out.")
    burn_down = BudgetPointSerializer(
        many=True,
        help_text="Error budget left at the end of each step, counted from start; over the "
        "objective's window (the default range) its last point is the summary.",
    )
    maintenance = MinuteRangeSerializer(
        many=True,
        help_text="Minutes of [start, end) left out for maintenance: those starting inside "
        "a maintenance window, merged into ranges.",
    )
    window = WindowSerializer()
    summary = BudgetSerializer(help_text="The window without its maintenance minutes.")
    excluded = CountsSerializer(
        help_text="Requests of the window's maintenance minutes: summary plus excluded is "
        "the window with maintenance counted."
    )

    @extend_schema_field(OpenApiTypes.INT)
    def get_step_seconds(self, series: maths.AttainmentSeries) -> int:
        return series.step // dt.timedelta(seconds=1)


class MaintenanceWindowSerializer(serializers.ModelSerializer[MaintenanceWindow]):
    covers = serializers.ChoiceField(choices=Coverage.choices, read_only=True)
    created_by = serializers.SlugRelatedField[User](slug_field="username", read_only=True)
    deleted_by = serializers.SlugRelatedField[User](slug_field="username", read_only=True)

    class Meta:
        model = MaintenanceWindow
        fields = [
            "id",
            "covers",
            "objective",
            "pipeline",
            "start",
            "end",
            "reason",
            "created_by",
            "created_at",
            "deleted_by",
            "deleted_at",
        ]
        read_only_fields = fields


class MaintenanceWindowCreateSerializer(serializers.Serializer[MaintenanceWindow]):
    """A new maintenance window of the objective in the URL, or of its whole pipeline."""

    start = bounds.MomentField()
    end = bounds.MomentField(help_text="Exclusive.")
    reason = serializers.CharField(max_length=MAINTENANCE_REASON_MAX_LENGTH)
    covers = serializers.ChoiceField(choices=Coverage.choices, default=Coverage.OBJECTIVE)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["end"] <= attrs["start"]:
            raise serializers.ValidationError({"end": "Must be after the start."})
        return attrs

"""Input and output shapes of the SLA API."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from latencyboard import bounds
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.series_query import SeriesQuerySerializer, step_help
from latencyboard.sla import attainment as maths
from latencyboard.sla.models import (
    MAINTENANCE_REASON_MAX_LENGTH,
    Coverage,
    MaintenanceWindow,
    Objective,
    Window,
)
from latencyboard.windows import SECOND, floor_minute


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


_MONTH = "month"


class AttainmentQuerySerializer(SeriesQuerySerializer):
    """``start`` and ``end``, or ``window``; neither means the objective's own window. Read
    as every series endpoint reads them, then rounded down to whole minutes.

    Needs ``default_window`` (the objective's window kind) in its context.
    """

    window = serializers.CharField(  # type: ignore[assignment]
        required=False,
        help_text="Instead of start and end: `month` (this calendar month, UTC) or a "
        "duration ending now, like 24h or 28d (same syntax as step). Neither: the objective's "
        "own window.",
    )
    step = bounds.DurationTextField(
        default=dt.timedelta(hours=1),
        help_text=step_help("Whole minutes; default 1h."),
    )
    max_points = maths.MAX_BUCKETS
    # Exact counters summed per step in the database: a long window costs no more points.
    longest = None
    on_grid = False  # steps are aligned to start

    def validate_window(self, value: str) -> str | dt.timedelta:
        if value == _MONTH:
            return value
        return cast(dt.timedelta, bounds.DurationTextField().run_validation(value))

    def check_step(self, step: dt.timedelta) -> None:
        if step < maths.MINUTE or step % maths.MINUTE:
            raise ValueError("Must be a whole number of minutes.")

    def window_of(self, attrs: dict[str, Any], now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        nothing = not {"window", "start", "end"} & set(attrs)
        if attrs.get("window") != _MONTH and not nothing:
            return super().window_of(attrs, now)
        month = attrs.pop("window", None) is not None
        bounds.given_window(attrs, window=month)  # refuses month with start or end
        kind = maths.CALENDAR_MONTH if month else self.objective_window(attrs)
        period = maths.objective_window(kind, now)
        return period.start, period.end

    def objective_window(self, attrs: dict[str, Any]) -> str:
        """The objective's window kind, read when the request names no window."""
        window: str = self.context["default_window"]
        return window

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        start = floor_minute(attrs["start"])
        end = floor_minute(attrs["end"])
        if end <= start:
            raise serializers.ValidationError({"end": "Must be at least a minute after start."})
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
        return series.step // SECOND


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

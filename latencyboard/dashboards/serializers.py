"""Parameters and JSON shapes of the dashboards' data calls."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework import serializers

from latencyboard import bounds
from latencyboard.dashboards import bottleneck
from latencyboard.pipelines.mapping import END_TO_END
from latencyboard.rollups import tails
from latencyboard.rollups.queries import DEFAULT_QUANTILES
from latencyboard.series_query import SeriesQuerySerializer, step_help
from latencyboard.sla.models import Objective
from latencyboard.sla.serializers import AttainmentQuerySerializer


class WindowQuerySerializer(SeriesQuerySerializer):
    """A window (``start`` and ``end``, or ``window``, at most ``windows.MAX_SERIES_WINDOW``) and a
    ``step``, read as every series endpoint reads them."""

    step = bounds.DurationTextField(
        default=dt.timedelta(hours=1),
        help_text=step_help(
            "It must divide an hour, be whole hours dividing a day, or be whole days. Default 1h."
        ),
    )


class BottleneckQuerySerializer(WindowQuerySerializer):
    """A window and the ``step`` of the class's history: steps under an hour read minute
    rows, kept for days only, so they are for windows of at most a day."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if attrs["step"] < dt.timedelta(hours=1) and attrs["end"] - attrs["start"] > dt.timedelta(
            days=1
        ):
            raise serializers.ValidationError(
                {"step": ["A step under an hour is for windows of at most a day."]}
            )
        return attrs


class AttributeQuerySerializer(WindowQuerySerializer):
    """A window, the attribute ``key`` and the quantiles ``q``."""

    step = None  # type: ignore[assignment]
    key = serializers.CharField(
        required=False,
        max_length=255,
        help_text="Cohort attribute to break down by, e.g. model.version or cache_hit. "
        "Default: model.version.",
    )
    q = serializers.ListField(
        child=serializers.FloatField(min_value=0.0, max_value=1.0),
        default=list(DEFAULT_QUANTILES),
        max_length=10,
        help_text="Quantiles, repeated or comma-separated (q=0.5,0.99).",
    )

    def to_internal_value(self, data: Any) -> Any:
        # Accept q=0.5,0.99 as well as q=0.5&q=0.99.
        if hasattr(data, "getlist") and "q" in data:
            data = data.copy()
            data.setlist("q", [part for item in data.getlist("q") for part in item.split(",")])
        return super().to_internal_value(data)


class ObjectiveAttainmentQuerySerializer(AttainmentQuerySerializer):
    """The ``objective`` (one of the pipeline's, by id) and its attainment's window and step.

    Needs the ``pipeline`` in its context; validated data hold the objective.
    """

    objective = serializers.IntegerField(
        min_value=1, max_value=2**63 - 1, help_text="An SLA objective of this pipeline, by id."
    )

    def validate_objective(self, value: int) -> Objective:
        objective: Objective | None = self.context["pipeline"].objectives.filter(pk=value).first()
        if objective is None:
            raise serializers.ValidationError("Not an objective of this pipeline.")
        return objective

    def objective_window(self, attrs: dict[str, Any]) -> str:
        window: str = attrs["objective"].window
        return window


class _StageSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(allow_null=True, help_text=f"Null: end to end ({END_TO_END}).")
    name = serializers.CharField()


class StageFiguresSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="stage_id")
    name = serializers.CharField(source="stage")
    mean_self_ms_all = serializers.FloatField(help_text="Mean self time per request.")
    mean_self_ms_tail = serializers.FloatField(
        allow_null=True,
        help_text="Mean self time per request among the slowest 1% of the window (the "
        "requests above its p99); null when they are too few to be shown.",
    )
    share_all = serializers.FloatField(help_text="Share of all requests' self time, 0 to 1.")
    share_tail = serializers.FloatField(
        allow_null=True, help_text="Share of the slowest 1%'s self time; null as above."
    )
    mean_critical_ms_all = serializers.FloatField(
        allow_null=True,
        help_text="Mean time per request on its critical path (the spans it waited for: of "
        "parallel ones only the last to finish); null when `critical_shown` is false.",
    )
    mean_critical_ms_tail = serializers.FloatField(
        allow_null=True, help_text="The same among the slowest 1%; null as for both."
    )
    share_critical_all = serializers.FloatField(
        allow_null=True,
        help_text="Share of the requests' end-to-end time on the critical path, 0 to 1.",
    )
    share_critical_tail = serializers.FloatField(
        allow_null=True, help_text="The same among the slowest 1%; null as for both."
    )


class StageShareSeriesSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="stage_id")
    name = serializers.CharField(source="stage")
    share_all = serializers.ListField(child=serializers.FloatField(allow_null=True))
    share_tail = serializers.ListField(child=serializers.FloatField(allow_null=True))
    share_critical_all = serializers.ListField(
        child=serializers.FloatField(allow_null=True),
        help_text="Share of the critical paths' time; null where a bucket's rows predate "
        "critical paths.",
    )
    share_critical_tail = serializers.ListField(child=serializers.FloatField(allow_null=True))


class ShareSeriesSerializer(serializers.Serializer[Any]):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step_seconds = serializers.IntegerField()
    buckets = serializers.ListField(
        source="bucket_starts", child=serializers.DateTimeField(), help_text="Bucket starts."
    )
    stages = StageShareSeriesSerializer(many=True)


class StageBreakdownSerializer(serializers.Serializer[Any]):
    """Where the requests' time goes, over the whole window and bucket by bucket."""

    start = serializers.DateTimeField(source="summary.start")
    end = serializers.DateTimeField(source="summary.end")
    requests = serializers.IntegerField(source="summary.requests")
    tail_requests = serializers.IntegerField(
        source="summary.tail_requests", help_text="Requests above the window's p99."
    )
    p99_ms = serializers.FloatField(
        source="summary.p99_ms",
        allow_null=True,
        help_text="The window's end-to-end p99 (within 1%) the slowest 1% is above.",
    )
    tail_shown = serializers.BooleanField(
        source="summary.tail_shown",
        help_text=f"Whether the slowest 1% holds at least {tails.MIN_TAIL_REQUESTS} requests: "
        "fewer (a window of under some 1,000 requests) give no tail figures.",
    )
    mean_root_ms_all = serializers.FloatField(source="summary.mean_root_ms_all", allow_null=True)
    mean_root_ms_tail = serializers.FloatField(source="summary.mean_root_ms_tail", allow_null=True)
    critical_shown = serializers.BooleanField(
        source="summary.critical_shown",
        help_text="Whether the critical-path figures are given: false when the window has "
        "stage shares computed before critical paths were.",
    )
    stages = StageFiguresSerializer(source="summary.stages", many=True)
    series = ShareSeriesSerializer()


class MarkerSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField()
    attribute = serializers.CharField(help_text="service.version or model.version")
    value = serializers.CharField()
    kind = serializers.ChoiceField(choices=["appeared", "gone"])
    previous = serializers.CharField(
        allow_null=True, help_text="For an appearance: the value seen last before it."
    )


class DeploymentsSerializer(serializers.Serializer[Any]):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    markers = MarkerSerializer(many=True)


class AttributeGroupSerializer(serializers.Serializer[Any]):
    stage = _StageSerializer()
    value = serializers.CharField()
    n = serializers.IntegerField()
    error_rate = serializers.FloatField()
    quantiles_ms = serializers.ListField(
        child=serializers.FloatField(), help_text="Exact, one per quantile asked for."
    )


class AttributeBreakdownSerializer(serializers.Serializer[Any]):
    """Latency per value of a cohort attribute over the whole window."""

    key = serializers.CharField()
    cohort = serializers.BooleanField(
        help_text="Whether the key is a cohort attribute of the pipeline (else no values)."
    )
    keys = serializers.ListField(
        child=serializers.CharField(), help_text="The pipeline's cohort attributes."
    )
    other_keys = serializers.ListField(
        child=serializers.CharField(),
        help_text="Attribute keys of the newest spans that are not cohorts.",
    )
    add_url = serializers.CharField(
        allow_null=True, help_text="Where an admin adds cohort attributes; null for others."
    )
    start = serializers.DateTimeField(help_text="Rounded down to its minute.")
    end = serializers.DateTimeField(help_text="Rounded down to its minute.")
    spans = serializers.IntegerField(help_text="Spans of every value and stage (exact).")
    quantiles = serializers.ListField(child=serializers.FloatField())
    values = serializers.ListField(
        child=serializers.CharField(), help_text="The most frequent values, at most max_values."
    )
    max_values = serializers.IntegerField()
    groups = AttributeGroupSerializer(many=True)


class BottleneckChangeSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField(help_text="Start of the first bucket with the new class.")
    before = serializers.CharField(help_text="The class before, a value of `bottleneck`.")
    after = serializers.CharField(help_text="The class from `at` on, a value of `bottleneck`.")
    before_label = serializers.CharField()
    after_label = serializers.CharField()


class BottleneckSerializer(serializers.Serializer[Any]):
    """A pipeline's bottleneck class over the window, what justifies it, and its last change."""

    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step_seconds = serializers.SerializerMethodField(
        help_text="Bucket length of the history the change is looked for in."
    )
    bottleneck = serializers.ChoiceField(
        source="classification.bottleneck",
        choices=[b.value for b in bottleneck.Bottleneck],
        help_text="compute, feature, queue or network; balanced when no kind of work "
        "dominates; unclassified with too little data or a dominant stage of no known kind.",
    )
    # Declared fields leave the class body (DRF's metaclass), so this shadows no Field.label.
    label = serializers.CharField(source="classification.label")  # type: ignore[assignment]
    requests = serializers.IntegerField(source="classification.requests")
    stages = serializers.ListField(
        source="classification.stages",
        child=serializers.CharField(),
        help_text="The stages of the class, largest share of the slowest 1% first.",
    )
    share_tail = serializers.FloatField(
        source="classification.share_tail",
        allow_null=True,
        help_text="The class's share of the slowest 1%'s self time, 0 to 1 (the requests "
        "above the window's p99; null when they are too few to decide anything).",
    )
    share_all = serializers.FloatField(
        source="classification.share_all",
        allow_null=True,
        help_text="The class's share of all requests' self time, 0 to 1.",
    )
    decided_by = serializers.ChoiceField(
        source="classification.cohort",
        choices=["tail", "all"],
        allow_null=True,
        help_text="The requests whose shares decided: the slowest 1% (tail) or all.",
    )
    reason = serializers.CharField(source="classification.reason")
    remedies = serializers.ListField(
        source="classification.remedies", child=serializers.CharField()
    )
    change = BottleneckChangeSerializer(
        allow_null=True, help_text="The last change of class between buckets; null for none."
    )

    def get_step_seconds(self, instance: Any) -> int:
        return int(instance.step.total_seconds())

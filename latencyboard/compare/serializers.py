"""Parameters and JSON shape of the compare API."""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from rest_framework import serializers

from latencyboard import bounds
from latencyboard.compare.queries import Side
from latencyboard.stats import comparison
from latencyboard.windows import MAX_COMPARE_WINDOW, floor_minute

WINDOW_FIELDS: Final = ("a_start", "a_end", "b_start", "b_end")
_MAX_ID: Final = 2**63 - 1


class CompareQuerySerializer(serializers.Serializer):
    """Query parameters of ``GET /api/compare/``: two windows, or two values of an attribute
    in one window.

    Validated data: ``pipeline`` (id), ``a`` and ``b`` (:class:`Side`), ``attribute`` (the
    attribute key, None when comparing windows).
    """

    pipeline = serializers.IntegerField(
        min_value=1, max_value=_MAX_ID, help_text="Id of a pipeline of one of your teams."
    )
    a_start = bounds.MomentField(
        required=False,
        help_text="Windows mode: start of window A (ISO 8601, UTC unless an offset is given).",
    )
    a_end = bounds.MomentField(required=False, help_text="Windows mode: end of A (excl.).")
    b_start = bounds.MomentField(required=False, help_text="Windows mode: start of B.")
    b_end = bounds.MomentField(required=False, help_text="Windows mode: end of B (excl.).")
    start = bounds.MomentField(
        required=False,
        help_text="Attribute mode: start of the one window both sides share (or give "
        "a_start…b_end to compare the values over two windows).",
    )
    end = bounds.MomentField(
        required=False, help_text="Attribute mode: end of the window (exclusive)."
    )
    attr = serializers.CharField(
        required=False,
        max_length=255,
        help_text="Attribute mode: a cohort attribute of the pipeline, e.g. `model.version` "
        "(model.version, service.version and those added in the admin). Each span is "
        "matched on its own attributes, so stages whose spans lack it have no data.",
    )
    a = serializers.CharField(
        required=False, max_length=255, help_text="Attribute mode: the value of side A (`v7`)."
    )
    b = serializers.CharField(
        required=False, max_length=255, help_text="Attribute mode: the value of side B (`v8`)."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Windows are read as whole minutes: each moment is rounded down to its minute."""
        attribute = "attr" in attrs or "a" in attrs or "b" in attrs
        shared = "start" in attrs or "end" in attrs
        if shared and any(name in attrs for name in WINDOW_FIELDS):
            raise serializers.ValidationError(
                {
                    name: ["Give one shared window (start, end) or two (a_start…b_end), not both."]
                    for name in ("start", "end")
                    if name in attrs
                }
            )
        if shared and not attribute:
            attribute = True
        expected = [*(("start", "end") if shared else WINDOW_FIELDS)]
        if attribute:
            expected += ["attr", "a", "b"]
        missing = [name for name in expected if name not in attrs]
        if missing:
            mode = "two values of an attribute" if attribute else "two windows"
            raise serializers.ValidationError(
                {name: [f"Required to compare {mode}."] for name in missing}
            )
        if shared:
            windows = [(attrs["start"], attrs["end"], "end")] * 2
        else:
            windows = [(attrs["a_start"], attrs["a_end"], "a_end")]
            windows.append((attrs["b_start"], attrs["b_end"], "b_end"))
        sides = [_window(start, end, field) for start, end, field in windows]
        if attribute:
            if attrs["a"] == attrs["b"] and sides[0] == sides[1]:
                raise serializers.ValidationError({"b": ["Must differ from a."]})
            return {
                "pipeline": attrs["pipeline"],
                "a": Side(*sides[0], attrs["a"]),
                "b": Side(*sides[1], attrs["b"]),
                "attribute": attrs["attr"],
            }
        return {
            "pipeline": attrs["pipeline"],
            "a": Side(*sides[0]),
            "b": Side(*sides[1]),
            "attribute": None,
        }


def _window(start: dt.datetime, end: dt.datetime, field: str) -> tuple[dt.datetime, dt.datetime]:
    """The window checked and rounded down to whole minutes, in UTC."""
    _check_window(start, end, field)
    first, last = floor_minute(start), floor_minute(end)
    if last <= first:
        raise serializers.ValidationError({field: ["A window must hold a whole minute."]})
    return first, last


def _check_window(start: dt.datetime, end: dt.datetime, field: str) -> None:
    if end <= start:
        raise serializers.ValidationError({field: ["Must be after the window's start."]})
    if end - start > MAX_COMPARE_WINDOW:
        raise serializers.ValidationError(
            {field: [f"A window may span at most {MAX_COMPARE_WINDOW.days} days."]}
        )


class ComparedPipelineSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pipeline_id")
    name = serializers.CharField(source="pipeline_name")


class SideTotalSerializer(serializers.Serializer):
    """What one side compared."""

    start = serializers.DateTimeField(source="side.start", help_text="Rounded to its minute.")
    end = serializers.DateTimeField(source="side.end", help_text="Exclusive.")
    value = serializers.CharField(
        source="side.value", allow_null=True, help_text="The attribute's value; null for windows."
    )
    spans = serializers.IntegerField(
        help_text="Every span of the side, all stages together: nothing is sampled."
    )


class ComparedStageSerializer(serializers.Serializer):
    id = serializers.IntegerField(
        source="stage_id", allow_null=True, help_text="Stage id; null for end-to-end."
    )
    name = serializers.CharField()


_CHANGES: Final = [change.value for change in comparison.Change]


class QuantileDeltaSerializer(serializers.Serializer):
    """One quantile on both sides and its change B - A, in ms."""

    q = serializers.FloatField()
    key = serializers.CharField(help_text="`p50`, `p95`, `p99`.")
    a_ms = serializers.FloatField(allow_null=True, help_text="Quantile of A; null without spans.")
    b_ms = serializers.FloatField(allow_null=True, help_text="Quantile of B; null without spans.")
    delta_ms = serializers.FloatField(allow_null=True, help_text="B - A.")
    delta_pct = serializers.FloatField(
        allow_null=True, help_text="(B - A) / A in percent; null when A is 0."
    )
    ci_low_ms = serializers.FloatField(
        allow_null=True,
        help_text="Lower bound of the confidence interval of delta_ms; null without enough data.",
    )
    ci_high_ms = serializers.FloatField(allow_null=True, help_text="Upper bound.")
    min_spans = serializers.IntegerField(help_text="Spans each side needs for a verdict.")
    enough_data = serializers.BooleanField()
    significant = serializers.BooleanField(
        help_text="The interval excludes 0 and the change is at least min_delta_ms and "
        "min_delta_pct."
    )
    change = serializers.ChoiceField(choices=_CHANGES)


class StageComparisonSerializer(serializers.Serializer):
    """One stage (or end to end) compared."""

    stage = ComparedStageSerializer(source="*")
    n_a = serializers.IntegerField(source="delta.n_a", help_text="Spans of A (exact).")
    n_b = serializers.IntegerField(source="delta.n_b", help_text="Spans of B (exact).")
    change = serializers.ChoiceField(
        source="delta.change",
        choices=_CHANGES,
        help_text="The change of the verdict's quantile; `none` when no quantile changed "
        "significantly.",
    )
    significant = serializers.BooleanField(source="delta.significant")
    verdict = serializers.CharField(help_text="The stage's verdict in words.")
    quantiles = QuantileDeltaSerializer(source="delta.quantiles", many=True)


class CompareMethodSerializer(serializers.Serializer):
    """How the figures were computed; the same for every answer."""

    quantiles = serializers.ListField(child=serializers.FloatField())
    confidence = serializers.FloatField(
        help_text="Simultaneous over a stage's quantiles (Bonferroni)."
    )
    relative_error = serializers.FloatField(
        help_text="Each sketch quantile is within this share of the exact order statistic; "
        "intervals are widened by it."
    )
    min_delta_ms = serializers.FloatField(
        source="thresholds.min_delta_ms", help_text="A significant change is at least this…"
    )
    min_delta_pct = serializers.FloatField(
        source="thresholds.min_delta_pct", help_text="…and at least this percent of A."
    )


class LengthSplitSerializer(serializers.Serializer):
    """An LLM pipeline's decode change, told apart into answer length and per-token speed."""

    sentence = serializers.CharField()
    length_factor = serializers.FloatField(
        help_text="B's output tokens after the first over A's, each side's estimated as its "
        "mean decode time over its mean time per output token."
    )
    speed_factor = serializers.FloatField(
        help_text="B's median time per output token over A's: above 1, each token is slower."
    )
    decode_factor = serializers.FloatField(help_text="B's median decode time over A's.")
    tokens_a = serializers.FloatField()
    tokens_b = serializers.FloatField()
    tpot_a_ms = serializers.FloatField()
    tpot_b_ms = serializers.FloatField()
    decode_a_ms = serializers.FloatField()
    decode_b_ms = serializers.FloatField()
    n_a = serializers.IntegerField(help_text="Requests with a time per output token in A.")
    n_b = serializers.IntegerField()


class ComparisonSerializer(serializers.Serializer):
    """Latency of a pipeline's stages, side A against side B."""

    pipeline = ComparedPipelineSerializer(source="*")
    mode = serializers.ChoiceField(choices=["windows", "attribute"])
    attribute = serializers.CharField(allow_null=True)
    a = SideTotalSerializer()
    b = SideTotalSerializer()
    headline = serializers.CharField(help_text="One sentence over every stage.")
    length = LengthSplitSerializer(
        allow_null=True,
        help_text="LLM pipelines (with decode and time_per_output_token series): how much of "
        "the change is longer answers and how much slower tokens; else null.",
    )
    method = CompareMethodSerializer()
    stages = StageComparisonSerializer(
        many=True, help_text="End to end first, then each stage with spans on either side."
    )

"""Parameters and JSON shape of the percentiles API."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from rest_framework import serializers

from latencyboard import bounds, windows
from latencyboard.moments import iso_utc
from latencyboard.pipelines.mapping import END_TO_END, MAX_STAGE_NAME
from latencyboard.rollups.queries import (
    DEFAULT_QUANTILES,
    LatencyFigures,
    PercentileSeries,
)
from latencyboard.series_query import SeriesQuerySerializer, step_help

MAX_QUANTILES: Final = 10
_STAGE_ID = re.compile(r"\d{1,18}")  # fits a bigint, so a typo cannot overflow the query
FORMATS: Final = ("series", "long")


def quantile_key(q: float) -> str:
    """JSON key of quantile ``q``: ``p`` and the percentage, ``0.999`` → ``p99.9``."""
    # repr is the shortest decimal that round-trips, so 0.999 stays 0.999, not 0.99899…
    return f"p{(Decimal(repr(q)) * 100).normalize():f}"


class PercentileQuerySerializer(SeriesQuerySerializer):
    """Query parameters of ``GET /api/pipelines/{id}/percentiles/``.

    Validated data: ``stages`` (list of stage ids or names, None for end-to-end; None for
    all), ``start``/``end`` (aware UTC), ``step`` (timedelta), ``q`` (tuple of floats),
    ``format``. The window and step are read as every series endpoint reads them.
    """

    stages = serializers.CharField(
        required=False,
        help_text=f"Comma-separated stages of this pipeline, by id or by name; `{END_TO_END}` "
        "is the end-to-end latency. Default: end-to-end and every stage.",
    )
    step = bounds.DurationTextField(
        default=dt.timedelta(hours=1),
        help_text=step_help(
            "It must divide an hour, be whole hours dividing a day, or be whole days; buckets "
            "start on multiples of the step since the Unix epoch. Default 1h."
        ),
    )
    q = serializers.CharField(
        required=False,
        help_text="Comma-separated quantiles in (0, 1); each becomes a key like p99 or p99.9. "
        f"Default: {','.join(map(str, DEFAULT_QUANTILES))}.",
    )
    format = serializers.ChoiceField(
        choices=FORMATS,
        default="series",
        help_text="`series`: one object per stage with its points. `long`: a table, one row "
        "per bucket and stage (t, stage, stage_id, n, error_rate, mean_ms and each quantile), "
        "for Grafana's Infinity data source, pandas or a spreadsheet.",
    )

    def validate_stages(self, value: str) -> list[int | str | None]:
        stages: list[int | str | None] = []
        for token in value.split(","):
            token = token.strip()
            if token == END_TO_END:
                stages.append(None)
            elif _STAGE_ID.fullmatch(token):
                stages.append(int(token))
            elif 0 < len(token) <= MAX_STAGE_NAME:
                stages.append(token)
            else:
                raise serializers.ValidationError(
                    f"'{token[:MAX_STAGE_NAME]}' is neither a stage id, a stage name nor "
                    f"{END_TO_END}."
                )
        return stages

    def validate_q(self, value: str) -> tuple[float, ...]:
        levels = []
        for token in value.split(","):
            try:
                level = float(token)
            except ValueError:
                raise serializers.ValidationError(f"'{token.strip()}' is not a number.") from None
            # NaN fails both comparisons, infinities the range.
            if not 0.0 < level < 1.0:
                raise serializers.ValidationError(
                    f"{token.strip()} is not a quantile strictly between 0 and 1."
                )
            levels.append(level)
        if len(set(levels)) > MAX_QUANTILES:
            raise serializers.ValidationError(f"At most {MAX_QUANTILES} quantiles.")
        return tuple(levels)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        attrs.setdefault("stages", None)
        attrs.setdefault("q", DEFAULT_QUANTILES)
        return attrs


class _FiguresSerializer(serializers.Serializer):
    """Latency figures of one stage (see ``LatencyFigures``)."""

    n = serializers.IntegerField(help_text="Spans counted (exact).")
    error_rate = serializers.FloatField(
        allow_null=True, help_text="Share of those spans with an error status (exact)."
    )
    mean_ms = serializers.FloatField(allow_null=True, help_text="Mean latency in ms (exact).")

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # The keys follow the q parameter; the schema lists those of the default.
        for level in DEFAULT_QUANTILES:
            fields[quantile_key(level)] = serializers.FloatField(
                allow_null=True,
                required=False,
                help_text=f"Quantile {level} in ms, a sketch estimate within relative_error "
                "of the order statistic of rank floor(q*(n-1)). One key per requested "
                "quantile; null when n = 0.",
            )
        return fields


class PercentileSummarySerializer(_FiguresSerializer):
    """The stage over the whole window."""


class PercentilePointSerializer(_FiguresSerializer):
    """The stage over one step bucket."""

    t = serializers.DateTimeField(help_text="Start of the bucket (UTC).")


class SeriesStageSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="Stage id; null for end-to-end.")
    name = serializers.CharField()


class StageSeriesSerializer(serializers.Serializer):
    stage = SeriesStageSerializer()
    points = PercentilePointSerializer(many=True, help_text="One per bucket, oldest first.")
    summary = PercentileSummarySerializer()


class PipelineRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class SegmentSerializer(serializers.Serializer):
    resolution = serializers.ChoiceField(choices=windows.RESOLUTIONS)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


# The response serializers only document the shape. percentile_series_data renders it: a third
# of the time of serializer fields (5 ms instead of 15 for a week of hourly points of 7 stages),
# and a key may contain a dot (p99.9), which a field's source may not.
# test_rendered_keys_are_the_ones_the_schema_documents keeps the two in step.
class PercentileSeriesSerializer(serializers.Serializer):
    """Per-stage latency percentiles of a pipeline, bucket by bucket over a window."""

    pipeline = PipelineRefSerializer()
    resolution = serializers.ChoiceField(
        choices=windows.RESOLUTIONS,
        help_text="The coarsest rollup rows merged (the first segment's).",
    )
    segments = SegmentSerializer(
        many=True,
        help_text="Which rollup rows were merged for which part of the window, oldest first: "
        "finer rows where coarser ones are not written yet, coarser ones where retention "
        "dropped finer ones.",
    )
    start = serializers.DateTimeField(help_text="Window start, widened to a whole step.")
    end = serializers.DateTimeField(
        help_text="Window end (exclusive), widened to a whole step but never after now: the "
        "last bucket may still be filling."
    )
    step_seconds = serializers.IntegerField(
        help_text="Bucket length used: the step asked for, or the resolution's length when "
        "only coarser rows cover the window."
    )
    quantiles = serializers.ListField(child=serializers.FloatField())
    method = serializers.ChoiceField(
        choices=["sketch"], help_text="How every quantile was computed: a DDSketch merge."
    )
    relative_error = serializers.FloatField(help_text="Bound on each quantile's relative error.")
    series = StageSeriesSerializer(many=True)


def percentile_series_data(
    result: PercentileSeries, now: dt.datetime | None = None
) -> dict[str, Any]:
    """The JSON body for ``result``, in the shape :class:`PercentileSeriesSerializer` shows;
    its end is never after ``now`` when given."""
    keys = ("n", "error_rate", "mean_ms", *map(quantile_key, result.quantiles))
    point_keys = ("t", *keys)
    # Bucket starts as ISO 8601 in one numpy call: strftime per point costs more than the rest.
    first = np.datetime64(int(result.start.timestamp()), "s")
    offsets = np.arange(result.bucket_count) * np.timedelta64(result.step_seconds, "s")
    moments = np.strings.add(np.datetime_as_string(first + offsets), "Z").tolist()
    # Python values (None for NaN) converted all at once: a dict per point is then the only
    # work per point. Points: per stage, one list per figure; summaries: per stage, one row.
    point_columns = np.moveaxis(_figure_values(result.points), -1, 1).tolist()
    summaries = _figure_values(result.summary).tolist()
    return {
        "pipeline": {"id": result.pipeline_id, "name": result.pipeline_name},
        "resolution": result.resolution,
        "segments": [
            {
                "resolution": segment.resolution,
                "start": iso_utc(segment.start),
                "end": iso_utc(segment.end),
            }
            for segment in result.segments
        ],
        "start": iso_utc(result.start),
        "end": iso_utc(result.end if now is None else min(result.end, now)),
        "step_seconds": result.step_seconds,
        "quantiles": list(result.quantiles),
        "method": result.method,
        "relative_error": result.relative_error,
        "series": [
            {
                "stage": {"id": stage.id, "name": stage.name},
                "points": [
                    dict(zip(point_keys, values, strict=True))
                    for values in zip(moments, *columns, strict=True)
                ],
                "summary": dict(zip(keys, summary, strict=True)),
            }
            for stage, columns, summary in zip(result.stages, point_columns, summaries, strict=True)
        ],
    }


class LongRowSerializer(_FiguresSerializer):
    """One bucket of one stage: a row of ``format=long``."""

    t = serializers.DateTimeField(help_text="Start of the bucket (UTC).")
    stage = serializers.CharField(help_text=f"Stage name; {END_TO_END} for end-to-end.")
    stage_id = serializers.IntegerField(allow_null=True, help_text="Null for end-to-end.")


def percentile_long_rows(result: PercentileSeries) -> list[dict[str, Any]]:
    """The ``format=long`` body for ``result``: the points of :func:`percentile_series_data`,
    one row per bucket and stage, bucket by bucket, stages in the order asked."""
    series = percentile_series_data(result)["series"]
    rows = [
        {"t": point["t"], "stage": entry["stage"]["name"], "stage_id": entry["stage"]["id"]} | point
        for entry in series
        for point in entry["points"]
    ]
    # Stable: stages keep their order within a bucket.
    return sorted(rows, key=lambda row: row["t"])


def _figure_values(figures: LatencyFigures) -> npt.NDArray[np.object_]:
    """``figures`` as Python values, None for NaN: the shape of ``figures.n`` and a last
    axis of n, error rate, mean and each quantile."""
    floats = np.concatenate(
        [figures.error_rate[..., None], figures.mean_ms[..., None], figures.quantiles_ms],
        axis=-1,
    )
    values = floats.astype(object)
    values[np.isnan(floats)] = None
    return np.concatenate([figures.n[..., None].astype(object), values], axis=-1)

"""Reads of a comparison: each side's latency sketches merged from the rollups, compared stage
by stage, scoped to the user's teams.

A side is a window of whole minutes and, in attribute mode, one value of a cohort attribute
(e.g. ``model.version`` v7 against v8, over the same hours so the traffic mix matches, or
over two windows). Windows are read from the rollups, values from the cohort rollups: every
span of the side counts, nothing is sampled, so each side's n is its exact span count. The
statistics are :mod:`latencyboard.stats.comparison`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django.contrib.auth.models import AnonymousUser, User

from latencyboard.compare import length_split
from latencyboard.pipelines.models import Pipeline, cohort_attributes
from latencyboard.rollups import sketch_windows
from latencyboard.rollups.queries import END_TO_END
from latencyboard.rollups.sketch_windows import END_TO_END_KEY, SeriesSketches
from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.sketches.sketch import Sketch
from latencyboard.stats import comparison


class NotACohort(ValueError):
    """The attribute compared is not a cohort attribute of the pipeline."""


@dataclass(frozen=True)
class Side:
    """The spans one side compares: those starting in ``[start, end)`` and, in attribute mode,
    whose attribute has ``value``."""

    start: dt.datetime
    end: dt.datetime
    value: str | None = None


@dataclass(frozen=True)
class SideTotal:
    """What ``side`` holds: ``spans`` spans in all stages together, every one counted."""

    side: Side
    spans: int


@dataclass(frozen=True)
class StageComparison:
    """One stage compared; ``stage_id`` None is the pipeline's end-to-end latency (its root
    spans)."""

    stage_id: int | None
    name: str
    delta: comparison.SeriesDelta
    verdict: str


@dataclass(frozen=True)
class Method:
    """How every comparison is computed (see :mod:`latencyboard.stats.comparison`)."""

    quantiles: tuple[float, ...] = comparison.QUANTILES
    confidence: float = comparison.CONFIDENCE
    relative_error: float = RELATIVE_ERROR
    thresholds: comparison.Thresholds = field(default_factory=comparison.Thresholds)


@dataclass(frozen=True)
class Comparison:
    """Answer to :func:`compare`: end to end first, then each stage with spans on either side
    in pipeline order, and one headline over them all."""

    pipeline_id: int
    pipeline_name: str
    attribute: str | None
    a: SideTotal
    b: SideTotal
    stages: tuple[StageComparison, ...]
    headline: str
    length: length_split.LengthSplit | None = None
    method: Method = field(default_factory=Method)

    @property
    def mode(self) -> str:
        return "windows" if self.attribute is None else "attribute"


def compare(
    user: User | AnonymousUser,
    pipeline_id: int,
    a: Side,
    b: Side,
    attribute: str | None = None,
) -> Comparison:
    """Per-stage quantiles of side ``a`` against side ``b`` of a pipeline, with confidence
    intervals and verdicts (see :mod:`latencyboard.stats.comparison`), from the sketches of
    every span of each side.

    Raises ``Pipeline.DoesNotExist`` when the pipeline is not in one of the user's teams,
    exactly as if it did not exist, :class:`NotACohort` for an attribute without sketches
    and ValueError for sides that do not fit the mode.
    """
    pipeline = Pipeline.objects.visible_to(user).get(pk=pipeline_id)
    if attribute is not None:
        if a.value is None or b.value is None:
            raise ValueError("an attribute comparison needs a value per side")
        if attribute not in cohort_attributes(pipeline):
            raise NotACohort(attribute)
    sides = _sketches(pipeline, a, b, attribute)
    series = sorted(
        {key for side in sides for key in side if not _repeats_end_to_end(sides, key)},
        key=lambda key: (key != END_TO_END_KEY, key),
    )
    names = dict(pipeline.stages.filter(pk__in=series).values_list("pk", "name"))
    stages = []
    for key in series:
        name = END_TO_END if key == END_TO_END_KEY else names.get(key, f"stage {key}")
        delta = comparison.compare_sketches(
            sides[0].get(key, Sketch()), sides[1].get(key, Sketch())
        )
        stage_id = None if key == END_TO_END_KEY else key
        stages.append(StageComparison(stage_id, name, delta, comparison.verdict(name, delta)))
    b_label = "B" if attribute is None else f"B ({attribute} = {b.value})"
    return Comparison(
        pipeline_id=pipeline.pk,
        pipeline_name=str(pipeline),
        attribute=attribute,
        a=SideTotal(a, _spans(sides[0])),
        b=SideTotal(b, _spans(sides[1])),
        stages=tuple(stages),
        headline=comparison.headline([(stage.name, stage.delta) for stage in stages], b_label),
        length=length_split.split(
            *(
                {names[key]: sketch for key, sketch in side.items() if key in names}
                for side in sides
            )
        ),
    )


def _sketches(pipeline: Pipeline, a: Side, b: Side, attribute: str | None) -> list[SeriesSketches]:
    """Both sides' sketches per series, in as few round trips as the sides allow: one for
    the rows stored and one for two windows, or two values over the same window."""
    segments = sketch_windows.windows_segments(pipeline, [(a.start, a.end), (b.start, b.end)])
    if attribute is None or a.value is None or b.value is None:
        return sketch_windows.windows_sketches(pipeline.pk, segments)
    values = [a.value, b.value]
    if segments[0] == segments[1]:
        by_value = sketch_windows.cohort_series(pipeline.pk, attribute, values, segments[0])
        found = [by_value.get(value, {}) for value in values]
    else:
        found = [
            sketch_windows.cohort_series(pipeline.pk, attribute, [value], part).get(value, {})
            for value, part in zip(values, segments, strict=True)
        ]
    return [{series: figures.sketch for series, figures in side.items()} for side in found]


def _repeats_end_to_end(sides: list[SeriesSketches], key: int) -> bool:
    """Whether ``key`` is the stage of the root spans only, whose latency is end to end's:
    shown once, as end to end."""
    if key == END_TO_END_KEY:
        return False
    return all(
        side.get(key, _EMPTY).to_bytes() == side.get(END_TO_END_KEY, _EMPTY).to_bytes()
        for side in sides
    )


_EMPTY = Sketch()


def _spans(sketches: SeriesSketches) -> int:
    """Spans of every stage together (end to end repeats the root spans, so not counted)."""
    return sum(s.count for key, s in sketches.items() if key != END_TO_END_KEY)

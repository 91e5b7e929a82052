"""Reads of a comparison: uniform samples of a pipeline's spans for sides A and B, compared
stage by stage, scoped to the user's teams.

A side is either a time window (``windows`` mode) or the spans of one window whose attribute
has one value (``attribute`` mode, e.g. ``model.version`` v7 against v8). In attribute mode
each span is matched on its own attributes: a stage whose spans do not carry the attribute
has no spans on either side. How much is read is decided by :mod:`.sampling`; the statistics
are :mod:`.stats`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection

from latencyboard.compare import sampling, stats
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.queries import END_TO_END
from latencyboard.spans.partitions import DayPartition
from latencyboard.teams.queries import teams_of

SEED: Final = 20_261_121
"""Seeds the block sample, the thinning hash, the trimming and the bootstrap: the same
question on the same spans always gets the same answer."""
_END_TO_END_SERIES: Final = 0  # stage ids start at 1
_HASH_BITS: Final = 20
_NS_PER_MS: Final = 1e6
_EMPTY: Final = np.empty(0)


@dataclass(frozen=True)
class Side:
    """The spans one side compares: those starting in ``[start, end)`` and, in attribute mode,
    whose attribute has ``value``."""

    start: dt.datetime
    end: dt.datetime
    value: str | None = None


@dataclass(frozen=True)
class SideSample:
    """How ``side`` was sampled: ``spans`` spans in all stages together, each span of the side
    being in the sample with probability ``fraction`` (1.0: every span was read)."""

    side: Side
    spans: int
    fraction: float

    @property
    def estimated_spans(self) -> int:
        """The side's spans in the window, estimated from the sample."""
        return round(self.spans / self.fraction) if self.fraction else 0


@dataclass(frozen=True)
class StageComparison:
    """One stage compared; ``stage_id`` None is the pipeline's end-to-end latency (its root
    spans)."""

    stage_id: int | None
    name: str
    delta: stats.SeriesDelta
    verdict: str


@dataclass(frozen=True)
class Method:
    """How every comparison is computed (see :mod:`.stats` and :mod:`.sampling`)."""

    quantiles: tuple[float, ...] = stats.QUANTILES
    confidence: float = stats.CONFIDENCE
    resamples: int = stats.RESAMPLES
    thresholds: stats.Thresholds = field(default_factory=stats.Thresholds)
    max_spans_per_side: int = sampling.MAX_SPANS_PER_SIDE
    seed: int = SEED


@dataclass(frozen=True)
class Comparison:
    """Answer to :func:`compare`: end to end first, then each stage with spans on either side
    in pipeline order, and one headline over them all."""

    pipeline_id: int
    pipeline_name: str
    attribute: str | None
    a: SideSample
    b: SideSample
    stages: tuple[StageComparison, ...]
    headline: str
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
    intervals and verdicts (see :mod:`.stats`), from a uniform sample of each side's spans
    (see :mod:`.sampling`).

    With ``attribute`` both sides must share one window and name a value each. Raises
    ``Pipeline.DoesNotExist`` when the pipeline is not in one of the user's teams, exactly
    as if it did not exist, and ValueError for sides that do not fit the mode.
    """
    pipeline = Pipeline.objects.filter(team__in=teams_of(user)).get(pk=pipeline_id)
    scans = _scans(pipeline.pk, a, b, attribute)
    plans = _plan(scans)
    samples, fractions = _sample(scans, plans)
    series = sorted({key for side in samples for key in side}, key=lambda key: (key != 0, key))
    names = dict(pipeline.stages.filter(pk__in=series).values_list("pk", "name"))
    stages = []
    for key in series:
        # Spans outlive a stage row deleted in the admin; they still deserve a name.
        name = END_TO_END if key == _END_TO_END_SERIES else names.get(key, f"stage {key}")
        delta = stats.compare_quantiles(
            samples[0].get(key, _EMPTY),
            samples[1].get(key, _EMPTY),
            np.random.default_rng([SEED, key]),
        )
        stage_id = None if key == _END_TO_END_SERIES else key
        stages.append(StageComparison(stage_id, name, delta, stats.verdict(name, delta)))
    b_label = "B" if attribute is None else f"B ({attribute} = {b.value})"
    return Comparison(
        pipeline_id=pipeline.pk,
        pipeline_name=str(pipeline),
        attribute=attribute,
        a=SideSample(a, sum(map(len, samples[0].values())), fractions[0]),
        b=SideSample(b, sum(map(len, samples[1].values())), fractions[1]),
        stages=tuple(stages),
        headline=stats.headline([(stage.name, stage.delta) for stage in stages], b_label),
    )


@dataclass(frozen=True)
class _Scan:
    """One read of the span table serving one side (a window) or both (two values of an
    attribute in one window): SQL fragments that select its spans and say whose they are."""

    start: dt.datetime
    end: dt.datetime
    sides: tuple[int, ...]
    where: str
    where_params: tuple[Any, ...]
    side: str  # an SQL expression: 0 for side A, 1 for B
    side_params: tuple[Any, ...]


def _scans(pipeline_id: int, a: Side, b: Side, attribute: str | None) -> list[_Scan]:
    in_window = "pipeline_id = %s AND start_time >= %s AND start_time < %s"
    if attribute is None:
        return [
            _Scan(
                side.start,
                side.end,
                (index,),
                in_window,
                (pipeline_id, side.start, side.end),
                "%s",
                (index,),
            )
            for index, side in enumerate((a, b))
        ]
    if (a.start, a.end) != (b.start, b.end) or a.value is None or b.value is None:
        raise ValueError("an attribute comparison needs one window and a value per side")
    return [
        _Scan(
            a.start,
            a.end,
            (0, 1),
            f"{in_window} AND attributes ->> %s IN (%s, %s)",
            (pipeline_id, a.start, a.end, attribute, a.value, b.value),
            "CASE WHEN attributes ->> %s = %s THEN 1 ELSE 0 END",
            (attribute, b.value),
        )
    ]


@dataclass(frozen=True)
class _Plan:
    """How one scan reads: ``sample`` None reads every span through the index."""

    sample: sampling.ScanPlan | None
    fractions: dict[int, float]


def _plan(scans: Sequence[_Scan]) -> list[_Plan]:
    """Whole reads for windows with few spans; sampled scans sized by a pilot for the rest.

    One statement counts each window's spans up to :data:`sampling.READ_ALL_BELOW` (an index
    range scan that stops there) and sums the blocks of the partitions it touches; one more
    runs the pilots of the scans that sample.
    """
    sql, params = [], []
    for index, scan in enumerate(scans):
        sql.append(
            "SELECT %s, (SELECT count(*) FROM (SELECT FROM spans_span WHERE pipeline_id = %s "
            "AND start_time >= %s AND start_time < %s LIMIT %s) AS head), "
            "(SELECT coalesce(sum(pg_relation_size(inhrelid)), 0) FROM pg_inherits "
            "WHERE inhparent = 'spans_span'::regclass AND inhrelid::regclass::text = ANY(%s))"
            " / current_setting('block_size')::int"
        )
        params += [
            index,
            scan.where_params[0],
            scan.start,
            scan.end,
            sampling.READ_ALL_BELOW,
            _partitions(scan.start, scan.end),
        ]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(sql), params)
        sizes = {index: (head, int(blocks)) for index, head, blocks in cursor.fetchall()}

    sampled = [i for i, scan in enumerate(scans) if sizes[i][0] >= sampling.READ_ALL_BELOW]
    plans = [_Plan(None, {side: 1.0 for side in scan.sides}) for scan in scans]
    if not sampled:
        return plans
    pilots = {i: sampling.pilot_rate(sizes[i][1]) for i in sampled}
    sql, params = [], []
    for i in sampled:
        scan = scans[i]
        sql.append(
            # Constant fragments; every value is a parameter.
            f"SELECT %s, {scan.side}, count(*) FROM spans_span "  # noqa: S608
            f"TABLESAMPLE SYSTEM (%s) REPEATABLE (%s) WHERE {scan.where} GROUP BY 2"
        )
        params += [i, *scan.side_params, 100 * pilots[i], SEED, *scan.where_params]
    counts: dict[int, dict[int, int]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(sql), params)
        for index, side, count in cursor.fetchall():
            counts[index][side] = count
    for i in sampled:
        sides = scans[i].sides
        plan = sampling.plan_scan(
            sizes[i][1], pilots[i], [counts[i].get(side, 0) for side in sides]
        )
        plans[i] = _Plan(plan, {side: plan.fraction(n) for n, side in enumerate(sides)})
    return plans


def _partitions(start: dt.datetime, end: dt.datetime) -> list[str]:
    """Names of the day partitions ``[start, end)`` touches (some may not exist)."""
    first = start.astimezone(dt.UTC).date()
    last = (end - dt.timedelta(microseconds=1)).astimezone(dt.UTC).date()
    return [DayPartition(first + dt.timedelta(days=n)).name for n in range((last - first).days + 1)]


def _sample(
    scans: Sequence[_Scan], plans: Sequence[_Plan]
) -> tuple[list[dict[int, npt.NDArray[np.float64]]], list[float]]:
    """Each side's sampled latencies in ms by series (0: end to end, else the stage id), and
    the probability that a span of the side is among them. One statement for every scan;
    durations come back as one binary string per (side, series), as the rollup worker reads
    them."""
    sql, params = [], []
    for index, (scan, plan) in enumerate(zip(scans, plans, strict=True)):
        tablesample, thinning = "", ""
        tablesample_params: list[Any] = []
        thinning_params: list[Any] = []
        if plan.sample is not None:
            tablesample = "TABLESAMPLE SYSTEM (%s) REPEATABLE (%s)"
            tablesample_params = [100 * plan.sample.rate, SEED]
            if min(plan.sample.keeps) < 1.0:
                # The span id is random, so a hash of it thins each side uniformly.
                thinning = (
                    f"AND (hashint8extended(span_id, %s) & {(1 << _HASH_BITS) - 1}) "
                    f"< (ARRAY[%s, %s])[{scan.side} + 1]"
                )
                limits = [0, 0]
                for side, keep in zip(scan.sides, plan.sample.keeps, strict=True):
                    limits[side] = math.ceil(keep * (1 << _HASH_BITS))
                thinning_params = [SEED, *limits, *scan.side_params]
        sql.append(
            # Constant fragments; every value is a parameter.
            f"SELECT %s, {scan.side}, CASE WHEN is_root THEN {_END_TO_END_SERIES} "  # noqa: S608
            "ELSE stage_id END, string_agg(int8send(duration_ns), '') "
            f"FROM spans_span {tablesample} WHERE {scan.where} {thinning} GROUP BY 2, 3"
        )
        params += [
            index,
            *scan.side_params,
            *tablesample_params,
            *scan.where_params,
            *thinning_params,
        ]
    samples: list[dict[int, npt.NDArray[np.float64]]] = [{}, {}]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(sql), params)
        for _, side, series, blob in cursor.fetchall():
            samples[side][series] = np.frombuffer(blob, dtype=">i8") / _NS_PER_MS
    fractions = [0.0, 0.0]
    for plan in plans:
        for side, fraction in plan.fractions.items():
            fractions[side] = fraction
    for side in (0, 1):
        samples[side], kept = _trim(samples[side], np.random.default_rng([SEED, side]))
        fractions[side] *= kept
    return samples, fractions


def _trim(
    by_series: dict[int, npt.NDArray[np.float64]], rng: np.random.Generator
) -> tuple[dict[int, npt.NDArray[np.float64]], float]:
    """At most :data:`sampling.MAX_SPANS_PER_SIDE` spans, a uniform subsample over every
    series together; and the share of the spans kept."""
    total = sum(map(len, by_series.values()))
    if total <= sampling.MAX_SPANS_PER_SIDE:
        return by_series, 1.0
    keys = list(by_series)
    values = np.concatenate([by_series[key] for key in keys])
    series = np.repeat(np.arange(len(keys)), [len(by_series[key]) for key in keys])
    chosen = rng.choice(total, sampling.MAX_SPANS_PER_SIDE, replace=False)
    return (
        {key: values[chosen[series[chosen] == n]] for n, key in enumerate(keys)},
        sampling.MAX_SPANS_PER_SIDE / total,
    )

"""Cohort rollups on real PostgreSQL: folded with the rollups, capped, compacted, expired.

Spans are stored as live ingest stores them and every expectation is recomputed from the raw
rows (``spans_spanview``: each span whole, its template and resource merged).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from django.conf import settings
from django.db import connection

from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.pipelines.models import CohortAttribute, Pipeline
from latencyboard.rollups import compaction, rebuild, services
from latencyboard.rollups.cohorts import OTHER
from latencyboard.sketches.sketch import Sketch
from latencyboard.teams.models import Team
from tests.factories import make_team

DAY = dt.datetime.combine(
    dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC
)
T0 = DAY + dt.timedelta(hours=10)
STAGES = ("queue_wait", "model_forward", "serialize")
QUANTILES = [0.0, 0.5, 0.99, 1.0]

db = pytest.mark.django_db(transaction=True)


def requests(
    rng: np.random.Generator, count: int, versions: list[str], seconds: int = 1800
) -> list[DecodedSpan]:
    """Requests of a root span and a child per stage; the root and ``model_forward`` carry
    ``model.version`` (as the demo's do), every span ``service.version`` and ``model_forward``
    ``cache_hit``; one in ten failed."""
    spans = []
    start_ns = int(T0.timestamp()) * 10**9
    for n in range(count):
        trace, root = rng.bytes(16), rng.bytes(8)
        at = start_ns + int(rng.integers(0, seconds * 10**9))
        failed = bool(rng.random() < 0.1)
        version = versions[n % len(versions)]
        durations = rng.lognormal(np.log(4e6), 0.9, size=len(STAGES)).astype(np.int64)
        common: dict[str, object] = {"service.version": "2.1"}
        root_span = _span(trace, root, None, "predict", at, int(durations.sum()), failed, common)
        spans.append(with_attributes(root_span, {"model.version": version}))
        for stage, duration in zip(STAGES, durations.tolist(), strict=True):
            extra = (
                {"model.version": version, "cache_hit": bool(n % 3 == 0)}
                if stage == "model_forward"
                else {}
            )
            child = _span(trace, rng.bytes(8), root, stage, at, duration, failed, common)
            spans.append(with_attributes(child, extra))
            at += duration
    return spans


def with_attributes(span: DecodedSpan, extra: dict[str, object]) -> DecodedSpan:
    return span._replace(attributes={**span.attributes, **extra})


def _span(
    trace: bytes,
    span_id: bytes,
    parent: bytes | None,
    name: str,
    start_ns: int,
    duration_ns: int,
    failed: bool,
    attributes: dict[str, object],
) -> DecodedSpan:
    return DecodedSpan(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=2 if parent is None else 1,
        start_ns=start_ns,
        end_ns=start_ns + duration_ns,
        status_code=2 if failed else 0,
        status_message="",
        service_name="recommender",
        environment="",
        stage=None if parent is None else name,
        attributes=dict(attributes),
        dropped_attributes=0,
    )


Key = tuple[str, str, int | None, dt.datetime]


def raw_cohorts(team: Team, unit: str) -> dict[Key, tuple[int, np.ndarray]]:
    """Per (attribute, value, stage, bucket) from the raw spans; stage None: root spans."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT a.key, s.attributes ->> a.key, CASE WHEN r.root THEN NULL ELSE s.stage_id END,
                   date_trunc(%(unit)s, s.start_time, 'UTC'),
                   count(*) FILTER (WHERE s.status_code = 2), array_agg(s.duration_ns)
            FROM spans_spanview s
            CROSS JOIN unnest(ARRAY['model.version', 'service.version']) AS a(key)
            CROSS JOIN (VALUES (false), (true)) AS r(root)
            WHERE s.team_id = %(team)s AND s.attributes ->> a.key IS NOT NULL
              AND (s.is_root OR NOT r.root)
            GROUP BY 1, 2, 3, 4
            """,
            {"unit": unit, "team": team.pk},
        )
        return {
            (a, v, s, b): (e, np.array(d, dtype=np.float64) / 1e6)
            for a, v, s, b, e, d in cursor.fetchall()
        }


@dataclass(frozen=True)
class CohortRow:
    attribute: str
    value: str
    stage_id: int | None
    bucket_start: dt.datetime
    count: int
    error_count: int
    sketch: bytes


def stored_cohort_rows(
    team: Team, resolution: str, attribute: str | None = None
) -> list[CohortRow]:
    """Every cohort row of the team (of ``attribute`` unless None), those rollup minutes stand
    for included."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT attribute, value, stage_id, bucket_start, count, error_count, sketch
            FROM rollups_cohortrows
            WHERE team_id = %(team)s AND resolution = %(resolution)s
              AND (%(attribute)s::text IS NULL OR attribute = %(attribute)s)
            """,
            {"team": team.pk, "resolution": resolution, "attribute": attribute},
        )
        return [CohortRow(a, v, s, b, n, e, bytes(blob)) for a, v, s, b, n, e, blob in cursor]


def cohort_rows(team: Team, resolution: str) -> dict[Key, CohortRow]:
    rows = stored_cohort_rows(team, resolution)
    keyed = {(r.attribute, r.value, r.stage_id, r.bucket_start): r for r in rows}
    assert len(keyed) == len(rows), "a cohort row stored twice"
    return keyed


def assert_cohorts_match_spans(team: Team, resolution: str) -> None:
    raw = raw_cohorts(team, resolution)
    rows = cohort_rows(team, resolution)
    assert rows.keys() == raw.keys()
    for key, (errors, durations) in raw.items():
        row, expected = rows[key], Sketch.from_values(durations)
        assert (row.count, row.error_count) == (len(durations), errors), key
        np.testing.assert_array_equal(
            Sketch.from_bytes(row.sketch).quantiles(QUANTILES), expected.quantiles(QUANTILES)
        )


def store(writer: SpanWriter, team: Team, spans: list[DecodedSpan], size: int = 400) -> None:
    for first in range(0, len(spans), size):
        writer.write(
            team.pk, spans[first : first + size], rejected=0, protocol="test", received_at=T0
        )


def fold_all(now: dt.datetime) -> services.FoldResult:
    return services.fold_until_idle(lambda: now, seconds=60)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261124)


@pytest.fixture
def writer(django_db_setup: None) -> Iterator[SpanWriter]:
    span_writer = SpanWriter(conninfo(), max_connections=2)
    yield span_writer
    span_writer.close()


@db
def test_fold_writes_a_sketch_per_cohort_stage_and_minute(rng, writer):
    # given spans of two model versions, stored in several ingest batches
    team = make_team()
    store(writer, team, requests(rng, 600, ["v7", "v8"]))

    # when they are folded
    fold_all(T0 + dt.timedelta(hours=1))

    # then each (attribute, value, stage, minute) holds exactly its raw spans; model.version
    # has rows for end to end, the root's stage and model_forward, the spans that carry it
    assert_cohorts_match_spans(team, "minute")
    model_stages = {
        stage
        for attribute, _, stage, _ in cohort_rows(team, "minute")
        if attribute == "model.version"
    }
    stages = dict(Pipeline.objects.get(team=team).stages.values_list("pk", "name"))
    assert {stages.get(stage or 0) for stage in model_stages} == {None, "predict", "model_forward"}
    # cache_hit is not a cohort of this pipeline
    assert {key[0] for key in cohort_rows(team, "minute")} == {"model.version", "service.version"}


@db
def test_values_a_span_holds_itself_count_over_its_template(rng, writer):
    # given a writer that keeps model.version in each span's own row (it has seen more values
    # of it than a template shares), and spans whose own model.version is a JSON null (no
    # value) although their template's is v7
    other = make_team()
    store(writer, other, requests(rng, 150, [f"v{n}" for n in range(150)], seconds=60))
    team = make_team()
    spans = requests(rng, 400, ["v7", "v8"])
    nulled = [with_attributes(span, {"model.version": None}) for span in requests(rng, 50, ["v7"])]
    store(writer, team, spans + nulled)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM spans_span WHERE team_id = %s AND attributes ? 'model.version'",
            [team.pk],
        )
        assert cursor.fetchone()[0] == 1000  # the root and model_forward of 500 requests

    # when they are folded
    fold_all(T0 + dt.timedelta(hours=1))

    # then each cohort row holds exactly the spans whose merged attributes carry its value
    assert_cohorts_match_spans(team, "minute")
    values = {v for a, v, _, _ in cohort_rows(team, "minute") if a == "model.version"}
    assert values == {"v7", "v8"}


def explicit_cohort_rows(team: Team) -> set[tuple[str, str]]:
    """(attribute, value) of the team's rows in the cohort table itself."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT attribute, value FROM rollups_cohortrollup WHERE team_id = %s",
            [team.pk],
        )
        return set(cursor.fetchall())


@db
def test_a_rollup_minute_stands_for_its_sole_cohort_until_another_value_comes(rng, writer):
    # given one minute of v7 requests, every span of service.version 2.1, folded
    team = make_team()
    store(writer, team, requests(rng, 40, ["v7"], seconds=60))
    fold_all(T0 + dt.timedelta(hours=1))

    # then no cohort row is stored apart: each is its rollup row, and reads exactly its spans
    assert explicit_cohort_rows(team) == set()
    assert_cohorts_match_spans(team, "minute")

    # when v7 requests come in another fold, some without model.version
    more = requests(rng, 20, ["v7"], seconds=60)
    unversioned = [with_attributes(span, {"model.version": None}) for span in more[:20]]
    store(writer, team, more[20:] + unversioned)
    fold_all(T0 + dt.timedelta(hours=1))

    # then v7 is stored apart, what the rows held merged with the new v7 spans
    assert explicit_cohort_rows(team) == {("model.version", "v7")}
    assert_cohorts_match_spans(team, "minute")

    # when v8 requests of the same minute come in another fold
    store(writer, team, requests(rng, 40, ["v8"], seconds=60))
    fold_all(T0 + dt.timedelta(hours=1))

    # then v8 is stored apart too, and service.version still is not
    assert explicit_cohort_rows(team) == {("model.version", "v7"), ("model.version", "v8")}
    assert_cohorts_match_spans(team, "minute")

    # and when spans without service.version join the minute, its row is stored apart too
    later = requests(rng, 10, ["v8"], seconds=60)
    store(writer, team, [with_attributes(span, {"service.version": None}) for span in later])
    fold_all(T0 + dt.timedelta(hours=1))
    assert ("service.version", "2.1") in explicit_cohort_rows(team)
    assert_cohorts_match_spans(team, "minute")


@db
def test_a_rebuild_keeps_the_cohorts_its_minutes_stood_for(rng, writer):
    # given minutes standing for their cohorts
    team = make_team()
    store(writer, team, requests(rng, 120, ["v7"], seconds=600))
    fold_all(T0 + dt.timedelta(hours=1))
    before = cohort_rows(team, "minute")

    # when the range's rollups are rebuilt from raw spans
    rebuild.rebuild_rollups(team, T0, T0 + dt.timedelta(minutes=10), now=T0 + dt.timedelta(hours=2))

    # then every cohort row is as it was, now stored apart
    assert explicit_cohort_rows(team) == {("model.version", "v7"), ("service.version", "2.1")}
    assert cohort_rows(team, "minute") == before
    assert_cohorts_match_spans(team, "minute")


@db
def test_an_attribute_added_in_admin_is_folded_from_then_on(rng, writer):
    # given a pipeline with cache_hit as an extra cohort attribute
    team = make_team()
    store(writer, team, requests(rng, 30, ["v7"]))
    fold_all(T0 + dt.timedelta(hours=1))
    CohortAttribute.objects.create(pipeline=Pipeline.objects.get(team=team), key="cache_hit")

    # when more spans arrive and are folded
    store(writer, team, requests(rng, 300, ["v7"]))
    fold_all(T0 + dt.timedelta(hours=1))

    # then cache_hit has rows with the JSON booleans' text as values
    values = {
        value for attribute, value, _, _ in cohort_rows(team, "minute") if attribute == "cache_hit"
    }
    assert values == {"true", "false"}


@db
def test_values_past_the_daily_cap_count_as_other(rng, writer, settings):
    # given a cap of 3 values a day and 5 versions, v0 and v1 far more frequent
    settings.COHORT_VALUES_PER_DAY = 3
    team = make_team()
    versions = ["v0", "v1"] * 10 + ["v2", "v3", "v4"]
    spans = requests(rng, 460, versions)

    # when they are folded
    store(writer, team, spans)
    fold_all(T0 + dt.timedelta(hours=1))

    # then the day keeps v0, v1 and one more value apart, and "other" counts the rest's spans
    rows = [
        r
        for resolution in ("minute", "hour", "day")
        for r in stored_cohort_rows(team, resolution, attribute="model.version")
        if r.stage_id is None
    ]
    values = {row.value for row in rows}
    assert values == {"v0", "v1", "v2", OTHER}
    roots = sum(1 for span in spans if span.parent_span_id is None)
    assert sum(row.count for row in rows) == roots
    other_roots = sum(
        1
        for span in spans
        if span.parent_span_id is None and span.attributes["model.version"] in ("v3", "v4")
    )
    assert sum(row.count for row in rows if row.value == OTHER) == other_roots


@db
def test_compaction_merges_cohort_minutes_into_hours_and_days_and_expires_them(rng, writer):
    team = make_team()
    store(writer, team, requests(rng, 400, ["v7", "v8"], seconds=7200))
    fold_all(T0 + dt.timedelta(hours=3))

    # when the day is over and compacted
    compaction.compact_rollups(DAY + dt.timedelta(days=1, minutes=30))

    # then hours and the day hold exactly their raw spans, as merges of their minutes
    assert_cohorts_match_spans(team, "hour")
    assert_cohorts_match_spans(team, "day")

    # and when the minutes pass their retention, hours and days stay
    compaction.compact_rollups(DAY + dt.timedelta(days=settings.ROLLUP_MINUTE_DAYS + 2))
    assert cohort_rows(team, "minute") == {}
    assert_cohorts_match_spans(team, "day")


@db
def test_late_spans_reach_compacted_cohort_hours_and_days_at_the_next_compaction(rng, writer):
    team = make_team()
    store(writer, team, requests(rng, 300, ["v7", "v8"], seconds=7200))
    fold_all(T0 + dt.timedelta(hours=3))
    compaction.compact_rollups(DAY + dt.timedelta(days=1, minutes=30))

    # when late spans land in hours already compacted, and compaction runs again
    store(writer, team, requests(rng, 50, ["v8", "v9"], seconds=3600))
    fold_all(DAY + dt.timedelta(days=1, hours=1))
    compaction.compact_rollups(DAY + dt.timedelta(days=1, hours=1))

    # then their cohort hours and day hold them too, new value included
    assert_cohorts_match_spans(team, "hour")
    assert_cohorts_match_spans(team, "day")
    assert {key[1] for key in cohort_rows(team, "day")} == {"v7", "v8", "v9", "2.1"}

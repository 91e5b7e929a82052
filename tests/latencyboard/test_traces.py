"""Trace search, exemplars and waterfalls on real PostgreSQL: exact results, scoping, the API
and the pages."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import connection

from latencyboard import windows
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.spans.partitions import DayPartition
from latencyboard.teams.models import Team
from latencyboard.traces import exemplar_queries, queries, waterfall_queries
from latencyboard.traces.queries import AttributeFilter, TraceFilters
from latencyboard.traces.serializers import (
    ExemplarsSerializer,
    TraceSearchSerializer,
    TraceSummarySerializer,
)
from latencyboard.traces.waterfall_serializers import (
    TraceWaterfallSerializer,
    WaterfallSpanSerializer,
)
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db

# Yesterday 10:00 UTC, in a partition the tests create.
T0 = dt.datetime.combine(
    dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1), dt.time(10), tzinfo=dt.UTC
)
HOUR = dt.timedelta(hours=1)
SERVER, INTERNAL, ERROR = 2, 1, 2


def trace_id(number: int) -> uuid.UUID:
    """Trace ids whose order is their number's, so ties are predictable."""
    return uuid.UUID(int=number << 64 | 0xABC)


def hex_of(number: int) -> str:
    return trace_id(number).hex


@dataclass
class StoredSpan:
    trace: int | uuid.UUID  # a number for trace_id(number), or the id itself
    span_id: int
    parent: int | None
    stage: Stage
    start: dt.datetime
    ms: float
    name: str = ""
    error: bool = False
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def is_root(self) -> bool:
        return self.parent is None


def store(team: Team, spans: list[StoredSpan]) -> None:
    """Real rows of spans_ingestbatch and spans_span, as ingest leaves them."""
    with connection.cursor() as cursor:
        for day in {DayPartition.of(span.start) for span in spans}:
            cursor.execute(day.create_sql())
        cursor.execute(
            "INSERT INTO spans_ingestbatch (team_id, received_at, protocol, stored_spans, "
            "duplicate_spans, rejected_spans) VALUES (%s, now(), 'http', %s, 0, 0) RETURNING id",
            [team.pk, len(spans)],
        )
        (batch,) = cursor.fetchone()
        cursor.executemany(
            """
            INSERT INTO spans_span (team_id, pipeline_id, stage_id, batch_id, trace_id, span_id,
                                    parent_span_id, name, kind, status_code, status_message,
                                    start_time, duration_ns, is_root, attributes)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb)
            """,
            [
                (
                    team.pk,
                    span.stage.pipeline_id,
                    span.stage.pk,
                    batch,
                    span.trace if isinstance(span.trace, uuid.UUID) else trace_id(span.trace),
                    span.span_id,
                    span.parent,
                    span.name or span.stage.name,
                    SERVER if span.is_root else INTERNAL,
                    ERROR if span.error else 0,
                    "boom" if span.error else "",
                    span.start,
                    round(span.ms * 1_000_000),
                    span.is_root,
                    json.dumps(span.attributes),
                )
                for span in spans
            ],
        )


@dataclass
class Scene:
    team: Team
    member: User
    outsider: User
    fraud: Pipeline
    recommender: Pipeline
    theirs: Pipeline
    predict: Stage
    forward: Stage
    preprocess: Stage


def request(
    scene: Scene,
    number: int,
    at: dt.datetime,
    root_ms: float,
    children: list[tuple[Stage, float, float]] = (),  # type: ignore[assignment]
    *,
    error: bool = False,
    attributes: dict[str, Any] | None = None,
    root_stage: Stage | None = None,
) -> list[StoredSpan]:
    """One request: a root span and children (stage, offset ms, duration ms)."""
    root_id = number * 100
    spans = [
        StoredSpan(
            number,
            root_id,
            None,
            root_stage or scene.predict,
            at,
            root_ms,
            name="POST /score",
            error=error,
            attributes=attributes or {},
        )
    ]
    for k, (stage, offset, ms) in enumerate(children, start=1):
        start = at + dt.timedelta(milliseconds=offset)
        spans.append(StoredSpan(number, root_id + k, root_id, stage, start, ms))
    return spans


@pytest.fixture
def scene() -> Scene:
    """Traces 1-3 of fraud-scorer and 5 of recommender in the hour from T0, trace 4 an hour
    later, and trace 6 of another team."""
    team, other = make_team("ours"), make_team("theirs")
    fraud = Pipeline.objects.create(team=team, service_name="fraud-scorer", environment="prod")
    recommender = Pipeline.objects.create(team=team, service_name="recommender")
    theirs = Pipeline.objects.create(team=other, service_name="fraud-scorer", environment="prod")
    scene = Scene(
        team=team,
        member=cast(User, make_user(team)),
        outsider=cast(User, make_user(other)),
        fraud=fraud,
        recommender=recommender,
        theirs=theirs,
        predict=Stage.objects.create(pipeline=fraud, name="predict"),
        forward=Stage.objects.create(pipeline=fraud, name="model_forward"),
        preprocess=Stage.objects.create(pipeline=fraud, name="preprocess"),
    )
    v8 = {"model.version": "v8", "http.response.status_code": 200}
    v7 = {"model.version": "v7", "http.response.status_code": 500}
    minute = dt.timedelta(minutes=1)
    store(
        team,
        [
            *request(
                scene,
                1,
                T0 + minute,
                120,
                [(scene.preprocess, 1, 10), (scene.forward, 12, 80)],
                attributes=v8,
            ),
            *request(
                scene, 2, T0 + 2 * minute, 300, [(scene.forward, 5, 250)], error=True, attributes=v7
            ),
            *request(scene, 3, T0 + 3 * minute, 50, [(scene.preprocess, 2, 30)], attributes=v8),
            *request(scene, 4, T0 + HOUR + minute, 200, [(scene.forward, 5, 150)], attributes=v8),
            *request(
                scene,
                5,
                T0 + 4 * minute,
                400,
                root_stage=Stage.objects.create(pipeline=recommender, name="serve"),
            ),
        ],
    )
    store(
        other,
        request(
            scene, 6, T0 + minute, 999, root_stage=Stage.objects.create(pipeline=theirs, name="x")
        ),
    )
    return scene


def found(scene: Scene, user: User | None = None, **filters: Any) -> list[int]:
    """Trace numbers a search finds, in order."""
    filters.setdefault("start", T0)
    filters.setdefault("end", T0 + HOUR)
    result = queries.search_traces(user or scene.member, TraceFilters(**filters))
    return [trace.trace_id.int >> 64 for trace in result.traces]


# ----- search ------------------------------------------------------------------------------


def test_search_finds_root_spans_of_my_pipelines_slowest_first(scene):
    result = queries.search_traces(scene.member, TraceFilters(start=T0, end=T0 + HOUR))

    assert [(t.trace_id, t.duration_ms, t.pipeline_name) for t in result.traces] == [
        (trace_id(5), 400.0, "recommender"),
        (trace_id(2), 300.0, "fraud-scorer (prod)"),
        (trace_id(1), 120.0, "fraud-scorer (prod)"),
        (trace_id(3), 50.0, "fraud-scorer (prod)"),
    ]
    first = result.traces[1]
    assert (first.name, first.span_hex, first.is_error, first.status_message) == (
        "POST /score",
        f"{200:016x}",
        True,
        "boom",
    )
    assert result.more is False


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        pytest.param({"pipeline": "fraud"}, [2, 1, 3], id="pipeline"),
        pytest.param({"min_ms": 60, "max_ms": 300}, [2, 1], id="duration-inclusive"),
        pytest.param({"min_ms": 120.000001}, [5, 2], id="duration-fraction"),
        pytest.param({"status": "error"}, [2], id="status-error"),
        pytest.param({"status": "ok"}, [5, 1, 3], id="status-ok"),
        pytest.param({"attributes": ["model.version:v8"]}, [1, 3], id="attribute"),
        pytest.param({"attributes": ["http.response.status_code:500"]}, [2], id="typed-attr"),
        pytest.param(
            {"attributes": ["model.version:v8", "http.response.status_code:500"]},
            [],
            id="attributes-all-hold",
        ),
        pytest.param({"stage": "forward"}, [2, 1], id="stage"),
        pytest.param({"stage": "forward", "min_ms": 100}, [2], id="stage-duration"),
        pytest.param({"stage": "preprocess", "max_ms": 20}, [1], id="stage-max"),
        pytest.param({"stage": "preprocess", "status": "ok"}, [1, 3], id="stage-and-status"),
        pytest.param({"end": T0 + 2 * HOUR}, [5, 2, 4, 1, 3], id="wider-window"),
        pytest.param({"start": T0 + 3 * dt.timedelta(minutes=1)}, [5, 3], id="start-inclusive"),
    ],
)
def test_each_filter(scene, filters, expected):
    if "pipeline" in filters:
        filters["pipeline_id"] = getattr(scene, filters.pop("pipeline")).pk
    if "stage" in filters:
        filters["stage_id"] = getattr(scene, filters.pop("stage")).pk
    if "attributes" in filters:
        filters["attributes"] = tuple(
            AttributeFilter(*text.split(":", 1)) for text in filters["attributes"]
        )

    assert found(scene, **filters) == expected


def test_a_stage_search_reports_that_stages_span(scene):
    result = queries.search_traces(
        scene.member, TraceFilters(start=T0, end=T0 + HOUR, stage_id=scene.forward.pk)
    )

    assert result.stage_name == "model_forward"
    assert [(t.duration_ms, t.stage_duration_ms) for t in result.traces] == [
        (300.0, 250.0),
        (120.0, 80.0),
    ]


def test_a_stage_span_starting_after_the_window_still_counts(scene):
    # given a request starting a minute before the window ends, its model_forward after it
    store(
        scene.team,
        request(scene, 7, T0 + HOUR - dt.timedelta(seconds=1), 5000, [(scene.forward, 4000, 900)]),
    )

    assert found(scene, stage_id=scene.forward.pk) == [7, 2, 1]


def test_limit_keeps_the_slowest_and_says_there_is_more(scene):
    result = queries.search_traces(scene.member, TraceFilters(start=T0, end=T0 + HOUR, limit=2))

    assert [t.trace_id for t in result.traces] == [trace_id(5), trace_id(2)]
    assert result.more is True


def test_ties_go_to_the_earlier_start(scene):
    store(scene.team, request(scene, 8, T0, 120))

    assert found(scene, pipeline_id=scene.fraud.pk) == [2, 8, 1, 3]


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        pytest.param(T0, T0 + 24 * HOUR + dt.timedelta(seconds=1), "end", id="over-24h"),
        pytest.param(T0, T0, "end", id="empty"),
        pytest.param(T0 + HOUR, T0, "end", id="backwards"),
    ],
)
def test_windows_out_of_bounds_are_refused(scene, start, end, field):
    with pytest.raises(queries.InvalidTraceQuery) as refused:
        queries.search_traces(scene.member, TraceFilters(start=start, end=end))

    assert refused.value.field == field


def test_a_24_hour_window_is_allowed(scene):
    assert found(scene, end=T0 + 24 * HOUR) == [5, 2, 4, 1, 3]


def test_outsiders_find_nothing_of_ours(scene):
    # their own search only holds their own trace
    assert found(scene, user=scene.outsider) == [6]
    assert found(scene, user=scene.member) == [5, 2, 1, 3]
    # and our pipeline and stage do not exist for them
    with pytest.raises(Pipeline.DoesNotExist):
        found(scene, user=scene.outsider, pipeline_id=scene.fraud.pk)
    with pytest.raises(Stage.DoesNotExist):
        found(scene, user=scene.outsider, stage_id=scene.forward.pk)


def test_a_stage_of_another_pipeline_is_refused(scene):
    with pytest.raises(queries.InvalidTraceQuery) as refused:
        found(scene, pipeline_id=scene.recommender.pk, stage_id=scene.forward.pk)

    assert refused.value.field == "stage"


# ----- search API ---------------------------------------------------------------------------


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_search_api(client, scene):
    client.force_login(scene.member)

    response = client.get(
        "/api/traces/",
        {
            "pipeline": scene.fraud.pk,
            "start": iso(T0),
            "end": iso(T0 + HOUR),
            "stage": scene.forward.pk,
            "attr": "model.version:v8",
        },
    )

    assert response.status_code == 200
    assert response.json() == {
        "start": iso(T0),
        "end": iso(T0 + HOUR),
        "limit": 50,
        "more": False,
        "traces": [
            {
                "trace_id": hex_of(1),
                "span_id": "0000000000000064",
                "pipeline": {"id": scene.fraud.pk, "name": "fraud-scorer (prod)"},
                "name": "POST /score",
                "start_time": iso(T0 + dt.timedelta(minutes=1)),
                "duration_ms": 120.0,
                "status": "ok",
                "status_message": "",
                "stage_duration_ms": 80.0,
            }
        ],
    }


def test_search_api_repeats_attr_and_defaults_to_the_last_hour(client, scene):
    now = dt.datetime.now(dt.UTC)
    store(
        scene.team,
        request(scene, 9, now - dt.timedelta(minutes=10), 42, attributes={"a": "1", "b": True}),
    )
    store(
        scene.team,
        request(scene, 10, now - dt.timedelta(minutes=70), 43, attributes={"a": "1", "b": True}),
    )
    client.force_login(scene.member)

    response = client.get("/api/traces/?attr=a:1&attr=b:true")

    assert response.status_code == 200
    assert [t["trace_id"] for t in response.json()["traces"]] == [hex_of(9)]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        pytest.param({"start": iso(T0), "end": iso(T0 + 25 * HOUR)}, "end", id="over-24h"),
        pytest.param({"window": "25h"}, "window", id="window-over-24h"),
        pytest.param({"start": iso(T0)}, "end", id="start-alone"),
        pytest.param(
            {"window": "1h", "start": iso(T0), "end": iso(T0 + HOUR)}, "window", id="both"
        ),
        pytest.param({"status": "failed"}, "status", id="status"),
        pytest.param({"stage": "forward"}, "stage", id="stage"),
        pytest.param({"attr": "no-colon"}, "attr", id="attr"),
        pytest.param({"min_ms": "5", "max_ms": "1"}, "max_ms", id="bounds-backwards"),
        pytest.param({"limit": "501"}, "limit", id="limit"),
    ],
)
def test_search_api_refuses_bad_parameters(client, scene, params, field):
    client.force_login(scene.member)

    response = client.get("/api/traces/", params)

    assert response.status_code == 400
    assert list(response.json()) == [field]


def test_search_api_takes_end_to_end_as_no_stage(client, scene):
    client.force_login(scene.member)
    window = {"start": iso(T0), "end": iso(T0 + HOUR)}

    end_to_end = client.get("/api/traces/", {**window, "stage": "end-to-end"})

    assert end_to_end.json() == client.get("/api/traces/", window).json()


def test_search_api_hides_other_teams_pipelines_and_stages(client, scene):
    client.force_login(scene.outsider)

    by_pipeline = client.get("/api/traces/", {"pipeline": scene.fraud.pk})
    by_stage = client.get("/api/traces/", {"stage": scene.forward.pk})

    assert (by_pipeline.status_code, by_stage.status_code) == (404, 404)


def test_the_api_needs_a_login(client, scene):
    assert client.get("/api/traces/").status_code == 401
    assert client.get(f"/api/traces/{hex_of(1)}/").status_code == 401


# ----- exemplars ----------------------------------------------------------------------------

MINUTE = T0 + dt.timedelta(hours=5, minutes=30)


@pytest.fixture
def busy_minute(scene) -> list[float]:
    """101 requests in MINUTE, root durations 1..101 ms in a shuffled order, each with a
    model_forward of half its root; and requests in the minutes around it."""
    rng = np.random.default_rng(5)
    durations = [float(ms) for ms in rng.permutation(np.arange(1, 102))]
    spans = []
    for k, ms in enumerate(durations):
        at = MINUTE + dt.timedelta(seconds=k * 0.5)
        spans += request(scene, 1000 + int(ms), at, ms, [(scene.forward, 0, ms / 2)])
    spans += request(scene, 2000, MINUTE - dt.timedelta(seconds=1), 100.4)
    spans += request(scene, 2001, MINUTE + dt.timedelta(minutes=1), 100.4)
    store(scene.team, spans)
    return durations


def test_exemplars_are_nearest_the_exact_quantile_of_the_minute(scene, busy_minute):
    result = exemplar_queries.trace_exemplars(
        scene.member, scene.fraud.pk, None, MINUTE + dt.timedelta(seconds=42), 0.99
    )

    expected = float(np.quantile(busy_minute, 0.99, method="lower"))
    assert expected == 100.0
    assert (result.n, result.quantile_ms, result.minute) == (101, expected, MINUTE)
    # 100 itself, then 99 and 101 (equally near: lower trace id first), then 98 and 97; the
    # requests of the minutes around it, 100.4 ms long, are not of this minute
    assert [t.duration_ms for t in result.traces] == [100.0, 99.0, 101.0, 98.0, 97.0]
    assert [t.trace_id for t in result.traces] == [
        trace_id(1000 + ms) for ms in (100, 99, 101, 98, 97)
    ]


def test_exemplars_of_a_stage(scene, busy_minute):
    result = exemplar_queries.trace_exemplars(
        scene.member, scene.fraud.pk, scene.forward.pk, MINUTE, 0.5, count=3
    )

    halves = [ms / 2 for ms in busy_minute]
    assert result.quantile_ms == float(np.quantile(halves, 0.5, method="lower")) == 25.5
    assert [(t.name, t.duration_ms) for t in result.traces] == [
        ("model_forward", 25.5),
        ("model_forward", 25.0),
        ("model_forward", 26.0),
    ]


def test_exemplars_of_an_empty_minute(scene):
    result = exemplar_queries.trace_exemplars(
        scene.member, scene.fraud.pk, None, T0 + 20 * HOUR, 0.99
    )

    assert (result.n, result.quantile_ns, result.traces) == (0, None, ())


def test_exemplars_of_a_chart_bucket_span_its_whole_step(scene, busy_minute):
    # when asked for the two minutes from MINUTE, as a chart with 2-minute steps would
    wide = exemplar_queries.trace_exemplars(
        scene.member, scene.fraud.pk, None, MINUTE, 0.995, width=2 * windows.MINUTE
    )
    alone = exemplar_queries.trace_exemplars(scene.member, scene.fraud.pk, None, MINUTE, 0.995)

    # then the next minute's 100.4 ms request counts, and is the order statistic itself
    assert (wide.n, wide.quantile_ms, wide.minute_end) == (102, 100.4, MINUTE + 2 * windows.MINUTE)
    assert wide.traces[0].trace_id == trace_id(2001)
    # and the minute alone has neither
    assert (alone.n, alone.quantile_ms) == (101, 100.0)


@pytest.mark.parametrize(
    "width",
    [
        pytest.param(dt.timedelta(seconds=90), id="not-whole-minutes"),
        pytest.param(dt.timedelta(0), id="empty"),
        pytest.param(25 * HOUR, id="over-a-day"),
    ],
)
def test_exemplars_refuse_a_width_they_cannot_read(scene, width):
    with pytest.raises(ValueError, match="width"):
        exemplar_queries.trace_exemplars(
            scene.member, scene.fraud.pk, None, MINUTE, 0.99, width=width
        )


def test_exemplars_api_takes_a_charts_step(client, scene, busy_minute):
    client.force_login(scene.member)

    response = client.get(
        "/api/traces/exemplars/",
        {"pipeline": scene.fraud.pk, "minute": iso(MINUTE), "step": "2m", "quantile": "0.995"},
    )

    body = response.json()
    assert (body["minute"], body["end"]) == (
        iso(MINUTE),
        iso(MINUTE + 2 * windows.MINUTE),
    )
    assert (body["n"], body["quantile_ms"]) == (102, 100.4)
    assert body["traces"][0]["trace_id"] == hex_of(2001)


def test_exemplars_api(client, scene, busy_minute):
    client.force_login(scene.member)

    response = client.get(
        "/api/traces/exemplars/",
        {
            "pipeline": scene.fraud.pk,
            "stage": "end-to-end",
            "minute": iso(MINUTE),
            "quantile": "0.99",
        },
    )
    near = client.get(
        "/api/traces/exemplars/",
        {"pipeline": scene.fraud.pk, "minute": iso(MINUTE), "near": "p99", "count": 1},
    )

    body = response.json()
    assert (body["n"], body["quantile_ms"], body["stage"]) == (101, 100.0, None)
    assert [t["trace_id"] for t in body["traces"]] == [
        hex_of(1100),
        hex_of(1099),
        hex_of(1101),
        hex_of(1098),
        hex_of(1097),
    ]
    assert [t["trace_id"] for t in near.json()["traces"]] == [hex_of(1100)]
    assert set(body) == set(ExemplarsSerializer().fields)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        pytest.param({"near": "p100.5"}, "near", id="near"),
        pytest.param({"near": "p99", "quantile": "0.99"}, "near", id="near-and-quantile"),
        pytest.param({"quantile": "1.5"}, "quantile", id="quantile"),
        pytest.param({"stage": "forward"}, "stage", id="stage"),
        pytest.param({"minute": "yesterday"}, "minute", id="minute"),
        pytest.param({"step": "90s"}, "step", id="step-unit"),
        pytest.param({"step": "0m"}, "step", id="step-empty"),
        pytest.param({"step": "2d"}, "step", id="step-over-a-day"),
    ],
)
def test_exemplars_api_refuses_bad_parameters(client, scene, params, field):
    client.force_login(scene.member)

    response = client.get(
        "/api/traces/exemplars/", {"pipeline": scene.fraud.pk, "minute": iso(MINUTE), **params}
    )

    assert response.status_code == 400
    assert list(response.json()) == [field]


def test_outsiders_get_no_exemplars_of_ours(client, scene, busy_minute):
    client.force_login(scene.outsider)

    response = client.get(
        "/api/traces/exemplars/", {"pipeline": scene.fraud.pk, "minute": iso(MINUTE)}
    )
    by_stage = client.get(
        "/api/traces/exemplars/",
        {"pipeline": scene.theirs.pk, "stage": scene.forward.pk, "minute": iso(MINUTE)},
    )

    assert (response.status_code, by_stage.status_code) == (404, 404)


# ----- waterfall ----------------------------------------------------------------------------


def test_waterfall_nests_spans_with_self_time_and_critical_path(scene):
    result = waterfall_queries.trace_waterfall(scene.member, trace_id(1))

    rows = [(result.spans[row.index], row) for row in result.waterfall.rows]
    assert [
        (
            span.name,
            span.stage_name,
            row.depth,
            row.duration_ns / 1e6,
            row.self_ns / 1e6,
            row.critical,
            row.critical_ns / 1e6,
        )
        for span, row in rows
    ] == [
        ("POST /score", "predict", 0, 120.0, 30.0, True, 30.0),
        ("preprocess", "preprocess", 1, 10.0, 10.0, True, 10.0),
        ("model_forward", "model_forward", 1, 80.0, 80.0, True, 80.0),
    ]
    assert rows[0][0].attributes == {"model.version": "v8", "http.response.status_code": 200}
    assert result.truncated is False


def test_waterfall_api(client, scene):
    # given an orphan in trace 1 and a span id with its top bit set
    store(
        scene.team,
        [
            StoredSpan(
                1, -1, 424242, scene.forward, T0 + dt.timedelta(minutes=1, milliseconds=200), 7
            )
        ],
    )
    client.force_login(scene.member)

    response = client.get(f"/api/traces/{hex_of(1)}/")

    assert response.status_code == 200
    body = response.json()
    assert (body["trace_id"], body["span_count"], body["duration_ms"]) == (hex_of(1), 4, 207.0)
    assert body["critical_path"] == [0, 1, 2]
    assert [s["critical_ms"] for s in body["spans"]] == [30.0, 10.0, 80.0, 0.0]
    assert [
        (s["span_id"], s["parent_span_id"], s["parent_index"], s["name"], s["self_ms"], s["orphan"])
        for s in body["spans"]
    ] == [
        ("0000000000000064", None, None, "POST /score", 30.0, False),
        ("0000000000000065", "0000000000000064", 0, "preprocess", 10.0, False),
        ("0000000000000066", "0000000000000064", 0, "model_forward", 80.0, False),
        ("ffffffffffffffff", "0000000000067932", None, "model_forward", 7.0, True),
    ]
    root = body["spans"][0]
    assert (root["kind"], root["status"], root["offset_ms"], root["is_root"]) == (
        "server",
        "unset",
        0.0,
        True,
    )
    assert set(body) == set(TraceWaterfallSerializer().fields)
    assert set(root) == set(WaterfallSpanSerializer().fields)


def test_waterfall_accepts_upper_case_hex(client, scene):
    client.force_login(scene.member)

    assert client.get(f"/api/traces/{hex_of(1).upper()}/").status_code == 200


def test_outsiders_cannot_open_our_trace(client, scene):
    with pytest.raises(waterfall_queries.TraceNotFound):
        waterfall_queries.trace_waterfall(scene.outsider, trace_id(1))
    client.force_login(scene.outsider)

    assert client.get(f"/api/traces/{hex_of(1)}/").status_code == 404
    assert client.get(f"/traces/{hex_of(1)}/").status_code == 404
    assert client.get(f"/api/traces/{hex_of(6)}/").status_code == 200


def test_an_unknown_trace_is_not_found(client, scene):
    client.force_login(scene.member)

    assert client.get(f"/api/traces/{'0' * 32}/").status_code == 404
    assert client.get("/api/traces/not-hex/").status_code == 404


def test_search_rows_have_the_documented_keys(client, scene):
    client.force_login(scene.member)

    body = client.get("/api/traces/", {"start": iso(T0), "end": iso(T0 + HOUR)}).json()

    assert set(body) == set(TraceSearchSerializer().fields)
    assert set(body["traces"][0]) == set(TraceSummarySerializer().fields)


def test_the_schema_documents_the_traces_api(client, scene):
    client.force_login(scene.member)

    schema = client.get("/api/schema/", {"format": "json"}).json()

    assert {"/api/traces/", "/api/traces/exemplars/", "/api/traces/{trace_id}/"} <= set(
        schema["paths"]
    )


# ----- pages --------------------------------------------------------------------------------


def test_search_page_lists_traces_linking_to_their_waterfalls(client, scene):
    client.force_login(scene.member)

    page = client.get(
        "/traces/",
        {"start": f"{T0:%Y-%m-%dT%H:%M}", "end": f"{T0 + HOUR:%Y-%m-%dT%H:%M}"},
    )

    assert page.status_code == 200
    html = page.content.decode()
    assert [hex_of(n) for n in (5, 2, 1, 3)] == [
        trace.trace_hex for trace in page.context["search"].traces
    ]
    assert f'href="/traces/{hex_of(2)}/"' in html
    assert hex_of(6) not in html


def test_search_page_takes_its_own_form_with_fields_left_empty(client, scene):
    client.force_login(scene.member)
    form = {"pipeline": "", "stage": "", "min_ms": "", "max_ms": "", "status": "", "attr": ""}

    page = client.get(
        "/traces/",
        {**form, "start": f"{T0:%Y-%m-%dT%H:%M:%S}", "end": f"{T0 + HOUR:%Y-%m-%dT%H:%M}"},
    )

    assert page.status_code == 200
    assert [t.trace_hex for t in page.context["search"].traces] == [hex_of(n) for n in (5, 2, 1, 3)]


def test_search_page_explains_a_refused_window(client, scene):
    client.force_login(scene.member)

    page = client.get("/traces/", {"start": iso(T0), "end": iso(T0 + 48 * HOUR)})

    assert page.status_code == 400
    assert "At most 24 h per search" in page.content.decode()


def test_search_page_shows_the_exemplars_of_a_chart_point(client, scene, busy_minute):
    client.force_login(scene.member)

    page = client.get(
        "/traces/", {"pipeline": scene.fraud.pk, "minute": iso(MINUTE), "near": "p99"}
    )

    assert page.status_code == 200
    html = page.content.decode()
    assert "Traces nearest the p99 of fraud-scorer (prod)" in html
    assert "100.000 ms" in html
    assert [t.trace_hex for t in page.context["exemplars"].traces][:1] == [hex_of(1100)]


def test_search_page_shows_the_exemplars_of_a_wider_chart_bucket(client, scene, busy_minute):
    client.force_login(scene.member)

    page = client.get(
        "/traces/",
        {"pipeline": scene.fraud.pk, "minute": iso(MINUTE), "step": "2m", "quantile": "0.995"},
    )

    assert page.status_code == 200
    html = page.content.decode()
    assert f"{MINUTE:%Y-%m-%d %H:%M}\N{EN DASH}{MINUTE + 2 * windows.MINUTE:%H:%M} UTC" in html
    assert "computed exactly over the 102 spans of the 2 minutes" in html
    assert "100.400 ms" in html


def test_pages_need_a_login(client, scene):
    assert client.get("/traces/").status_code == 302
    assert client.get(f"/traces/{hex_of(1)}/").status_code == 302


def test_waterfall_page_embeds_the_trace(client, scene):
    client.force_login(scene.member)

    page = client.get(f"/traces/{hex_of(2)}/")

    assert page.status_code == 200
    assert page.context["trace"]["span_count"] == 2
    assert 'id="trace-data"' in page.content.decode()

"""Tests for SLA objectives: exact back-fill from raw spans, attainment, and the team-scoped API."""

from __future__ import annotations

import datetime as dt
import itertools
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import cast

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla import queries, services
from latencyboard.sla.counting import ObjectiveSpec, count_minutes
from latencyboard.sla.models import Objective, SlaMinute, Window
from latencyboard.spans.partitions import DayPartition
from latencyboard.teams.models import Role, Team
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.UTC)
THRESHOLD_MS = 250.5
THRESHOLD_NS = 250_500_000
_span_ids = itertools.count(1)


def member(team: Team | None = None, role: Role = Role.VIEWER) -> User:
    """A user with ``role`` in ``team``, typed as the ``User`` the services take."""
    return cast(User, make_user(team, role))


def minute(n: int, seconds: float = 0) -> dt.datetime:
    return T0 + dt.timedelta(minutes=n, seconds=seconds)


@dataclass(frozen=True)
class RawSpan:
    pipeline: Pipeline
    stage: Stage
    start: dt.datetime
    duration_ns: int
    is_root: bool = False


@dataclass
class Scene:
    team: Team
    pipeline: Pipeline
    forward: Stage
    preprocess: Stage
    other_pipeline: Pipeline


@pytest.fixture
def scene() -> Scene:
    team = make_team("fraud")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    other = Pipeline.objects.create(team=team, service_name="recommender")
    return Scene(
        team=team,
        pipeline=pipeline,
        forward=Stage.objects.create(pipeline=pipeline, name="model_forward"),
        preprocess=Stage.objects.create(pipeline=pipeline, name="preprocess"),
        other_pipeline=other,
    )


def store_batch(team: Team, spans: Iterable[RawSpan], *, rolled_up: bool) -> int:
    """Real rows in spans_ingestbatch and spans_span, as the ingest writer leaves them."""
    spans = list(spans)
    with connection.cursor() as cursor:
        for day in {DayPartition.of(span.start) for span in spans}:
            cursor.execute(day.create_sql())
        cursor.execute(
            """
            INSERT INTO spans_ingestbatch (team_id, received_at, protocol, stored_spans,
                                           duplicate_spans, rejected_spans, rolled_up_at)
            VALUES (%s, now(), 'http', %s, 0, 0, CASE WHEN %s THEN now() END) RETURNING id
            """,
            [team.pk, len(spans), rolled_up],
        )
        (batch_id,) = cursor.fetchone()
        cursor.executemany(
            """
            INSERT INTO spans_span (team_id, pipeline_id, stage_id, batch_id, trace_id, span_id,
                                    name, kind, status_code, start_time, duration_ns, is_root)
            VALUES (%s, %s, %s, %s, %s, %s, %s, 1, 0, %s, %s, %s)
            """,
            [
                (
                    team.pk,
                    span.pipeline.pk,
                    span.stage.pk,
                    batch_id,
                    uuid.uuid4(),
                    next(_span_ids),
                    span.stage.name,
                    span.start,
                    span.duration_ns,
                    span.is_root,
                )
                for span in spans
            ],
        )
    return int(batch_id)


def random_spans(scene: Scene, count: int, seed: int) -> list[RawSpan]:
    """Spans over five minutes of both stages and both pipelines, many near the threshold."""
    rng = random.Random(seed)
    stages = [scene.forward, scene.preprocess]
    spans = []
    for _ in range(count):
        stage = rng.choice(stages)
        spans.append(
            RawSpan(
                pipeline=scene.pipeline,
                stage=stage,
                start=minute(0, rng.uniform(0, 300)),
                duration_ns=THRESHOLD_NS + rng.randint(-2_000, 2_000),
                is_root=stage == scene.preprocess and rng.random() < 0.5,
            )
        )
    other_stage = Stage.objects.create(pipeline=scene.other_pipeline, name="model_forward")
    spans += [RawSpan(scene.other_pipeline, other_stage, minute(1), 1, is_root=True)] * 3
    return spans


def counters(objective: Objective) -> dict[dt.datetime, tuple[int, int]]:
    return {
        row.minute: (row.good, row.total) for row in SlaMinute.objects.filter(objective=objective)
    }


def recount(objective: Objective, threshold_ns: int) -> dict[dt.datetime, tuple[int, int]]:
    """The auditor's count, straight from raw spans of rolled-up batches."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT date_trunc('minute', start_time),
                   count(*) FILTER (WHERE duration_ns <= %s), count(*)
            FROM spans_span s JOIN spans_ingestbatch b ON b.id = s.batch_id
            WHERE b.rolled_up_at IS NOT NULL AND s.pipeline_id = %s
              AND (s.stage_id = %s OR (%s IS NULL AND s.is_root))
            GROUP BY 1
            """,
            [threshold_ns, objective.pipeline_id, objective.stage_id, objective.stage_id],
        )
        return {row[0]: (row[1], row[2]) for row in cursor.fetchall()}


def worker_count(objective: Objective) -> dict[dt.datetime, tuple[int, int]]:
    """What the rollup worker's rule (counting.count_minutes) makes of the same folded spans."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT pipeline_id, stage_id, is_root,
                   floor(extract(epoch FROM start_time) / 60)::bigint, duration_ns
            FROM spans_span s JOIN spans_ingestbatch b ON b.id = s.batch_id
            WHERE b.rolled_up_at IS NOT NULL
            """
        )
        rows = cursor.fetchall()
    columns = list(zip(*rows, strict=True))
    counts = count_minutes(
        [
            ObjectiveSpec(
                objective.pk, objective.pipeline_id, objective.stage_id, objective.threshold_ms
            )
        ],
        np.array(columns[0], dtype=np.int64),
        np.array(columns[1], dtype=np.int64),
        np.array(columns[2], dtype=np.bool_),
        np.array(columns[3], dtype=np.int64),
        np.array(columns[4], dtype=np.float64) / 1e6,
    )
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return {epoch + dt.timedelta(minutes=c.minute): (c.good, c.total) for c in counts}


def new_objective(scene: Scene, stage: Stage | None, **overrides: object) -> Objective:
    fields: dict[str, object] = {
        "team": scene.team,
        "pipeline": scene.pipeline,
        "stage": stage,
        "name": "p99 under 250.5 ms",
        "threshold_ms": THRESHOLD_MS,
        "target_percent": Decimal("99.9"),
        "window": Window.ROLLING_28D,
        "created_by": member(scene.team, Role.ADMIN),
    }
    fields.update(overrides)
    return services.create_objective(**fields)  # type: ignore[arg-type]


# --- back-fill ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end_to_end", "edge_minutes"),
    [
        pytest.param(False, {minute(10): (1, 1), minute(11): (0, 1)}, id="stage"),
        pytest.param(True, {minute(10): (1, 2), minute(11): (1, 1)}, id="end-to-end"),
    ],
)
def test_counters_equal_an_independent_count_over_raw_spans(scene, end_to_end, edge_minutes):
    # given folded spans around the threshold, over both stages and pipelines, plus spans
    # exactly on it and 1 ns above in minutes of their own, on both sides of a minute boundary
    edge = [
        RawSpan(scene.pipeline, scene.preprocess, minute(10), THRESHOLD_NS, is_root=True),
        RawSpan(scene.pipeline, scene.preprocess, minute(10, 59.999999), THRESHOLD_NS + 1, True),
        RawSpan(scene.pipeline, scene.preprocess, minute(11), THRESHOLD_NS - 1, is_root=True),
        RawSpan(scene.pipeline, scene.forward, minute(10, 1), THRESHOLD_NS),
        RawSpan(scene.pipeline, scene.forward, minute(11), THRESHOLD_NS + 1),
    ]
    store_batch(scene.team, random_spans(scene, 2_000, seed=1), rolled_up=True)
    store_batch(scene.team, edge, rolled_up=True)
    stage = None if end_to_end else scene.forward

    # when an objective is created over them
    objective = new_objective(scene, stage)

    # then every minute's counters are what a fresh count over the raw spans says
    expected = recount(objective, THRESHOLD_NS)
    assert counters(objective) == expected
    assert len(expected) == 7
    assert sum(total for _, total in expected.values()) > 500
    assert {m: expected[m] for m in edge_minutes} == edge_minutes
    # and what the rollup worker's rule would have counted, to the request
    assert counters(objective) == worker_count(objective)


def test_span_exactly_at_threshold_is_good_and_one_nanosecond_over_is_bad(scene):
    store_batch(
        scene.team,
        [
            RawSpan(scene.pipeline, scene.forward, minute(0), THRESHOLD_NS),
            RawSpan(scene.pipeline, scene.forward, minute(0, 30), THRESHOLD_NS + 1),
            RawSpan(scene.pipeline, scene.forward, minute(1), THRESHOLD_NS - 1),
        ],
        rolled_up=True,
    )

    objective = new_objective(scene, scene.forward)

    assert counters(objective) == {minute(0): (1, 2), minute(1): (1, 1)}


def test_end_to_end_objective_counts_root_spans_of_its_pipeline_only(scene):
    store_batch(
        scene.team,
        [
            RawSpan(scene.pipeline, scene.preprocess, minute(0), 1, is_root=True),
            RawSpan(scene.pipeline, scene.forward, minute(0), 1, is_root=True),
            RawSpan(scene.pipeline, scene.forward, minute(0), THRESHOLD_NS + 1, is_root=True),
            RawSpan(scene.pipeline, scene.forward, minute(0), 1),  # a child: not end to end
        ],
        rolled_up=True,
    )
    other_stage = Stage.objects.create(pipeline=scene.other_pipeline, name="root")
    store_batch(
        scene.team,
        [RawSpan(scene.other_pipeline, other_stage, minute(0), 1, is_root=True)],
        rolled_up=True,
    )

    objective = new_objective(scene, None)

    assert counters(objective) == {minute(0): (2, 3)}


def test_spans_of_batches_not_yet_folded_are_left_to_the_worker(scene):
    # given one folded batch and one the rollup worker has not reached yet
    store_batch(scene.team, [RawSpan(scene.pipeline, scene.forward, minute(0), 1)], rolled_up=True)
    store_batch(
        scene.team,
        [
            RawSpan(scene.pipeline, scene.forward, minute(0, 10), 1),
            RawSpan(scene.pipeline, scene.forward, minute(5), 1),
        ],
        rolled_up=False,
    )

    objective = new_objective(scene, scene.forward)

    # then only the folded span is counted: the shared minute has 1, the other is absent
    assert counters(objective) == {minute(0): (1, 1)}


def test_objective_without_folded_spans_starts_empty(scene):
    objective = new_objective(scene, scene.forward)

    assert counters(objective) == {}


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL, Role.AUDITOR])
def test_only_team_admins_create_objectives(scene, role):
    with pytest.raises(PermissionDenied):
        new_objective(scene, None, created_by=member(scene.team, role))

    assert not Objective.objects.exists()


def test_admin_of_another_team_cannot_create_objectives_here(scene):
    with pytest.raises(PermissionDenied):
        new_objective(scene, None, created_by=member(make_team(), Role.ADMIN))

    assert not Objective.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        pytest.param({"threshold_ms": 0.0}, "threshold_ms", id="zero-threshold"),
        pytest.param({"target_percent": Decimal(0)}, "target_percent", id="zero-target"),
        pytest.param({"target_percent": Decimal("100.001")}, "target_percent", id="over-100"),
        pytest.param({"window": "fortnight"}, "window", id="unknown-window"),
    ],
)
def test_service_refuses_out_of_range_values(scene, overrides, field):
    with pytest.raises(ValidationError) as raised:
        new_objective(scene, None, **overrides)

    assert set(raised.value.message_dict) == {field}
    assert not Objective.objects.exists()


def test_service_refuses_pipeline_of_another_team_and_stage_of_another_pipeline(scene):
    foreign = Pipeline.objects.create(team=make_team(), service_name="elsewhere")
    other_stage = Stage.objects.create(pipeline=scene.other_pipeline, name="x")

    with pytest.raises(ValidationError) as wrong_pipeline:
        new_objective(scene, None, pipeline=foreign)
    with pytest.raises(ValidationError) as wrong_stage:
        new_objective(scene, other_stage)

    assert set(wrong_pipeline.value.message_dict) == {"pipeline"}
    assert set(wrong_stage.value.message_dict) == {"stage"}
    assert not Objective.objects.exists()


def test_deleting_an_objective_drops_its_counters(scene):
    store_batch(scene.team, [RawSpan(scene.pipeline, scene.forward, minute(0), 1)], rolled_up=True)
    objective = new_objective(scene, scene.forward)
    admin = member(scene.team, Role.ADMIN)

    assert services.delete_objective(objective, admin) is True
    assert services.delete_objective(objective, admin) is False
    assert not SlaMinute.objects.exists()


def test_only_team_admins_delete_objectives(scene):
    objective = new_objective(scene, None)

    with pytest.raises(PermissionDenied):
        services.delete_objective(objective, member(scene.team, Role.ONCALL))

    assert Objective.objects.filter(pk=objective.pk).exists()


# --- attainment query ---------------------------------------------------------------------


def put_minutes(objective: Objective, rows: Iterable[tuple[dt.datetime, int, int]]) -> None:
    SlaMinute.objects.bulk_create(
        SlaMinute(objective=objective, minute=at, good=good, total=total)
        for at, good, total in rows
    )


def test_attainment_series_and_rolling_window(scene):
    objective = new_objective(scene, scene.forward)
    now = minute(150, 20)
    put_minutes(
        objective,
        [
            (minute(0), 999, 1000),
            (minute(59), 1, 1),
            (minute(120), 0, 2),
            (minute(-28 * 1440 + 150), 1, 1),  # first minute of the 28 days
            (minute(-28 * 1440 + 149), 0, 50),  # the minute before: outside
        ],
    )

    series = queries.attainment(objective, minute(0), minute(180), dt.timedelta(hours=1), now)

    assert [(b.start, b.good, b.total, b.attainment_percent) for b in series.buckets] == [
        (minute(0), 1000, 1001, 100 * 1000 / 1001),
        (minute(60), 0, 0, None),
        (minute(120), 0, 2, 0.0),
    ]
    assert (series.window.start, series.window.end) == (minute(-28 * 1440 + 151), minute(151))
    assert (series.summary.good, series.summary.total) == (1000, 1003)
    assert series.summary.met is False
    assert series.summary.allowed_bad == Decimal("1.003")


def test_attainment_of_a_calendar_month_starts_on_the_first_in_utc(scene):
    objective = new_objective(scene, None, window=Window.CALENDAR_MONTH)
    put_minutes(
        objective,
        [
            (dt.datetime(2026, 10, 31, 23, 59, tzinfo=dt.UTC), 0, 7),
            (dt.datetime(2026, 11, 1, 0, 0, tzinfo=dt.UTC), 999, 1000),
        ],
    )

    series = queries.attainment(objective, minute(0), minute(1), dt.timedelta(minutes=1), T0)

    assert series.window.start == dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    assert (series.summary.good, series.summary.total, series.summary.met) == (999, 1000, True)


def test_attainment_of_an_empty_window_is_none(scene):
    objective = new_objective(scene, None)

    series = queries.attainment(objective, minute(0), minute(60), dt.timedelta(hours=1), T0)

    assert series.summary.attainment_percent is None
    assert series.summary.met is None
    assert [b.attainment_percent for b in series.buckets] == [None]


def test_objectives_of_lists_only_the_users_teams(scene):
    ours = new_objective(scene, None)
    theirs = Pipeline.objects.create(team=make_team(), service_name="x")
    new_objective(
        scene,
        None,
        team=theirs.team,
        pipeline=theirs,
        created_by=member(theirs.team, Role.ADMIN),
    )

    assert list(queries.objectives_of(member(scene.team))) == [ours]
    assert list(queries.objectives_of(member())) == []


# --- API ----------------------------------------------------------------------------------


def create_payload(scene: Scene, **overrides: object) -> dict[str, object]:
    payload: dict[str, object] = {
        "pipeline": scene.pipeline.pk,
        "stage": scene.forward.pk,
        "name": "model under 250.5 ms",
        "threshold_ms": "250.5",
        "target_percent": "99.9",
        "window": "calendar_month",
    }
    payload.update(overrides)
    return {k: v for k, v in payload.items() if v is not None}


def test_admin_creates_objective_and_it_is_backfilled(client, scene):
    store_batch(
        scene.team,
        [
            RawSpan(scene.pipeline, scene.forward, minute(0), THRESHOLD_NS),
            RawSpan(scene.pipeline, scene.forward, minute(0), THRESHOLD_NS + 1),
        ],
        rolled_up=True,
    )
    client.force_login(member(scene.team, Role.ADMIN))

    response = client.post("/api/slas/", create_payload(scene), content_type="application/json")

    assert response.status_code == 201
    body = response.json()
    objective = Objective.objects.get()
    assert body == {
        "id": objective.pk,
        "team": scene.team.pk,
        "pipeline": scene.pipeline.pk,
        "stage": scene.forward.pk,
        "name": "model under 250.5 ms",
        "threshold_ms": 250.5,
        "target_percent": "99.900",
        "window": "calendar_month",
        "created_at": body["created_at"],
    }
    assert counters(objective) == {minute(0): (1, 2)}


def test_end_to_end_objective_is_created_without_a_stage(client, scene):
    client.force_login(member(scene.team, Role.ADMIN))

    response = client.post(
        "/api/slas/", create_payload(scene, stage=None), content_type="application/json"
    )

    assert response.status_code == 201
    assert response.json()["stage"] is None
    assert response.json()["window"] == "calendar_month"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        pytest.param({"threshold_ms": "0"}, "threshold_ms", id="threshold-zero"),
        pytest.param({"threshold_ms": "-1"}, "threshold_ms", id="threshold-negative"),
        pytest.param({"threshold_ms": "1.0000001"}, "threshold_ms", id="threshold-sub-ns"),
        pytest.param({"threshold_ms": "abc"}, "threshold_ms", id="threshold-not-number"),
        pytest.param({"target_percent": "0"}, "target_percent", id="target-zero"),
        pytest.param({"target_percent": "100.001"}, "target_percent", id="target-over-100"),
        pytest.param({"target_percent": None}, "target_percent", id="target-missing"),
        pytest.param({"window": "weekly"}, "window", id="window-unknown"),
        pytest.param({"name": ""}, "name", id="name-blank"),
        pytest.param({"pipeline": 0}, "pipeline", id="pipeline-unknown"),
    ],
)
def test_create_refuses_invalid_input_with_field_errors(client, scene, overrides, field):
    client.force_login(member(scene.team, Role.ADMIN))

    response = client.post(
        "/api/slas/", create_payload(scene, **overrides), content_type="application/json"
    )

    assert response.status_code == 400
    assert set(response.json()) == {field}
    assert not Objective.objects.exists()


def test_create_refuses_a_stage_of_another_pipeline(client, scene):
    client.force_login(member(scene.team, Role.ADMIN))
    other_stage = Stage.objects.create(pipeline=scene.other_pipeline, name="model_forward")

    response = client.post(
        "/api/slas/", create_payload(scene, stage=other_stage.pk), content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json() == {"stage": ["Not a stage of this pipeline."]}
    assert not Objective.objects.exists()


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL, Role.AUDITOR])
def test_members_without_admin_role_read_but_do_not_create_or_delete(client, scene, role):
    objective = new_objective(scene, scene.forward)
    client.force_login(member(scene.team, role))

    listed = client.get("/api/slas/")
    detail = client.get(f"/api/slas/{objective.pk}/")
    series = client.get(f"/api/slas/{objective.pk}/attainment/")
    created = client.post("/api/slas/", create_payload(scene), content_type="application/json")
    deleted = client.delete(f"/api/slas/{objective.pk}/")

    assert [o["id"] for o in listed.json()] == [objective.pk]
    assert detail.status_code == 200
    assert series.status_code == 200
    assert created.status_code == 403
    assert deleted.status_code == 403
    assert list(Objective.objects.all()) == [objective]


def test_outsider_sees_nothing_and_changes_nothing(client, scene):
    # given an objective with counters, and an admin of another team
    store_batch(scene.team, [RawSpan(scene.pipeline, scene.forward, minute(0), 1)], rolled_up=True)
    objective = new_objective(scene, scene.forward)
    client.force_login(member(make_team("theirs"), Role.ADMIN))

    # when they try every door
    listed = client.get("/api/slas/")
    detail = client.get(f"/api/slas/{objective.pk}/")
    series = client.get(f"/api/slas/{objective.pk}/attainment/")
    deleted = client.delete(f"/api/slas/{objective.pk}/")
    created = client.post("/api/slas/", create_payload(scene), content_type="application/json")

    # then the objective does not exist for them, and our pipeline neither
    assert listed.status_code == 200
    assert listed.json() == []
    assert (detail.status_code, series.status_code, deleted.status_code) == (404, 404, 404)
    assert str(objective.pk) not in detail.content.decode()
    assert created.status_code == 400
    assert set(created.json()) == {"pipeline", "stage"}
    assert "fraud-scorer" not in created.content.decode()
    # and nothing changed
    assert list(Objective.objects.all()) == [objective]
    assert counters(objective) == {minute(0): (1, 1)}


def test_anonymous_is_refused(client, scene):
    objective = new_objective(scene, None)

    responses = [
        client.get("/api/slas/"),
        client.get(f"/api/slas/{objective.pk}/"),
        client.get(f"/api/slas/{objective.pk}/attainment/"),
        client.post("/api/slas/", create_payload(scene), content_type="application/json"),
        client.delete(f"/api/slas/{objective.pk}/"),
    ]

    assert [r.status_code for r in responses] == [401] * 5
    assert list(Objective.objects.all()) == [objective]


def test_admin_deletes_objective(client, scene):
    objective = new_objective(scene, None)
    client.force_login(member(scene.team, Role.ADMIN))

    response = client.delete(f"/api/slas/{objective.pk}/")

    assert response.status_code == 204
    assert not Objective.objects.exists()


def test_attainment_endpoint(client, scene):
    # given counters an hour ago (inside the rolling window) and 29 days ago (outside)
    objective = new_objective(scene, scene.forward)
    hour_ago = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(hours=1)
    put_minutes(
        objective,
        [
            (hour_ago, 998, 1000),
            (hour_ago + dt.timedelta(minutes=1), 2, 2),
            (hour_ago - dt.timedelta(days=29), 0, 100),
        ],
    )
    client.force_login(member(scene.team))

    # when a viewer asks for those two minutes in one-minute steps
    response = client.get(
        f"/api/slas/{objective.pk}/attainment/",
        {
            "start": hour_ago.isoformat(),
            "end": (hour_ago + dt.timedelta(minutes=2)).isoformat(),
            "step": "60",
        },
    )

    # then both minutes come back exactly, with the rolling window's budget
    assert response.status_code == 200
    body = response.json()
    assert body["step_seconds"] == 60
    assert [(b["good"], b["total"], b["attainment_percent"]) for b in body["buckets"]] == [
        (998, 1000, 99.8),
        (2, 2, 100.0),
    ]
    assert body["window"]["kind"] == "rolling_28d"
    assert body["summary"] == {
        "good": 1000,
        "total": 1002,
        "bad": 2,
        "target_percent": "99.900",
        "attainment_percent": 100 * 1000 / 1002,
        "met": False,
        "allowed_bad": "1.00200",
        "remaining_bad": "-0.99800",
        "consumed_percent": pytest.approx(200 / 1.002, rel=1e-12),
        "remaining_percent": pytest.approx(100 - 200 / 1.002, rel=1e-12),
    }


def test_attainment_endpoint_defaults_to_the_objectives_window(client, scene):
    objective = new_objective(scene, None, window=Window.CALENDAR_MONTH)
    client.force_login(member(scene.team))

    default = client.get(f"/api/slas/{objective.pk}/attainment/", {"step": "PT1H"}).json()
    rolling = client.get(f"/api/slas/{objective.pk}/attainment/", {"window": "28d"}).json()

    assert default["start"] == default["window"]["start"]
    assert default["window"]["start"].endswith("-01T00:00:00Z")
    assert rolling["step_seconds"] == 3600
    assert len(rolling["buckets"]) == 28 * 24


@pytest.mark.parametrize(
    ("params", "field"),
    [
        pytest.param({"start": "2026-11-02T10:00:00Z"}, "end", id="start-without-end"),
        pytest.param({"end": "2026-11-02T10:00:00Z"}, "start", id="end-without-start"),
        pytest.param(
            {"start": "2026-11-02T10:00:00Z", "end": "2026-11-02T11:00:00Z", "window": "28d"},
            "window",
            id="range-and-window",
        ),
        pytest.param(
            {"start": "2026-11-02T10:00:00Z", "end": "2026-11-02T10:00:30Z"},
            "end",
            id="end-not-after-start",
        ),
        pytest.param({"window": "28d", "step": "30"}, "step", id="step-under-a-minute"),
        pytest.param({"window": "28d", "step": "90"}, "step", id="step-not-whole-minutes"),
        pytest.param({"window": "28d", "step": "60"}, "step", id="too-many-steps"),
        pytest.param({"window": "year"}, "window", id="window-unknown"),
        pytest.param({"start": "yesterday", "end": "today"}, "start", id="not-a-time"),
    ],
)
def test_attainment_refuses_invalid_parameters(client, scene, params, field):
    objective = new_objective(scene, None)
    client.force_login(member(scene.team))

    response = client.get(f"/api/slas/{objective.pk}/attainment/", params)

    assert response.status_code == 400
    assert field in response.json()


def test_openapi_schema_documents_the_sla_api():
    schema = SchemaGenerator().get_schema(request=None, public=True)

    assert {path for path in schema["paths"] if path.startswith("/api/slas/")} == {
        "/api/slas/",
        "/api/slas/{objective_id}/",
        "/api/slas/{objective_id}/attainment/",
        "/api/slas/{objective_id}/maintenance/",
        "/api/slas/{objective_id}/maintenance/{window_id}/",
    }
    assert set(schema["paths"]["/api/slas/{objective_id}/maintenance/"]) == {"get", "post"}
    assert set(schema["paths"]["/api/slas/{objective_id}/maintenance/{window_id}/"]) == {"delete"}
    attainment = schema["paths"]["/api/slas/{objective_id}/attainment/"]["get"]
    assert {p["name"] for p in attainment["parameters"]} == {
        "objective_id",
        "start",
        "end",
        "window",
        "step",
    }
    assert "AttainmentSeries" in schema["components"]["schemas"]

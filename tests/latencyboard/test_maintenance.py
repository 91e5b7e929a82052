"""Tests for SLA maintenance windows: exact attainment without their minutes, who may add or
delete them, and their API. Which minutes a window excludes is tested without a database in
``test_sla_attainment.py``."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla import queries, services
from latencyboard.sla.attainment import BudgetPoint, Counts, MinuteRange
from latencyboard.sla.models import Coverage, MaintenanceWindow, Objective, SlaMinute, Window
from latencyboard.teams.models import Role, Team
from tests.factories import make_team
from tests.latencyboard.test_sla import member, put_minutes

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.UTC)
NOW = T0 + dt.timedelta(hours=5)
HOUR = dt.timedelta(hours=1)
MINUTE = dt.timedelta(minutes=1)


def at(minutes: int, seconds: float = 0) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes, seconds=seconds)


# --- attainment without maintenance minutes (database) ---------------------------------------


@pytest.fixture
def team() -> Team:
    return make_team("fraud")


@pytest.fixture
def pipeline(team: Team) -> Pipeline:
    return Pipeline.objects.create(team=team, service_name="fraud-scorer")


def make_objective(pipeline: Pipeline, **fields: object) -> Objective:
    """An objective over ``pipeline``'s root spans, target 99%, without spans to back-fill."""
    values: dict[str, object] = {
        "team": pipeline.team,
        "pipeline": pipeline,
        "stage": None,
        "name": "end to end under 300 ms",
        "threshold_ms": 300.0,
        "target_percent": Decimal(99),
        "window": Window.ROLLING_28D,
        "created_by": member(pipeline.team, Role.ADMIN),
    }
    values.update(fields)
    return services.create_objective(**values)  # type: ignore[arg-type]


@pytest.fixture
def objective(pipeline: Pipeline) -> Objective:
    """Three minutes: 999/1,000 good, then a bad one (90/100), then 1,000/1,000."""
    objective = make_objective(pipeline)
    put_minutes(objective, [(at(0), 999, 1000), (at(1), 90, 100), (at(2), 1000, 1000)])
    return objective


def add_window(
    objective: Objective,
    start: dt.datetime,
    end: dt.datetime,
    covers: Coverage = Coverage.OBJECTIVE,
) -> MaintenanceWindow:
    return services.add_maintenance_window(
        objective,
        covers=covers,
        start=start,
        end=end,
        reason="GPU node pool upgrade",
        created_by=member(objective.team, Role.ADMIN),
        now=NOW,
    )


def counters(objective: Objective) -> list[tuple[dt.datetime, int, int]]:
    return list(
        SlaMinute.objects.filter(objective=objective)
        .order_by("minute")
        .values_list("minute", "good", "total")
    )


def test_a_window_over_the_bad_minute_raises_attainment_exactly(objective):
    # given the window's budget by hand: 2,089 good of 2,100, 21 bad allowed at 99%
    before = queries.window_budget(objective, NOW)
    assert (before.summary.good, before.summary.total, before.summary.met) == (2089, 2100, True)
    assert before.summary.remaining_bad == Decimal(10)

    # when the minute of 10:01 is declared maintenance
    add_window(objective, at(1), at(2))

    # then it is left out: 1,999 good of 2,000, 20 allowed, 1 spent, 19 left (95%)
    after = queries.window_budget(objective, NOW)
    assert (after.summary.good, after.summary.total, after.summary.bad) == (1999, 2000, 1)
    assert after.summary.attainment_percent == 100 * 1999 / 2000
    assert after.summary.allowed_bad == Decimal(20)
    assert after.summary.remaining_bad == Decimal(19)
    assert after.summary.remaining_percent == 95.0
    assert after.excluded == Counts(90, 100)
    # and the counters an auditor recomputes from are untouched
    assert counters(objective) == [(at(0), 999, 1000), (at(1), 90, 100), (at(2), 1000, 1000)]


def test_series_leaves_maintenance_minutes_out_of_every_step(objective):
    add_window(objective, at(1), at(2))

    by_minute = queries.attainment(objective, at(0), at(3), MINUTE, NOW)
    by_hour = queries.attainment(objective, at(0), at(60), HOUR, NOW)

    assert [(b.good, b.total) for b in by_minute.buckets] == [(999, 1000), (0, 0), (1000, 1000)]
    assert by_minute.buckets[1].attainment_percent is None
    assert by_minute.maintenance == (MinuteRange(at(1), at(2)),)
    assert [(b.good, b.total) for b in by_hour.buckets] == [(1999, 2000)]
    assert by_hour.burn_down == (BudgetPoint(at(60), 1999, 2000, 95.0),)


def test_a_minute_that_starts_before_the_window_still_counts(objective):
    # given a window from 10:01:30: the minute of 10:01 started before it, 10:02 inside it
    add_window(objective, at(1, 30), at(2, 30))

    result = queries.window_budget(objective, NOW)

    assert (result.summary.good, result.summary.total) == (1089, 1100)
    assert result.excluded == Counts(1000, 1000)


def test_a_deleted_window_excludes_nothing_but_stays_listed(objective):
    window = add_window(objective, at(1), at(2))

    assert services.delete_maintenance_window(window, member(objective.team, Role.ADMIN), NOW)

    result = queries.window_budget(objective, NOW)
    assert (result.summary.good, result.summary.total) == (2089, 2100)
    assert result.excluded == Counts(0, 0)
    assert list(queries.maintenance_windows(objective)) == [window]


def test_a_pipeline_window_covers_every_objective_of_the_pipeline_only(objective, pipeline):
    sibling = make_objective(pipeline, name="sibling")
    elsewhere = make_objective(
        Pipeline.objects.create(team=pipeline.team, service_name="recommender"), name="other"
    )
    for other in (sibling, elsewhere):
        put_minutes(other, [(at(1), 0, 10)])

    window = add_window(objective, at(1), at(2), covers=Coverage.PIPELINE)

    assert (window.objective, window.pipeline) == (None, pipeline)
    assert queries.window_budget(sibling, NOW).excluded == Counts(0, 10)
    assert queries.window_budget(elsewhere, NOW).excluded == Counts(0, 0)
    assert list(queries.maintenance_windows(sibling)) == [window]
    assert list(queries.maintenance_windows(elsewhere)) == []


def test_an_objective_window_does_not_cover_its_siblings(objective, pipeline):
    sibling = make_objective(pipeline, name="sibling")
    put_minutes(sibling, [(at(1), 0, 10)])

    add_window(objective, at(1), at(2))

    assert queries.window_budget(sibling, NOW).excluded == Counts(0, 0)
    assert list(queries.maintenance_windows(sibling)) == []


def test_the_overviews_budgets_are_the_sla_pages_objective_by_objective(objective, pipeline):
    # given three objectives: one with its own window over its bad minute, a pipeline window
    # over 10:02 covering it and its sibling, and one of another pipeline that none covers
    sibling = make_objective(pipeline, name="sibling")
    elsewhere = make_objective(
        Pipeline.objects.create(team=pipeline.team, service_name="recommender"), name="other"
    )
    put_minutes(sibling, [(at(1), 5, 10), (at(2), 0, 10)])
    put_minutes(elsewhere, [(at(1), 7, 10)])
    add_window(objective, at(1), at(2))
    add_window(sibling, at(2), at(3), covers=Coverage.PIPELINE)
    objectives = [objective, sibling, elsewhere]

    # when the overview reads every budget at once
    windows = {o.pk: queries.window_budget(o, NOW).window for o in objectives}
    overview = queries.budgets(objectives, {pk: (w.start, w.end) for pk, w in windows.items()})

    # then each is the SLA page's budget of that objective
    assert overview == {o.pk: queries.window_budget(o, NOW).summary for o in objectives}
    assert [(b.good, b.total) for b in overview.values()] == [(999, 1000), (5, 10), (7, 10)]


# --- who may add and delete windows --------------------------------------------------------


def test_admin_adds_a_window_recorded_with_who_and_when(objective):
    admin = member(objective.team, Role.ADMIN)

    window = services.add_maintenance_window(
        objective, "objective", at(1), at(2), "  kernel patch  ", admin, NOW
    )

    window.refresh_from_db()
    assert (window.objective, window.pipeline, window.start, window.end) == (
        objective,
        None,
        at(1),
        at(2),
    )
    assert (window.reason, window.created_by, window.created_at) == ("kernel patch", admin, NOW)
    assert (window.deleted_at, window.deleted_by) == (None, None)


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL, Role.AUDITOR])
def test_only_team_admins_add_windows(objective, role):
    with pytest.raises(PermissionDenied):
        services.add_maintenance_window(
            objective, "objective", at(1), at(2), "x", member(objective.team, role), NOW
        )

    assert not MaintenanceWindow.objects.exists()


def test_admin_of_another_team_cannot_add_windows(objective):
    with pytest.raises(PermissionDenied):
        services.add_maintenance_window(
            objective, "pipeline", at(1), at(2), "x", member(make_team(), Role.ADMIN), NOW
        )

    assert not MaintenanceWindow.objects.exists()


@pytest.mark.parametrize(
    ("start", "end", "reason", "covers", "field"),
    [
        pytest.param(at(2), at(2), "x", "objective", "end", id="empty"),
        pytest.param(at(2), at(1), "x", "objective", "end", id="end-before-start"),
        pytest.param(at(1), at(2), "   ", "objective", "reason", id="blank-reason"),
        pytest.param(at(1), at(2), "x" * 501, "objective", "reason", id="long-reason"),
        pytest.param(at(1), at(2), "x", "team", "covers", id="unknown-coverage"),
        pytest.param(dt.datetime(2026, 11, 2), at(2), "x", "objective", "start", id="naive"),
    ],
)
def test_service_refuses_invalid_windows(objective, start, end, reason, covers, field):
    with pytest.raises(ValidationError) as raised:
        services.add_maintenance_window(
            objective, covers, start, end, reason, member(objective.team, Role.ADMIN), NOW
        )

    assert set(raised.value.message_dict) == {field}
    assert not MaintenanceWindow.objects.exists()


def test_deleting_records_who_and_when_once(objective):
    window = add_window(objective, at(1), at(2))
    admin, other_admin = member(objective.team, Role.ADMIN), member(objective.team, Role.ADMIN)

    first = services.delete_maintenance_window(window, admin, NOW)
    second = services.delete_maintenance_window(window, other_admin, NOW + HOUR)

    window.refresh_from_db()
    assert (first, second) == (True, False)
    assert (window.deleted_at, window.deleted_by) == (NOW, admin)


@pytest.mark.parametrize("covers", [Coverage.OBJECTIVE, Coverage.PIPELINE])
def test_only_team_admins_delete_windows(objective, covers):
    window = add_window(objective, at(1), at(2), covers=covers)

    with pytest.raises(PermissionDenied):
        services.delete_maintenance_window(window, member(objective.team, Role.ONCALL), NOW)
    with pytest.raises(PermissionDenied):
        services.delete_maintenance_window(window, member(make_team(), Role.ADMIN), NOW)

    window.refresh_from_db()
    assert window.deleted_at is None


# --- API -------------------------------------------------------------------------------------


def window_payload(**overrides: object) -> dict[str, object]:
    payload: dict[str, object] = {
        "start": "2026-11-02T10:01:00Z",
        "end": "2026-11-02T10:02:00Z",
        "reason": "GPU node pool upgrade",
    }
    payload.update(overrides)
    return payload


def test_admin_adds_lists_and_deletes_windows_through_the_api(client, objective):
    admin = member(objective.team, Role.ADMIN)
    client.force_login(admin)
    url = f"/api/slas/{objective.pk}/maintenance/"

    created = client.post(url, window_payload(), content_type="application/json")
    window = MaintenanceWindow.objects.get()
    deleted = client.delete(f"{url}{window.pk}/")
    deleted_again = client.delete(f"{url}{window.pk}/")
    listed = client.get(url)

    assert created.status_code == 201
    assert created.json() == {
        "id": window.pk,
        "covers": "objective",
        "objective": objective.pk,
        "pipeline": None,
        "start": "2026-11-02T10:01:00Z",
        "end": "2026-11-02T10:02:00Z",
        "reason": "GPU node pool upgrade",
        "created_by": admin.username,
        "created_at": created.json()["created_at"],
        "deleted_by": None,
        "deleted_at": None,
    }
    assert deleted.status_code == 204
    assert deleted_again.status_code == 404
    [row] = listed.json()
    assert (row["id"], row["deleted_by"]) == (window.pk, admin.username)
    assert row["deleted_at"] is not None


def test_attainment_endpoint_leaves_the_window_out_and_reports_it(client, objective):
    client.force_login(member(objective.team, Role.ADMIN))
    client.post(
        f"/api/slas/{objective.pk}/maintenance/",
        window_payload(covers="pipeline"),
        content_type="application/json",
    )
    params = {"start": "2026-11-02T10:00:00Z", "end": "2026-11-02T10:03:00Z", "step": "60"}

    body = client.get(f"/api/slas/{objective.pk}/attainment/", params).json()

    assert [(b["good"], b["total"]) for b in body["buckets"]] == [(999, 1000), (0, 0), (1000, 1000)]
    assert body["maintenance"] == [{"start": "2026-11-02T10:01:00Z", "end": "2026-11-02T10:02:00Z"}]
    assert [p["remaining_percent"] for p in body["burn_down"]] == [90.0, 90.0, 95.0]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        pytest.param({"end": "2026-11-02T10:01:00Z"}, "end", id="end-not-after-start"),
        pytest.param({"start": "soon"}, "start", id="start-not-a-time"),
        pytest.param({"reason": ""}, "reason", id="blank-reason"),
        pytest.param({"covers": "team"}, "covers", id="unknown-coverage"),
    ],
)
def test_api_refuses_invalid_windows(client, objective, overrides, field):
    client.force_login(member(objective.team, Role.ADMIN))

    response = client.post(
        f"/api/slas/{objective.pk}/maintenance/",
        window_payload(**overrides),
        content_type="application/json",
    )

    assert response.status_code == 400
    assert set(response.json()) == {field}
    assert not MaintenanceWindow.objects.exists()


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL, Role.AUDITOR])
def test_members_without_admin_role_list_but_do_not_change_windows(client, objective, role):
    window = add_window(objective, at(1), at(2))
    client.force_login(member(objective.team, role))
    url = f"/api/slas/{objective.pk}/maintenance/"

    listed = client.get(url)
    created = client.post(url, window_payload(), content_type="application/json")
    deleted = client.delete(f"{url}{window.pk}/")

    assert [w["id"] for w in listed.json()] == [window.pk]
    assert (created.status_code, deleted.status_code) == (403, 403)
    assert list(MaintenanceWindow.objects.values_list("pk", "deleted_at")) == [(window.pk, None)]


def test_outsider_gets_404_from_every_maintenance_door_and_changes_nothing(client, objective):
    window = add_window(objective, at(1), at(2))
    client.force_login(member(make_team("theirs"), Role.ADMIN))
    url = f"/api/slas/{objective.pk}/maintenance/"

    listed = client.get(url)
    created = client.post(url, window_payload(), content_type="application/json")
    deleted = client.delete(f"{url}{window.pk}/")

    assert (listed.status_code, created.status_code, deleted.status_code) == (404, 404, 404)
    assert "GPU" not in listed.content.decode()
    assert list(MaintenanceWindow.objects.values_list("pk", "deleted_at")) == [(window.pk, None)]


def test_a_window_is_deleted_only_through_an_objective_it_covers(client, objective, pipeline):
    other = make_objective(Pipeline.objects.create(team=pipeline.team, service_name="x"))
    window = add_window(objective, at(1), at(2))
    client.force_login(member(objective.team, Role.ADMIN))

    response = client.delete(f"/api/slas/{other.pk}/maintenance/{window.pk}/")

    assert response.status_code == 404
    assert MaintenanceWindow.objects.get().deleted_at is None


def test_anonymous_is_refused_maintenance(client, objective):
    window = add_window(objective, at(1), at(2))
    url = f"/api/slas/{objective.pk}/maintenance/"

    responses = [
        client.get(url),
        client.post(url, window_payload(), content_type="application/json"),
        client.delete(f"{url}{window.pk}/"),
    ]

    assert [r.status_code for r in responses] == [401] * 3
    assert MaintenanceWindow.objects.get().deleted_at is None


def test_stage_objectives_take_windows_too(objective, pipeline):
    stage = Stage.objects.create(pipeline=pipeline, name="model_forward")
    staged = make_objective(pipeline, stage=stage, name="model under 300 ms")
    put_minutes(staged, [(at(1), 0, 4)])

    add_window(staged, at(1), at(2))

    assert queries.window_budget(staged, NOW).excluded == Counts(0, 4)

"""Tests for the SLA pages: the list, the new-objective form, one objective with its maintenance
windows; who sees and does what, and the figures they show."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla import services
from latencyboard.sla.attainment import budget
from latencyboard.sla.models import MaintenanceWindow, Objective, SlaMinute, Window
from latencyboard.sla.templatetags.sla_format import (
    NO_VALUE,
    allowed_share,
    attainment,
    budget_percent,
    count,
    plain,
)
from latencyboard.teams.models import Role, Team
from latencyboard.teams.services import add_member
from tests.factories import make_team
from tests.latencyboard.test_sla import RawSpan, member, put_minutes, store_batch

pytestmark = pytest.mark.django_db


def recent(minutes_ago: int) -> dt.datetime:
    """A minute start inside any objective's window: within the hour, never this minute."""
    return timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=minutes_ago)


@pytest.fixture
def bad_minute() -> dt.datetime:
    """The minute of the objective's bad requests, fixed once per test."""
    return recent(20)


@pytest.fixture
def team() -> Team:
    return make_team("fraud")


@pytest.fixture
def pipeline(team: Team) -> Pipeline:
    return Pipeline.objects.create(team=team, service_name="fraud-scorer", environment="prod")


@pytest.fixture
def stage(pipeline: Pipeline) -> Stage:
    return Stage.objects.create(pipeline=pipeline, name="model_forward")


@pytest.fixture
def objective(pipeline: Pipeline, bad_minute: dt.datetime) -> Objective:
    """Target 99%: 999/1,000 good, a bad minute (90/100), 1,000/1,000, all in the last hour."""
    objective = services.create_objective(
        team=pipeline.team,
        pipeline=pipeline,
        stage=None,
        name="checkout under 300 ms",
        threshold_ms=300.0,
        target_percent=Decimal(99),
        window=Window.ROLLING_28D,
        created_by=member(pipeline.team, Role.ADMIN),
    )
    ten = dt.timedelta(minutes=10)
    put_minutes(
        objective,
        [(bad_minute - ten, 999, 1000), (bad_minute, 90, 100), (bad_minute + ten, 1000, 1000)],
    )
    return objective


# --- list ------------------------------------------------------------------------------------


def test_list_shows_my_objectives_with_their_numbers(client, objective):
    client.force_login(member(objective.team))

    page = client.get("/slas/").content.decode()

    # 2,089 of 2,100 good: 99.476%; 21 bad allowed, 11 spent, 10 left (47.6%)
    assert "checkout under 300 ms" in page
    assert "99.476%" in page
    assert "47.6%" in page
    assert "10 of 21 allowed bad requests left" in page
    assert "✓ Met" in page


def test_list_offers_new_objective_to_admins_and_says_why_to_others(client, objective):
    admin = member(objective.team, Role.ADMIN)
    client.force_login(member(objective.team, Role.ONCALL))
    as_oncall = client.get("/slas/").content.decode()
    client.force_login(admin)
    as_admin = client.get("/slas/").content.decode()

    assert 'href="/slas/new/"' in as_admin
    assert 'href="/slas/new/"' not in as_oncall
    assert f"You are on-call of {objective.team}" in as_oncall
    assert admin.username in as_oncall


def test_list_shows_nothing_of_other_teams(client, objective):
    client.force_login(member(make_team("theirs"), Role.ADMIN))

    page = client.get("/slas/").content.decode()

    assert "checkout under 300 ms" not in page
    assert "fraud-scorer" not in page
    assert "No SLA objectives yet" in page


def test_pages_need_a_login(client, objective):
    paths = ["/slas/", "/slas/new/", f"/slas/{objective.pk}/"]

    responses = [client.get(path) for path in paths]

    assert [(r.status_code, r["Location"].split("?")[0]) for r in responses] == [
        (302, "/login/")
    ] * 3


# --- new objective ---------------------------------------------------------------------------


def form_data(pipeline: Pipeline, stage: Stage | None, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "pipeline": pipeline.pk,
        "stage": "" if stage is None else stage.pk,
        "threshold_ms": "250.5",
        "target_percent": "99.9",
        "window": "calendar_month",
        "name": "",
    }
    data.update(overrides)
    return data


def test_admin_creates_an_objective_counted_from_retained_spans(client, pipeline, stage):
    store_batch(
        pipeline.team,
        [
            RawSpan(pipeline, stage, recent(5), 250_500_000),
            RawSpan(pipeline, stage, recent(5), 250_500_001),
        ],
        rolled_up=True,
    )
    client.force_login(member(pipeline.team, Role.ADMIN))

    response = client.post("/slas/new/", form_data(pipeline, stage))

    objective = Objective.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/slas/{objective.pk}/"
    assert (objective.pipeline, objective.stage, objective.window) == (
        pipeline,
        stage,
        Window.CALENDAR_MONTH,
    )
    assert (objective.threshold_ms, objective.target_percent) == (250.5, Decimal("99.9"))
    assert objective.name == "model_forward ≤ 250.5 ms for 99.9%"
    assert list(SlaMinute.objects.values_list("good", "total")) == [(1, 2)]


def test_form_offers_only_pipelines_of_teams_i_administer(client, pipeline, stage):
    admin = member(pipeline.team, Role.ADMIN)
    viewed = Pipeline.objects.create(team=make_team("viewed"), service_name="recommender")
    add_member(viewed.team, admin, Role.VIEWER)
    client.force_login(admin)

    page = client.get("/slas/new/").content.decode()
    refused = client.post("/slas/new/", form_data(viewed, None))

    assert "fraud-scorer (prod)" in page
    assert "recommender" not in page
    assert f'data-pipeline="{pipeline.pk}"' in page
    assert refused.status_code == 400
    assert "Select a valid choice" in refused.content.decode()
    assert not Objective.objects.exists()


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL, Role.AUDITOR])
def test_non_admins_are_told_why_they_cannot_create(client, pipeline, stage, role):
    admin = member(pipeline.team, Role.ADMIN)
    client.force_login(member(pipeline.team, role))

    shown = client.get("/slas/new/")
    posted = client.post("/slas/new/", form_data(pipeline, stage))

    assert (shown.status_code, posted.status_code) == (403, 403)
    text = shown.content.decode()
    assert "Only team admins create SLA objectives" in text
    assert f"{Role(role).label.lower()} of {pipeline.team}" in text
    assert admin.username in text
    assert '<form method="post" class="card sla-form"' not in text
    assert not Objective.objects.exists()


def test_someone_without_a_team_is_told_to_join_one(client, pipeline, stage):
    client.force_login(member())

    response = client.post("/slas/new/", form_data(pipeline, stage))

    assert response.status_code == 403
    assert "not a member of any team" in response.content.decode()
    assert "fraud-scorer" not in response.content.decode()
    assert not Objective.objects.exists()


def test_an_admin_of_a_team_without_pipelines_is_told_why_there_is_no_form(client, pipeline):
    team = make_team("new")
    client.force_login(member(team, Role.ADMIN))

    response = client.get("/slas/new/")

    text = response.content.decode()
    assert response.status_code == 200
    assert f"{team} has no pipelines yet" in text
    assert "fraud-scorer" not in text
    assert "Only team admins" not in text


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        pytest.param({"threshold_ms": "0"}, "threshold_ms", "greater than or equal", id="zero"),
        pytest.param({"threshold_ms": "abc"}, "threshold_ms", "Enter a number", id="not-number"),
        pytest.param({"threshold_ms": "1.0000001"}, "threshold_ms", "6 decimal", id="sub-ns"),
        pytest.param({"target_percent": "100.5"}, "target_percent", "less than", id="over-100"),
        pytest.param({"target_percent": ""}, "target_percent", "required", id="no-target"),
        pytest.param({"window": "weekly"}, "window", "valid choice", id="unknown-window"),
        pytest.param({"name": "x" * 201}, "name", "at most 200", id="long-name"),
    ],
)
def test_form_refuses_invalid_input_with_the_fields_error(
    client, pipeline, stage, overrides, field, message
):
    client.force_login(member(pipeline.team, Role.ADMIN))

    response = client.post("/slas/new/", form_data(pipeline, stage, **overrides))

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field]
    assert message in errors[field][0]
    assert not Objective.objects.exists()


def test_form_refuses_a_stage_of_another_pipeline(client, pipeline, stage):
    other = Pipeline.objects.create(team=pipeline.team, service_name="recommender")
    client.force_login(member(pipeline.team, Role.ADMIN))

    response = client.post("/slas/new/", form_data(other, stage))

    assert response.status_code == 400
    assert response.context["form"].errors == {"stage": ["Not a stage of this pipeline."]}
    assert not Objective.objects.exists()


# --- detail and maintenance windows ------------------------------------------------------


def test_detail_shows_the_windows_figures_and_points_the_charts_at_the_api(client, objective):
    client.force_login(member(objective.team))

    response = client.get(f"/slas/{objective.pk}/")

    page = response.content.decode()
    assert response.status_code == 200
    assert "99.476%" in page
    assert "10 of 21 allowed bad requests left" in page
    assert "2,100" in page
    assert "Only admins of" in page
    assert 'action="/slas/' not in page  # no maintenance form for a viewer
    url = urlsplit(response.context["series_url"])
    query = parse_qs(url.query)
    assert url.path == f"/api/slas/{objective.pk}/attainment/"
    assert query["step"] == ["3600"]
    window = response.context["budget"].window
    assert (query["start"], query["end"]) == (
        [window.start.isoformat().replace("+00:00", "Z")],
        [window.end.isoformat().replace("+00:00", "Z")],
    )


def test_admin_adds_a_maintenance_window_in_utc_and_attainment_leaves_it_out(
    client, objective, bad_minute
):
    admin = member(objective.team, Role.ADMIN)
    client.force_login(admin)

    response = client.post(
        f"/slas/{objective.pk}/maintenance/",
        {
            "start": bad_minute.strftime("%Y-%m-%dT%H:%M"),
            "end": (bad_minute + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M"),
            "reason": "GPU node pool upgrade",
            "covers": "objective",
        },
    )
    page = client.get(f"/slas/{objective.pk}/").content.decode()

    window = MaintenanceWindow.objects.get()
    assert response.status_code == 302
    assert (window.start, window.end, window.objective, window.created_by) == (
        bad_minute,
        bad_minute + dt.timedelta(minutes=1),
        objective,
        admin,
    )
    # 1,999 of 2,000: 99.950%; 20 allowed, 1 spent: 19 left (95.0%); 100 requests left out
    assert "99.950%" in page
    assert "19 of 20 allowed bad requests left" in page
    assert "95.0%" in page
    assert "counting them: 99.476% attained" in page
    assert "GPU node pool upgrade" in page


def test_maintenance_form_errors_are_shown_and_nothing_is_added(client, objective):
    client.force_login(member(objective.team, Role.ADMIN))

    response = client.post(
        f"/slas/{objective.pk}/maintenance/",
        {
            "start": "2026-11-02T10:05",
            "end": "2026-11-02T10:00",
            "reason": "",
            "covers": "objective",
        },
    )

    assert response.status_code == 400
    assert response.context["form"].errors == {
        "reason": ["This field is required."],
        "end": ["Must be after the start."],
    }
    assert not MaintenanceWindow.objects.exists()


def test_admin_deletes_a_window_from_the_page_and_it_stays_listed(client, objective):
    admin = member(objective.team, Role.ADMIN)
    window = services.add_maintenance_window(
        objective, "pipeline", recent(20), recent(19), "kernel patch", admin, timezone.now()
    )
    client.force_login(admin)

    response = client.post(f"/slas/{objective.pk}/maintenance/{window.pk}/delete/")
    page = client.get(f"/slas/{objective.pk}/").content.decode()

    window.refresh_from_db()
    assert response.status_code == 302
    assert window.deleted_by == admin
    assert f"deleted by {admin.username}" in page
    assert "99.476%" in page


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL, Role.AUDITOR])
def test_non_admins_cannot_add_or_delete_windows_from_the_page(client, objective, role):
    window = services.add_maintenance_window(
        objective,
        "objective",
        recent(20),
        recent(19),
        "kernel patch",
        member(objective.team, Role.ADMIN),
        timezone.now(),
    )
    client.force_login(member(objective.team, role))

    added = client.post(
        f"/slas/{objective.pk}/maintenance/",
        {
            "start": "2026-11-02T10:00",
            "end": "2026-11-02T10:05",
            "reason": "x",
            "covers": "objective",
        },
    )
    deleted = client.post(f"/slas/{objective.pk}/maintenance/{window.pk}/delete/")

    assert (added.status_code, deleted.status_code) == (403, 403)
    assert list(MaintenanceWindow.objects.values_list("pk", "deleted_at")) == [(window.pk, None)]


def test_outsider_gets_404_on_every_page_of_the_objective_and_changes_nothing(client, objective):
    window = services.add_maintenance_window(
        objective,
        "objective",
        recent(20),
        recent(19),
        "kernel patch",
        member(objective.team, Role.ADMIN),
        timezone.now(),
    )
    client.force_login(member(make_team("theirs"), Role.ADMIN))

    responses = [
        client.get(f"/slas/{objective.pk}/"),
        client.post(
            f"/slas/{objective.pk}/maintenance/",
            {"start": "2026-11-02T10:00", "end": "2026-11-02T10:05", "reason": "x"},
        ),
        client.post(f"/slas/{objective.pk}/maintenance/{window.pk}/delete/"),
        client.get(f"/api/slas/{objective.pk}/attainment/"),
    ]

    assert [r.status_code for r in responses] == [404] * 4
    assert all("checkout" not in r.content.decode() for r in responses)
    assert list(MaintenanceWindow.objects.values_list("pk", "deleted_at")) == [(window.pk, None)]
    assert Objective.objects.get() == objective


# --- figures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("good", "total", "shown"),
    [
        pytest.param(998_999, 1_000_000, "99.899%", id="just-short-of-99.9-is-not-99.9"),
        pytest.param(999, 1000, "99.900%", id="exact"),
        pytest.param(1, 3, "33.333%", id="third"),
        pytest.param(5, 5, "100.000%", id="all"),
        pytest.param(0, 0, NO_VALUE, id="nothing-counted"),
    ],
)
def test_attainment_is_rounded_down_from_the_exact_counts(good, total, shown):
    assert attainment(budget(good, total, Decimal("99.9"))) == shown


def test_number_filters():
    assert budget_percent(56.17) == "56.1%"
    assert budget_percent(-0.04) == "-0.1%"
    assert budget_percent(None) == NO_VALUE
    assert count(2_001_000) == "2,001,000"
    assert count(Decimal("-0.99800")) == "-1"
    assert count(Decimal("1124.00000")) == "1,124"
    assert (count(Decimal("609.66")), count(Decimal("234.66"))) == ("609", "234")
    assert plain(Decimal("99.900")) == "99.9"
    assert (plain(250.0), plain(250.5), plain(0.000001)) == ("250", "250.5", "0.000001")
    assert allowed_share(Decimal("99.900")) == "0.1%"

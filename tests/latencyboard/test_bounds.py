"""Extreme moments and durations are refused with a 400 naming the parameter, never a 500."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from latencyboard import bounds
from latencyboard.pipelines.models import Pipeline
from latencyboard.sla import services
from latencyboard.sla.models import MaintenanceWindow, Objective, Window
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db

MOMENT_ERROR = "Must be from 1970-01-01 to before 2200-01-01 (UTC)."
DURATION_ERROR = "Must be positive and at most 400 days."


@dataclass
class Scene:
    admin: User
    pipeline: Pipeline
    objective: Objective


@pytest.fixture
def scene() -> Scene:
    team = make_team()
    admin = cast(User, make_user(team, Role.ADMIN))
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    objective = services.create_objective(
        team=team,
        pipeline=pipeline,
        stage=None,
        name="fast",
        threshold_ms=250.0,
        target_percent=Decimal("99.9"),
        window=Window.ROLLING_28D,
        created_by=admin,
    )
    return Scene(admin, pipeline, objective)


def url(scene: Scene, template: str) -> str:
    return template.format(pipeline=scene.pipeline.pk, objective=scene.objective.pk)


WINDOW = "start=2026-11-01T00:00:00Z&end=2026-11-02T00:00:00Z"
IN_9999 = "start=9999-12-30T00:00:00Z&end=9999-12-31T23:00:00Z"


@pytest.mark.parametrize(
    ("template", "errors"),
    [
        pytest.param(
            "/api/pipelines/{pipeline}/percentiles/?window=999999d",
            {"window": [DURATION_ERROR]},
            id="percentiles-window",
        ),
        pytest.param(
            "/api/pipelines/{pipeline}/percentiles/?window=1d&step=999999d",
            {"step": [DURATION_ERROR]},
            id="percentiles-step",
        ),
        pytest.param(
            "/api/pipelines/{pipeline}/percentiles/?start=0001-01-01T00:00:00Z"
            "&end=0001-01-02T00:00:00Z",
            {"start": [MOMENT_ERROR], "end": [MOMENT_ERROR]},
            id="percentiles-year-1",
        ),
        pytest.param(
            f"/api/pipelines/{{pipeline}}/stage-breakdown/?{WINDOW}&step=P999999999D",
            {"step": [DURATION_ERROR]},
            id="stage-breakdown-step",
        ),
        pytest.param(
            f"/api/pipelines/{{pipeline}}/stage-breakdown/?{IN_9999}&step=P1D",
            {"start": [MOMENT_ERROR], "end": [MOMENT_ERROR]},
            id="stage-breakdown-year-9999",
        ),
        pytest.param(
            f"/api/pipelines/{{pipeline}}/deployments/?{IN_9999}",
            {"start": [MOMENT_ERROR], "end": [MOMENT_ERROR]},
            id="deployments-year-9999",
        ),
        pytest.param(
            "/api/slas/{objective}/attainment/?step=P999999999D",
            {"step": [DURATION_ERROR]},
            id="attainment-step",
        ),
        pytest.param(
            "/api/slas/{objective}/attainment/?start=1900-01-01T00:00:00Z"
            "&end=9999-12-31T00:00:00Z&step=P400D",
            {"start": [MOMENT_ERROR], "end": [MOMENT_ERROR]},
            id="attainment-centuries",
        ),
        pytest.param(
            "/api/traces/exemplars/?pipeline={pipeline}&minute=9999-12-31T23:59:00Z",
            {"minute": [MOMENT_ERROR]},
            id="exemplars-year-9999",
        ),
        pytest.param(
            f"/api/traces/?{IN_9999}",
            {"start": [MOMENT_ERROR], "end": [MOMENT_ERROR]},
            id="trace-search-year-9999",
        ),
        pytest.param(
            "/api/compare/?pipeline={pipeline}&a_start=9999-12-30T00:00:00Z"
            "&a_end=9999-12-31T00:00:00Z&b_start=2026-11-01T00:00:00Z&b_end=2026-11-02T00:00:00Z",
            {"a_start": [MOMENT_ERROR], "a_end": [MOMENT_ERROR]},
            id="compare-year-9999",
        ),
    ],
)
def test_extreme_moments_and_durations_are_a_400_naming_the_parameter(
    client, scene, template, errors
):
    # Given a team admin
    client.force_login(scene.admin)

    # When they ask for a window or step out of any sane range
    response = client.get(url(scene, template))

    # Then the answer is a 400 saying which parameter and why
    assert response.status_code == 400
    assert response.json() == errors


MS_TOO_LONG = "Ensure this value is less than or equal to 34560000000.0."


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        pytest.param("min_ms=1e303", {"min_ms": [MS_TOO_LONG]}, id="min-overflows-ns"),
        pytest.param("max_ms=1e300", {"max_ms": [MS_TOO_LONG]}, id="max-beyond-bigint"),
        pytest.param(
            "min_ms=-1", {"min_ms": ["Ensure this value is greater than or equal to 0."]}, id="neg"
        ),
    ],
)
def test_a_duration_filter_beyond_400_days_is_a_400(client, scene, params, errors):
    # Found by the API fuzzer: min_ms=1e303 overflowed to infinity in nanoseconds (a 500).
    client.force_login(scene.admin)

    response = client.get(f"/api/traces/?{params}")

    assert response.status_code == 400
    assert response.json() == errors


@pytest.mark.parametrize(
    "template",
    [
        pytest.param(
            "/api/pipelines/{pipeline}/percentiles/?window=400d&step=1d", id="percentiles"
        ),
        pytest.param(f"/api/pipelines/{{pipeline}}/stage-breakdown/?{WINDOW}&step=P1D", id="share"),
        pytest.param(
            "/api/slas/{objective}/attainment/?start=1970-01-01T00:00:00Z"
            "&end=2199-12-31T00:00:00Z&step=P400D",
            id="attainment-widest",
        ),
        pytest.param(
            "/api/traces/exemplars/?pipeline={pipeline}&minute=2199-12-31T23:59:00Z&step=24h",
            id="exemplars-latest",
        ),
        pytest.param(f"/api/traces/?{WINDOW}", id="trace-search"),
        pytest.param(f"/api/traces/?{WINDOW}&min_ms=0&max_ms=34560000000", id="trace-search-ms"),
    ],
)
def test_the_widest_sane_requests_still_answer(client, scene, template):
    client.force_login(scene.admin)

    response = client.get(url(scene, template))

    assert response.status_code == 200


def test_the_traces_page_explains_an_exemplar_minute_out_of_range(client, scene):
    client.force_login(scene.admin)

    response = client.get(
        "/traces/",
        {"pipeline": scene.pipeline.pk, "minute": "9999-12-31T23:59:00Z", "step": "24h"},
    )

    assert response.status_code == 400
    assert f"minute: {MOMENT_ERROR}" in response.content.decode()


def test_a_maintenance_window_in_year_9999_is_refused_and_not_stored(client, scene):
    client.force_login(scene.admin)

    response = client.post(
        f"/api/slas/{scene.objective.pk}/maintenance/",
        {"start": "9999-12-31T00:00:00Z", "end": "9999-12-31T23:59:00Z", "reason": "upgrade"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json() == {"start": [MOMENT_ERROR], "end": [MOMENT_ERROR]}
    assert not MaintenanceWindow.objects.exists()


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=dt.UTC), id="1969"),
        pytest.param(bounds.LATEST, id="latest"),
    ],
)
def test_moments_outside_the_bounds_are_refused(moment):
    with pytest.raises(ValidationError, match="Must be from 1970-01-01 to before 2200-01-01"):
        bounds.validate_moment(moment)


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(bounds.EARLIEST, id="earliest"),
        pytest.param(bounds.LATEST - dt.timedelta(microseconds=1), id="just-before-latest"),
    ],
)
def test_moments_inside_the_bounds_are_accepted(moment):
    bounds.validate_moment(moment)


@pytest.mark.parametrize(
    "duration",
    [
        pytest.param(dt.timedelta(0), id="zero"),
        pytest.param(dt.timedelta(minutes=-1), id="negative"),
        pytest.param(dt.timedelta(days=400, seconds=1), id="over-400-days"),
    ],
)
def test_durations_outside_the_bounds_are_refused(duration):
    with pytest.raises(ValidationError, match="Must be positive and at most 400 days"):
        bounds.validate_duration(duration)


@pytest.mark.parametrize(
    "duration",
    [
        pytest.param(dt.timedelta(minutes=1), id="a-minute"),
        pytest.param(dt.timedelta(days=400), id="400-days"),
    ],
)
def test_durations_inside_the_bounds_are_accepted(duration):
    bounds.validate_duration(duration)


def test_the_latest_moment_plus_the_longest_step_still_fits_nanoseconds_in_a_bigint():
    furthest = bounds.LATEST + bounds.LONGEST
    nanoseconds = (furthest - bounds.EARLIEST) // dt.timedelta(microseconds=1) * 1000

    assert nanoseconds < 2**63


def test_the_maintenance_form_refuses_a_window_in_year_9999(client, scene):
    client.force_login(scene.admin)

    response = client.post(
        f"/slas/{scene.objective.pk}/maintenance/",
        {
            "start": "9999-12-31T00:00",
            "end": "9999-12-31T23:59",
            "reason": "upgrade",
            "covers": "objective",
        },
    )

    assert response.status_code == 400
    assert MOMENT_ERROR in response.content.decode()
    assert not MaintenanceWindow.objects.exists()

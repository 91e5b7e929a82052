"""Team admins see their team's pipelines against its cap on the overview; others do not."""

from __future__ import annotations

import pytest
from django.test import Client

from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("role", "shown"), [(Role.ADMIN, True), (Role.VIEWER, False)], ids=["admin", "viewer"]
)
def test_the_overview_shows_a_team_admin_its_pipelines_against_the_cap(settings, role, shown):
    # given a team with 2 of its 2 pipelines
    settings.TEAM_MAX_PIPELINES = 2
    team = make_team("capped")
    for name in ("checkout", "search"):
        Pipeline.objects.create(team=team, service_name=name)
    client = Client()
    client.force_login(make_user(team, role))  # type: ignore[arg-type]

    # when its member opens the overview
    page = client.get("/").content.decode()

    # then an admin reads the count, the cap and what happens at it; a viewer does not
    assert (f"{team.name}: 2 of 2 pipelines — at its cap" in page) is shown

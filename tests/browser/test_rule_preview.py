"""The rule form in a real browser: it offers the chosen pipeline's stages only, and answers
"would it have fired in the last 7 days?" before anything is saved."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from latencyboard.alerts.baselines import compute_baselines
from latencyboard.alerts.models import Rule
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Role
from tests.browser.conftest import PASSWORD, LiveWeb, log_in, screenshot
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import make_scene, put_history
from tests.latencyboard.alerts.test_preview import HOURS, stored_minutes

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_rule_form_offers_the_pipelines_stages_and_previews_the_rule(
    page: Any, live_web: LiveWeb
):
    # Given fraud-scorer with slow stretches of model_forward in the last hours, and another
    # pipeline of the team with a stage of its own.
    scene = make_scene()
    at = timezone.now() - dt.timedelta(hours=HOURS + 1)
    put_history(scene, now=at)
    compute_baselines(at - dt.timedelta(hours=1))
    stored_minutes(scene, at)
    other = Pipeline.objects.create(team=scene.team, service_name="recommender")
    ranker = Stage.objects.create(pipeline=other, name="ranker")
    admin = make_user(scene.team, Role.ADMIN, password=PASSWORD)
    log_in(page, live_web, admin.get_username())

    # When an admin opens a new rule, picks fraud-scorer, model_forward and a 1 ms floor.
    page.goto(f"{live_web.url}/alerts/rules/new/")
    page.select_option("select[name=pipeline]", str(scene.pipeline.pk))
    stage_box = f"input[name=stages][value='{scene.stage.pk}']"
    ranker_box = f"input[name=stages][value='{ranker.pk}']"

    # Then only fraud-scorer's stages are offered.
    assert page.is_visible(stage_box)
    assert not page.is_visible(ranker_box)

    # When they ask whether it would have fired.
    page.check(stage_box)
    page.fill("input[name=min_effect_ms]", "1")
    page.click("#preview-button")
    page.wait_for_selector("#preview[data-state=ready]")
    screenshot(page, "rule-preview")

    # Then the alerts it would have raised are listed, and no rule was saved.
    assert "It would have raised" in page.inner_text("#preview-summary")
    rows = page.locator("#preview-alerts tbody tr").all_inner_texts()
    assert rows
    assert all(row.startswith("model_forward") for row in rows)
    assert Rule.objects.filter(name="model_forward tail").count() == Rule.objects.count()

"""A rule's reach at its pipeline's traffic, through the API and on the rule's page, from
real rollup rows and baselines in PostgreSQL."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from latencyboard.alerts.baselines import compute_baselines
from latencyboard.pipelines.models import Stage
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user
from tests.latencyboard.alerts.scenes import Scene, make_scene, put_history, put_minutes

pytestmark = pytest.mark.django_db


def busy_scene() -> Scene:
    """A day of history at 2,000 requests an hour, its baseline, and the last hour at 2
    requests/s; a second stage the rule watches has no baseline."""
    scene = make_scene()
    now = timezone.now()
    put_history(scene, now=now)
    compute_baselines(now)
    put_minutes(scene, 60, scale=1.0, now=now)
    scene.rule.stages.add(Stage.objects.create(pipeline=scene.pipeline, name="postprocess"))
    return scene


def test_members_read_each_stages_reach_at_the_last_hours_traffic(client):
    scene = busy_scene()
    client.force_login(make_user(scene.team, Role.VIEWER))

    answer = client.get(reverse("api-alert-rule-reach", kwargs={"rule_id": scene.rule.pk}))

    assert answer.status_code == 200
    rows = {row["stage"]: row["reach"] for row in answer.json()}
    assert rows["postprocess"] is None
    forward = rows["model_forward"]
    assert (forward["per_minute"], forward["window_n"]) == (120.0, 1200)
    # 1,200 values a window: the rule's +20% floor is the limit, +25% needs a few minutes
    assert 19.0 <= forward["detectable_percent"] <= 21.0
    assert forward["target_minutes"] <= 10


def test_outsiders_get_404(client):
    scene = busy_scene()
    client.force_login(make_user(make_team("other"), Role.ADMIN))
    answer = client.get(reverse("api-alert-rule-reach", kwargs={"rule_id": scene.rule.pk}))
    assert answer.status_code == 404


def test_the_rule_page_says_what_the_rule_finds_per_stage(client):
    scene = busy_scene()
    client.force_login(make_user(scene.team, Role.ADMIN))

    page = client.get(reverse("alerts:rule-edit", kwargs={"rule_id": scene.rule.pk}))

    text = page.content.decode()
    assert "What it can find at this traffic" in text
    assert "<td><code>model_forward</code></td>" in text
    assert re.search(r"<td>2\.00</td><td>1200</td>\s*<td>\+2[01]% \(p\d\d\)</td>", text)
    assert "baseline not ready" in text

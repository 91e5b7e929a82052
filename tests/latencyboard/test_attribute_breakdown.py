"""The pipeline page's latency by attribute, from the cohort rollups: over the whole chosen
window, every span counted, and a plain answer for attributes that are not cohorts."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import compaction, services
from tests.factories import make_team, make_user
from tests.latencyboard.test_dashboards import request_spans, store, writer  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)


def breakdown(client, pipeline: Pipeline, end: dt.datetime, **params: str) -> dict:
    response = client.get(
        f"/api/pipelines/{pipeline.pk}/attributes/",
        {"start": (end - 7 * DAY).isoformat(), "end": end.isoformat(), "q": "0.5,0.99", **params},
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_7_day_breakdown_holds_every_span_of_the_week(client, writer):  # noqa: F811
    # given v7 six days ago (compacted into hours and days since) and v8 in the last hours
    team = make_team("ours")
    now = timezone.now().replace(second=0, microsecond=0)
    rng = np.random.default_rng(7)
    durations: dict[tuple[str, str], list[float]] = {}
    spans = []
    for version, start in (("v7", now - 6 * DAY), ("v8", now - 3 * HOUR)):
        for index in range(200):
            root = round(float(rng.uniform(10, 100)), 3)
            forward = round(float(rng.uniform(1, 9)), 3)
            durations.setdefault(("end-to-end", version), []).append(root)
            durations.setdefault(("model_forward", version), []).append(forward)
            spans += request_spans(
                start + index * dt.timedelta(seconds=20),
                root,
                {"model_forward": forward},
                {"model.version": version},
            )
    store(writer, team, spans)
    services.fold_until_idle(lambda: now, seconds=60)
    compaction.compact_rollups(now)
    pipeline = Pipeline.objects.get(team=team)
    client.force_login(make_user(team))

    # when the page asks for the model.version breakdown of the last 7 days
    body = breakdown(client, pipeline, now)

    # then both versions are there with every span, and each percentile is the order
    # statistic of rank floor(q * (n - 1)) within 1%
    assert (body["key"], body["cohort"]) == ("model.version", True)
    assert body["keys"] == ["model.version", "service.version"]
    assert body["values"] == ["v7", "v8"]
    assert body["spans"] == 800  # 200 root and 200 model_forward spans of each version
    got = {(g["stage"]["name"], g["value"]): g for g in body["groups"]}
    for key, values in durations.items():
        assert got[key]["n"] == len(values), key
        exact = [float(np.quantile(values, q, method="lower")) for q in (0.5, 0.99)]
        assert got[key]["quantiles_ms"] == pytest.approx(exact, rel=0.01), key


def test_an_attribute_that_is_not_a_cohort_says_so_and_only_admins_see_where_to_add_it(
    client,
    writer,  # noqa: F811
):
    team = make_team("ours")
    now = timezone.now().replace(second=0, microsecond=0)
    store(writer, team, request_spans(now - HOUR, 10.0, {}, {"cache_hit": True}))
    services.fold_until_idle(lambda: now, seconds=60)
    pipeline = Pipeline.objects.get(team=team)
    member = make_user(team)
    admin = make_user(team)
    User.objects.filter(pk=admin.pk).update(is_staff=True, is_superuser=True)

    client.force_login(member)
    as_member = breakdown(client, pipeline, now, key="cache_hit")
    client.force_login(admin)
    as_admin = breakdown(client, pipeline, now, key="cache_hit")

    assert (as_member["cohort"], as_member["groups"], as_member["add_url"]) == (False, [], None)
    assert as_member["other_keys"] == ["cache_hit"]
    assert as_admin["add_url"] == f"/admin/pipelines/pipeline/{pipeline.pk}/change/"

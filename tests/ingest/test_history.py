"""The demo history of a local stack's first start: a week on every chart, kept afterwards."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import Sum
from django.test import Client
from django.utils import timezone

from latencyboard.dashboards.deployments import Marker
from latencyboard.dashboards.queries import deployment_markers
from latencyboard.demo import history
from latencyboard.demo.backfill import backfill_demo
from latencyboard.demo.history import load_demo_history
from latencyboard.demo.profiles import PIPELINES, candidate_share_at
from latencyboard.local.services import bootstrap
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.models import Resolution, StageShare
from latencyboard.sla.models import Objective
from latencyboard.sla.queries import window_budget
from latencyboard.spans.models import IngestBatch, Span
from latencyboard.teams.models import Team

pytestmark = pytest.mark.django_db(transaction=True)

RATE = 0.01  # requests/s per pipeline: sparser than make run's, through the same code path
HOUR = dt.timedelta(hours=1)
ROLLUPS = re.compile(r"^rollups ([\d,]+)/([\d,]+) spans, ")


def _counts(team: Team) -> tuple[int, int, int, int]:
    return (
        Span.objects.filter(team=team).count(),
        IngestBatch.objects.filter(team=team).count(),
        Pipeline.objects.filter(team=team).count(),
        Objective.objects.filter(team=team).count(),
    )


def rollup_progress(lines: list[str]) -> list[tuple[int, int]]:
    """The spans folded and the spans to fold, as each progress line of the fold says them."""
    found = [ROLLUPS.match(line) for line in lines]
    return [(int(m[1].replace(",", "")), int(m[2].replace(",", ""))) for m in found if m]


def stored_spans(team: Team) -> int:
    return IngestBatch.objects.filter(team=team).aggregate(spans=Sum("stored_spans"))["spans"]


def rollout_started_after_the_first_day(profile, now: dt.datetime) -> bool:
    """Whether the candidate went from no traffic to some within the week, after the UTC day
    the week's history starts on."""
    first_day = (now - dt.timedelta(days=7)).date()
    first_day_ends = dt.datetime.combine(first_day + dt.timedelta(days=1), dt.time(), dt.UTC)
    minutes = np.arange(first_day_ends.timestamp(), now.timestamp(), 60.0)
    share = candidate_share_at(profile, minutes)
    return bool(np.any((share[1:] > 0) & (share[:-1] == 0)))


def test_first_start_fills_a_week_with_rollouts_and_slas_and_later_starts_keep_it(tmp_path: Path):
    # given a first local start: its admin, demo team, demo pipelines and their objectives
    bootstrap(tmp_path, demo=True)
    team = Team.objects.get(slug="demo")
    admin = get_user_model().objects.get(username="admin")
    now = timezone.now()

    # when it loads the demo history
    progress: list[str] = []
    result = load_demo_history(team, now=now, progress=progress.append, requests_per_s=RATE)

    # then a week of spans was written and reported day by day
    assert result is not None
    assert result.days == 7
    stored = IngestBatch.objects.filter(team=team).aggregate(spans=Sum("stored_spans"))["spans"]
    assert result.spans == stored
    assert [line.split(",")[0] for line in progress if line.startswith("spans ")] == [
        f"spans {day}/7 days" for day in range(1, 8)
    ]
    # and every batch is rolled up before it returns
    assert not IngestBatch.objects.filter(team=team, rolled_up_at=None).exists()

    client = Client()
    client.force_login(admin)
    for profile in PIPELINES:
        pipeline = Pipeline.objects.get(team=team, service_name=profile.name)
        # and the 7 d percentiles have an end-to-end point in every hour of the week (the
        # first and the current hour may hold a few minutes of history only)
        response = client.get(f"/api/pipelines/{pipeline.pk}/percentiles/", {"window": "7d"})
        assert response.status_code == 200
        points = response.json()["series"][0]["points"]
        assert response.json()["series"][0]["stage"]["name"] == "end-to-end"
        assert len(points) == 169
        assert [point["t"] for point in points[1:-1] if not point["n"]] == []
        # and the candidate model was rolled out, and marked where the rollout started after
        # the history's first day (read from day rows there, where it starts with the data)
        baseline, candidate = (version.name for version in profile.model_versions)
        rollouts = [
            marker
            for marker in deployment_markers(pipeline, now - dt.timedelta(days=7), now)
            if marker.kind == "appeared" and marker.value == candidate
        ]
        started = rollout_started_after_the_first_day(profile, now)
        assert {marker.previous for marker in rollouts} == ({baseline} if started else set())
        assert all(isinstance(marker, Marker) for marker in rollouts)
        # and its one SLA objective counted every request of the history exactly, with some
        # of its error budget spent
        objective = Objective.objects.get(pipeline=pipeline)
        requests = Span.objects.filter(pipeline=pipeline, is_root=True).count()
        budget = window_budget(objective, now).summary
        assert budget.total == requests
        assert 0 < budget.bad < requests // 50
        # and the stage shares cover the week hour by hour
        share_hours = (
            StageShare.objects.filter(pipeline=pipeline, resolution=Resolution.HOUR)
            .values_list("bucket_start", flat=True)
            .distinct()
        )
        assert len(share_hours) >= 7 * 24 - 1

    # and the LLM pipeline is there too: vLLM's spans in a pipeline of their own, each the
    # child of a gateway's call, and the 7 d end-to-end percentiles of vLLM in every hour
    vllm = Pipeline.objects.get(team=team, service_name="vllm")
    gateway = Pipeline.objects.get(team=team, service_name="chat-gateway")
    llm_requests = Span.objects.filter(pipeline=vllm, is_root=True).count()
    assert llm_requests > 0.9 * RATE * 7 * 86_400 * 0.99  # the gateway refuses a few
    # and each request's queue, prefill and decode, TTFT and TPOT, read from its attributes
    derived = Counter(
        Span.objects.filter(pipeline=vllm, is_root=False).values_list("stage__name", flat=True)
    )
    assert derived.keys() == {
        "queue",
        "prefill",
        "decode",
        "time_to_first_token",
        "time_per_output_token",
    }
    assert derived["queue"] == derived["decode"] == derived["time_to_first_token"] == llm_requests
    assert 0.99 * llm_requests <= derived["time_per_output_token"] <= llm_requests
    assert Span.objects.filter(pipeline=gateway, is_root=True).count() >= llm_requests
    assert not Span.objects.filter(pipeline=vllm, parent_span_id=None).exists()
    response = client.get(f"/api/pipelines/{vllm.pk}/percentiles/", {"window": "7d"})
    points = response.json()["series"][0]["points"]
    assert [point["t"] for point in points[1:-1] if not point["n"]] == []

    # when the stack starts again
    before = _counts(team)
    bootstrap(tmp_path, demo=True)
    again = load_demo_history(team, now=timezone.now(), progress=progress.append)

    # then nothing is added
    assert again is None
    assert _counts(team) == before


def test_the_command_keeps_the_history_of_a_team_with_spans(tmp_path: Path, capsys):
    # given a team whose history is loaded already
    bootstrap(tmp_path, demo=True)
    team = Team.objects.get(slug="demo")
    load_demo_history(team, now=timezone.now(), progress=print, days=1, requests_per_s=RATE)
    before = _counts(team)

    # when the command runs again
    call_command("demo_history", "--team", "demo")

    # then it says so and adds nothing
    assert capsys.readouterr().out.endswith("kept what an earlier start stored\n")
    assert _counts(team) == before


def test_a_start_stopped_while_writing_the_history_is_finished_by_the_next(tmp_path: Path):
    # given a first start, meant to write the week up to END, stopped after three days of it
    bootstrap(tmp_path, demo=True)
    team = Team.objects.get(slug="demo")
    end = timezone.now().replace(minute=30, second=0, microsecond=0)
    backfill_demo(
        team, days=3, end=end - dt.timedelta(days=4), now=end, requests_per_s=RATE, seed=1
    )

    # when the stack starts again, an hour later
    result = load_demo_history(
        team, now=end + HOUR, progress=lambda line: None, days=7, requests_per_s=RATE
    )

    # then the four missing days were written, up to the end the first start meant
    assert result is not None
    received = IngestBatch.objects.filter(team=team).values_list("received_at", flat=True)
    assert set(received) == {end}
    # an hour of the six-stage pipelines a batch, and of the LLM pipeline another (the first
    # start stopped before the LLM pipeline's history: it is written for the four days)
    assert IngestBatch.objects.filter(team=team).count() == 7 * 24 + 4 * 24
    roots = Span.objects.filter(team=team, is_root=True)
    assert roots.filter(start_time__lt=end - dt.timedelta(days=7)).count() == 0
    assert roots.filter(start_time__gte=end).count() == 0
    for day in range(7):
        day_start = end - dt.timedelta(days=7 - day)
        assert roots.filter(
            start_time__gte=day_start, start_time__lt=day_start + dt.timedelta(days=1)
        ).exists()
    # and a start after that keeps it
    assert load_demo_history(team, now=end + 2 * HOUR, progress=lambda line: None) is None


def test_the_fold_s_progress_counts_the_spans_written_up_to_all_of_them(tmp_path, monkeypatch):
    # given a first local start, saying the fold's progress after each of its steps
    monkeypatch.setattr(history, "_REPORT_SECONDS", 0.0)
    bootstrap(tmp_path, demo=True)
    team = Team.objects.get(slug="demo")

    # when it loads a day of history, with the LLM pipeline's spans (stages are derived from
    # their attributes and stored beside them: they are no spans written)
    progress: list[str] = []
    result = load_demo_history(
        team, now=timezone.now(), progress=progress.append, days=1, requests_per_s=RATE
    )

    # then every line counts the spans written, never more folded than that, and the last
    # line all of them folded
    assert result is not None
    counts = rollup_progress(progress)
    assert {total for _, total in counts} == {result.spans}
    assert [(done, total) for done, total in counts if done > total] == []
    assert [done for done, _ in counts] == sorted(done for done, _ in counts)
    assert counts[-1] == (result.spans, result.spans)


def test_the_fold_s_progress_after_a_stopped_start_counts_its_spans_too(tmp_path):
    # given a first start stopped after writing a day of history, none of it folded
    bootstrap(tmp_path, demo=True)
    team = Team.objects.get(slug="demo")
    end = timezone.now().replace(minute=30, second=0, microsecond=0)
    backfill_demo(team, days=1, end=end - dt.timedelta(days=1), now=end, requests_per_s=RATE)
    left_unfolded = stored_spans(team)

    # when the next start writes the rest and folds
    progress: list[str] = []
    result = load_demo_history(
        team, now=end + HOUR, progress=progress.append, days=2, requests_per_s=RATE
    )

    # then its progress ends at every span stored folded: the first start's and its own
    assert result is not None
    assert rollup_progress(progress)[-1] == (stored_spans(team), stored_spans(team))
    assert stored_spans(team) == left_unfolded + result.spans

"""Plain builders for the objects tests need (no mocks: these are real rows)."""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass

import numpy as np
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from ingest.decoding import DecodedSpan
from latencyboard.alerts.models import OPEN_STATUSES, Incident
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import StageShare
from latencyboard.rollups.tails import root_keys
from latencyboard.teams.models import Role, Team
from latencyboard.teams.services import add_member, issue_ingest_token

_counter = itertools.count(1)


@dataclass
class TeamWithToken:
    team: Team
    token: str


def make_team(name: str | None = None) -> Team:
    n = next(_counter)
    name = name or f"team-{n}"
    return Team.objects.create(name=f"{name}-{n}", slug=f"{name}-{n}")


def make_team_with_token(name: str | None = None, rate_limit: int | None = None) -> TeamWithToken:
    team = make_team(name)
    return TeamWithToken(team, issue_ingest_token(team, "tests", rate_limit=rate_limit).plaintext)


def make_user(
    team: Team | None = None,
    role: Role = Role.VIEWER,
    password: str = "pw-for-tests-1",  # noqa: S107
) -> AbstractBaseUser:
    user = get_user_model().objects.create_user(f"user{next(_counter)}", password=password)
    if team is not None:
        add_member(team, user, role)
    return user


REQUEST_STAGES = ("queue_wait", "model_forward")


def make_requests(service: str, count: int, start: dt.datetime) -> list[DecodedSpan]:
    """``count`` requests of ``service`` from ``start`` (whole seconds), one a second for a
    minute: a root span ("predict", its own stage too) and one child per stage of
    ``REQUEST_STAGES``. Ids derive from ``service`` and ``start``: the same call twice makes
    the same spans again (which ingest stores once)."""
    spans = []
    second = int(start.timestamp())
    for i in range(count):
        trace = f"{service}-{second}-{i}".encode().ljust(16, b".")[-16:]
        at = (second + i % 60) * 10**9
        root = i.to_bytes(3, "big") + (second % 2**32).to_bytes(4, "big") + b"\0"
        spans.append(_request_span(trace, root, None, "predict", at, (5 + i % 7) * 10**6, service))
        for n, stage in enumerate(REQUEST_STAGES):
            child, duration = root[:7] + bytes([n + 1]), (1 + i % 3 + n) * 10**6
            spans.append(_request_span(trace, child, root, stage, at, duration, service))
    return spans


def _request_span(
    trace: bytes, span_id: bytes, parent: bytes | None, name: str, at: int, ns: int, service: str
) -> DecodedSpan:
    return DecodedSpan(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=2 if parent is None else 1,
        start_ns=at,
        end_ns=at + ns,
        status_code=0,
        status_message="",
        service_name=service,
        environment="",
        stage=None if parent is None else name,
        attributes={},
        dropped_attributes=0,
    )


def incident_for(
    pipeline: Pipeline, status: str, at: dt.datetime, title: str = "incident"
) -> Incident:
    """The incident an alert of ``status`` belongs to, as the evaluator would file it: the
    pipeline's open one (opened at ``at`` if none) for an open alert, a resolved one of its
    own otherwise."""
    if status in OPEN_STATUSES:
        found = Incident.objects.filter(pipeline=pipeline, status__in=OPEN_STATUSES).first()
        return found or Incident.objects.create(
            pipeline=pipeline, status=status, title=title, opened_at=at
        )
    return Incident.objects.create(
        pipeline=pipeline, status=status, title=title, opened_at=at, resolved_at=at
    )


def make_stage_share(
    stage: Stage,
    resolution: str,
    start: dt.datetime,
    requests: int,
    own: float,
    tail_own: float,
) -> StageShare:
    """A stage-share row as the worker writes it, its requests in two root buckets: the
    slowest hundredth (rounded down) at 1 s, the rest at 100 ms; ``tail_own`` of the stage's
    ``own`` self time in the slow ones. So a window of such rows has its slowest 1% in the
    slow buckets, shown from 1,000 requests on."""
    slow = requests // 100
    fast = requests - slow
    return StageShare(
        team=stage.pipeline.team,
        pipeline=stage.pipeline,
        stage=stage,
        resolution=resolution,
        bucket_start=start,
        requests=requests,
        self_ms_sum=own,
        root_ms_sum=fast * 100.0 + slow * 1000.0,
        root_keys=[_FAST_KEY, _SLOW_KEY],
        key_requests=[fast, slow],
        key_root_ms=[fast * 100.0, slow * 1000.0],
        key_self_ms=[own - tail_own, tail_own],
    )


_FAST_KEY, _SLOW_KEY = (int(key) for key in root_keys(np.array([100.0, 1000.0])))

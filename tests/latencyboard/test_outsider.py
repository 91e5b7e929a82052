"""Every route of the project, walked as an outsider: nothing of another team comes back.

Team A has a pipeline with spans, an SLA objective with a maintenance window, an API token,
an alert rule with a channel and a firing alert, and an audit report with a file. A user of
team B (an admin there, so no page refuses them for their role) asks every URL pattern
(pages and API, signed in and with a team-B API token) and every WebSocket route, with the
path parameters naming A's objects and query parameters and bodies naming them too. Routes
with A's objects in the path answer 404 (405 for a method the route does not take); every
other answer is under 500 and shows none of A's names or trace ids; A's rows are unchanged
at the end; a socket to A's pipeline is refused and hears nothing.

The routes are read from the URL resolvers, not listed here: a route added later is walked
without anyone remembering, and one whose path parameters :data:`PATH_OBJECTS` does not know
fails the test until it is added there.

Left out: Django's admin (``/admin/``), which only staff reach and which shows every team's
rows on purpose (it is the operators' tool, outside the team model); and static files, which
are the same for everyone and are not served by the URL configuration.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, cast

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern
from django.utils import timezone
from rest_framework.views import APIView

from audits.models import Report, ReportFile, ReportStatus
from latencyboard.alerts.models import Alert, AlertStatus, Channel, Rule
from latencyboard.apitokens.models import ApiToken, Scope
from latencyboard.apitokens.services import issue_api_token
from latencyboard.live.groups import pipeline_group, team_group
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.routing import websocket_urlpatterns
from latencyboard.sla import services
from latencyboard.sla.models import MaintenanceWindow, Objective, Window
from latencyboard.teams.models import Role, Team
from latencyboard.traces import ids
from tests.factories import incident_for, make_team, make_user
from tests.latencyboard.test_live_consumers import communicator, group_send, session_cookie
from tests.latencyboard.test_traces import StoredSpan, store

pytestmark = pytest.mark.django_db(transaction=True)

EXCLUDED_PREFIXES = ("admin/",)  # staff-only, every team's rows by design (see above)
METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Secret:
    """Team A: what B must never see, and the objects B names in its requests."""

    team: Team
    pipeline: Pipeline
    stage: Stage
    trace_hex: str
    objective: Objective
    window: MaintenanceWindow
    api_token: ApiToken
    rule: Rule
    channel: Channel
    alert: Alert
    report_file: ReportFile

    @property
    def markers(self) -> list[str]:
        return [
            self.team.name,
            str(self.pipeline),
            self.stage.name,
            self.trace_hex,
            self.objective.name,
            self.window.reason,
            self.api_token.name,
            self.rule.name,
            self.channel.name,
            self.channel.target,
            self.alert.summary,
            self.alert.incident.title,
            bytes(self.report_file.content).decode(),
        ]


# What each path parameter names, among team A's objects.
PATH_OBJECTS: dict[str, Callable[[Secret], str]] = {
    "pipeline_id": lambda a: str(a.pipeline.pk),
    "objective_id": lambda a: str(a.objective.pk),
    "window_id": lambda a: str(a.window.pk),
    "trace_id": lambda a: a.trace_hex,
    "token_id": lambda a: str(a.api_token.pk),
    "rule_id": lambda a: str(a.rule.pk),
    "channel_id": lambda a: str(a.channel.pk),
    "alert_id": lambda a: str(a.alert.pk),
    "incident_id": lambda a: str(a.alert.incident_id),
    "report_id": lambda a: str(a.report_file.report_id),
    "file_name": lambda a: a.report_file.name,
    "label_name": lambda a: "pipeline",  # a Prometheus label, not an object: no 404
    # A chart of the pipeline page, not an object; test_charts.py walks every one.
    "chart": lambda a: "percentiles",
}
# Path parameters that name no object of A, so a route with only these answers as usual.
NOT_OBJECTS = {"label_name", "chart"}


def query_naming(a: Secret) -> dict[str, str]:
    """Query parameters naming A's objects, as filters take them."""
    minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=30)
    return {
        "pipeline": str(a.pipeline.pk),
        "stage": str(a.stage.pk),
        "objective": str(a.objective.pk),
        "trace": a.trace_hex,
        "minute": minute.isoformat(),
        "object": f"objective:{a.objective.pk}",
        "query": f'{{pipeline="{a.pipeline.service_name}"}}',
        "match[]": f'{{pipeline=~"{a.pipeline.service_name}|.+"}}',
    }


def body_naming(a: Secret) -> dict[str, str]:
    """Form or JSON fields naming A's objects, as the forms and the API take them."""
    minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=30)
    return {
        **query_naming(a),
        "name": "outsider",
        "threshold_ms": "1",
        "target_percent": "99",
        "window": "rolling_28d",
        "covers": "pipeline",
        "start": (minute - dt.timedelta(hours=1)).isoformat(),
        "end": minute.isoformat(),
        "reason": "outsider",
        "team": str(a.team.pk),
        "year": "2026",
        "quarter": "3",
    }


@dataclass(frozen=True)
class Route:
    path: str  # with the parameters' placeholders, as Django shows it
    kwargs: tuple[str, ...]
    fill: Callable[[dict[str, str]], str]
    api: bool = False  # a REST API view, which takes API tokens (pages take sessions only)


def _fill_route(pattern: RoutePattern) -> Callable[[dict[str, str]], str]:
    route = str(pattern)
    return lambda values: re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m[1]], route)


def _fill_regex(pattern: RegexPattern) -> Callable[[dict[str, str]], str]:
    regex = str(pattern).removeprefix("^").removesuffix("$")
    return lambda values: re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: values[m[1]], regex)


def _fill(pattern: RoutePattern | RegexPattern) -> Callable[[dict[str, str]], str]:
    return _fill_route(pattern) if isinstance(pattern, RoutePattern) else _fill_regex(pattern)


def _then(
    first: Callable[[dict[str, str]], str], second: Callable[[dict[str, str]], str]
) -> Callable[[dict[str, str]], str]:
    return lambda values: first(values) + second(values)


def _kwargs(pattern: RoutePattern | RegexPattern) -> tuple[str, ...]:
    return tuple(pattern.regex.groupindex)


def http_routes(
    patterns: list[URLPattern | URLResolver] | None = None, prefix: Route | None = None
) -> Iterator[Route]:
    """Every URL pattern of the project, with the path parameters of its whole path."""
    base = prefix or Route("", (), lambda values: "")
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        pattern = cast(RoutePattern | RegexPattern, entry.pattern)
        route = Route(
            base.path + str(pattern),
            base.kwargs + _kwargs(pattern),
            _then(base.fill, _fill(pattern)),
        )
        if isinstance(entry, URLResolver):
            yield from http_routes(entry.url_patterns, route)
        else:
            view = getattr(entry.callback, "cls", None)
            yield replace(route, api=isinstance(view, type) and issubclass(view, APIView))


@pytest.fixture
def secret() -> Secret:
    team = make_team("alpha-secret")
    admin = cast(User, make_user(team, Role.ADMIN))
    pipeline = Pipeline.objects.create(team=team, service_name="alpha-hidden-ranker-5521")
    stage = Stage.objects.create(pipeline=pipeline, name="alpha_hidden_stage_5521")
    trace = uuid.UUID(int=0x5521 << 64 | 7)
    minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=30)
    store(team, [StoredSpan(trace, 1, None, stage, minute, 42.0, name="alpha_hidden_span")])
    now = timezone.now()
    objective = services.create_objective(
        team=team,
        pipeline=pipeline,
        stage=None,
        name="alpha-hidden-objective-5521",
        threshold_ms=100.0,
        target_percent=Decimal("99.5"),
        window=Window.ROLLING_28D,
        created_by=admin,
    )
    window = services.add_maintenance_window(
        objective,
        covers="objective",
        start=now - dt.timedelta(hours=3),
        end=now - dt.timedelta(hours=2),
        reason="alpha-hidden-upgrade-5521",
        created_by=admin,
        now=now,
    )
    token = issue_api_token(admin, "alpha-hidden-token-5521", Scope.READ).token
    channel = Channel.objects.create(
        team=team,
        name="alpha-hidden-channel-5521",
        kind="webhook",
        target="http://127.0.0.1:9/alpha-hidden-hook-5521",
    )
    rule = Rule.objects.create(pipeline=pipeline, name="alpha-hidden-rule-5521")
    rule.channels.add(channel)
    alert = Alert.objects.create(
        rule=rule,
        pipeline=pipeline,
        stage=stage,
        incident=incident_for(pipeline, AlertStatus.FIRING, now, "alpha-hidden-incident-5521"),
        dedup_key=f"alpha-{rule.pk}",
        status=AlertStatus.FIRING,
        summary="alpha-hidden-alert-5521",
        started_at=now,
    )
    report = Report.objects.create(
        team=team,
        year=now.year,
        quarter=1,
        pipeline_ids=[pipeline.pk],
        requested_by=admin,
        requested_at=now,
        status=ReportStatus.DONE,
    )
    content = b"alpha-hidden-report-5521"
    report_file = ReportFile.objects.create(
        report=report,
        name="attainment.csv",
        content_type="text/csv",
        content=content,
        sha256=hashlib.sha256(content).hexdigest(),
    )
    return Secret(
        team,
        pipeline,
        stage,
        ids.trace_hex(trace),
        objective,
        window,
        token,
        rule,
        channel,
        alert,
        report_file,
    )


@dataclass(frozen=True)
class Outsider:
    user: User
    api_token: str

    def clients(self, route: Route) -> dict[str, Client]:
        """A fresh client per persona, so that a request signing out does not carry over;
        the API is asked with B's API token too."""
        session = Client()
        session.force_login(self.user)
        if not route.api:
            return {"session": session}
        return {"session": session, "token": Client(HTTP_AUTHORIZATION=f"Bearer {self.api_token}")}


@pytest.fixture
def outsider() -> Outsider:
    team = make_team("beta")
    user = cast(User, make_user(team, Role.ADMIN))
    Pipeline.objects.create(team=team, service_name="beta-own-pipeline")
    return Outsider(user, issue_api_token(user, "beta", Scope.READ_WRITE).plaintext)


def rows_of(a: Secret) -> dict[str, Any]:
    """Everything of A a request could change."""
    return {
        "pipelines": list(Pipeline.objects.filter(team=a.team).values()),
        "stages": list(Stage.objects.filter(pipeline__team=a.team).values()),
        "objectives": list(Objective.objects.filter(team=a.team).values()),
        "windows": list(MaintenanceWindow.objects.filter(objective__team=a.team).values()),
        "tokens": list(ApiToken.objects.filter(user__teams=a.team).values()),
        "rules": list(Rule.objects.filter(pipeline__team=a.team).values()),
        "channels": list(Channel.objects.filter(team=a.team).values()),
        "alerts": list(Alert.objects.filter(pipeline__team=a.team).values()),
        "reports": list(Report.objects.filter(team=a.team).values()),
    }


def test_every_route_is_walked_with_known_path_parameters():
    # given every route of the project but the admin
    routes = [r for r in http_routes() if not r.path.startswith(EXCLUDED_PREFIXES)]

    # then each path parameter names a kind of object the outsider test knows
    unknown = {(r.path, k) for r in routes for k in r.kwargs if k not in PATH_OBJECTS}
    assert unknown == set()
    assert len([r for r in routes if r.kwargs]) >= 10  # the walk found the routes with ids


def test_an_outsider_gets_nothing_of_another_team_from_any_route(secret, outsider):
    # given team A's objects, and every route of the project but the admin
    before = rows_of(secret)
    routes = [r for r in http_routes() if not r.path.startswith(EXCLUDED_PREFIXES)]
    values = {name: object_of(secret) for name, object_of in PATH_OBJECTS.items()}
    query, body = query_naming(secret), body_naming(secret)

    # when B asks each of them for A's objects, with every method, signed in and by token
    answers = []
    for route in routes:
        path = "/" + route.fill(values)
        for persona, client in outsider.clients(route).items():
            for method in METHODS:
                send = getattr(client, method)
                if method == "get":
                    answers.append((route, persona, method, send(path, query)))
                    continue
                as_json = send(path, body, content_type="application/json")
                answers.append((route, persona, method, as_json))
                if method == "post":
                    answers.append((route, persona, "post form", send(path, body)))

    # then no answer is a server error or shows anything of A's
    failures: list[tuple[str, str, str, int, object]] = []
    for route, persona, method, response in answers:
        body = response.content.decode(errors="replace")
        shown = [marker for marker in secret.markers if marker in body]
        if response.status_code >= 500 or shown:
            failures.append((route.path, persona, method, response.status_code, shown))
        # and a route naming A's object in its path says it does not exist
        elif set(route.kwargs) - NOT_OBJECTS and response.status_code not in (404, 405):
            failures.append((route.path, persona, method, response.status_code, "not 404"))
    assert failures == []
    # and A's rows are as they were
    assert rows_of(secret) == before


def websocket_paths(values: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
    """Each WebSocket route's path, filled with ``values``, and its parameters."""
    paths = []
    for entry in websocket_urlpatterns:
        assert not isinstance(entry, URLRouter)  # nested routers: walk them here
        pattern = cast(RoutePattern | RegexPattern, entry.pattern)
        paths.append(("/" + _fill(pattern)(values), _kwargs(pattern)))
    return paths


def test_an_outsider_s_sockets_hear_nothing_of_another_team(secret, outsider):
    # given every WebSocket route, filled with A's objects
    values = {name: object_of(secret) for name, object_of in PATH_OBJECTS.items()}
    paths = websocket_paths(values)
    assert all(k in PATH_OBJECTS for _, kwargs in paths for k in kwargs)
    cookie = session_cookie(outsider.user)

    async def listen(path: str) -> tuple[bool, list[Any]]:
        socket = communicator(path, cookie)
        connected, _ = await socket.connect()
        heard = []
        first = await socket.receive_output(timeout=5) if connected else None
        refused = first is None or first["type"] == "websocket.close"
        # when A's team and A's pipeline publish
        await group_send(team_group(secret.team.pk), {"type": "rollup", "secret": 1})
        await group_send(pipeline_group(secret.pipeline.pk), {"type": "points", "secret": 2})
        while not await socket.receive_nothing(timeout=1):
            heard.append(await socket.receive_output())
        await socket.disconnect()
        return refused, [m for m in heard if "secret" in m.get("text", "")]

    results = {path: async_to_sync(listen)(path) for path, _ in paths}

    # then a socket to A's pipeline is refused, and no socket hears A's events
    pipeline_path = f"/ws/live/pipelines/{secret.pipeline.pk}/"
    assert results[pipeline_path] == (True, [])
    assert {path: heard for path, (_, heard) in results.items()} == {path: [] for path in results}

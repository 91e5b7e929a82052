"""Schemathesis over every operation of ``/api/schema/``, against the real WSGI app and database.

Two teams with real data (a day of demo traffic folded into rollups, SLA objectives,
maintenance windows, traces). Each persona, a team admin of one team, fuzzes every operation
with schema-valid and schema-breaking requests, its ids drawn among random ones, its own team's
and the other team's. Whatever is sent: no 5xx, no traceback, nothing of the other team in any
answer, and the other team's rows unchanged.

The budget is fixed (``EXAMPLES_PER_OPERATION``, no shrinking) so that CI stays fast; the
numbers of operations and cases are printed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.errors import InvalidSchema
from schemathesis.core.result import Err, Ok
from schemathesis.schemas import APIOperation

from latencyboard.demo.backfill import backfill_demo
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import Rollup
from latencyboard.rollups.services import fold_pending_batches
from latencyboard.sla import services
from latencyboard.sla.models import MaintenanceWindow, Objective, SlaMinute, Window
from latencyboard.teams.models import Role, Team
from tests.factories import make_team, make_user
from tests.latencyboard.test_traces import StoredSpan, store

pytestmark = pytest.mark.django_db(transaction=True)

# CI's fixed budget; API_FUZZ_EXAMPLES=200 API_FUZZ_RANDOM=1 explores further by hand.
EXAMPLES_PER_OPERATION = int(os.environ.get("API_FUZZ_EXAMPLES", "20"))
DERANDOMIZE = os.environ.get("API_FUZZ_RANDOM", "") != "1"
# Keys of answers whose values are ids of a kind (``id`` is any kind).
ID_KEYS = {
    "pipeline": "pipeline_ids",
    "pipeline_id": "pipeline_ids",
    "stage": "stage_ids",
    "stage_id": "stage_ids",
    "objective": "objective_ids",
    "id": "ids",
}


@dataclass(frozen=True)
class TeamData:
    team: Team
    admin: User
    pipeline_ids: frozenset[int]
    stage_ids: frozenset[int]
    objective_ids: frozenset[int]
    window_ids: frozenset[int]
    trace_ids: frozenset[str]  # hex
    names: frozenset[str]  # team, pipeline and objective names, maintenance reasons

    @property
    def ids(self) -> frozenset[int]:
        kinds = self.pipeline_ids | self.stage_ids | self.objective_ids | self.window_ids
        return kinds | {self.team.pk}


def _objective_with_maintenance(team: Team, pipeline: Pipeline, admin: User, name: str) -> None:
    now = timezone.now()
    objective = services.create_objective(
        team=team,
        pipeline=pipeline,
        stage=None,
        name=name,
        threshold_ms=250.0,
        target_percent=Decimal("99.5"),
        window=Window.ROLLING_28D,
        created_by=admin,
    )
    services.add_maintenance_window(
        objective,
        covers="objective",
        start=now - dt.timedelta(hours=3),
        end=now - dt.timedelta(hours=2),
        reason=f"{name} upgrade",
        created_by=admin,
        now=now,
    )


def _collect(team: Team, admin: User) -> TeamData:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT trace_id FROM spans_span WHERE team_id = %s", [team.pk])
        trace_ids = frozenset(row[0].hex for row in cursor.fetchall())
    pipelines = Pipeline.objects.filter(team=team)
    objectives = Objective.objects.filter(team=team)
    windows = MaintenanceWindow.objects.filter(objective__team=team)
    return TeamData(
        team=team,
        admin=admin,
        pipeline_ids=frozenset(pipelines.values_list("pk", flat=True)),
        stage_ids=frozenset(Stage.objects.filter(pipeline__team=team).values_list("pk", flat=True)),
        objective_ids=frozenset(objectives.values_list("pk", flat=True)),
        window_ids=frozenset(windows.values_list("pk", flat=True)),
        trace_ids=trace_ids,
        names=frozenset(
            [
                team.name,
                *(str(pipeline) for pipeline in pipelines),
                *objectives.values_list("name", flat=True),
                *windows.values_list("reason", flat=True),
            ]
        ),
    )


@pytest.fixture
def teams() -> tuple[TeamData, TeamData]:
    """Ours: a day of demo traffic, rolled up, with an objective. Theirs: a small pipeline of
    their own, named unlike any of ours, with spans and an objective."""
    now = timezone.now()
    ours, theirs = make_team("ours"), make_team("theirs")
    our_admin = cast(User, make_user(ours, Role.ADMIN))
    their_admin = cast(User, make_user(theirs, Role.ADMIN))
    backfill_demo(ours, days=1, end=now, now=now, scale=0.001, seed=20261124)
    # Ids unlike any of ours, so that one in an answer to us can only be a leak.
    ledger = Pipeline.objects.create(pk=7731, team=theirs, service_name="ledger-sync-7731")
    post = Stage.objects.create(pk=7732, pipeline=ledger, name="ledger_post_7731")
    minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=30)
    store(
        theirs,
        [
            StoredSpan(uuid.UUID(int=0x7731 << 64 | n), n, None, post, minute, 40.0 + n)
            for n in range(1, 6)
        ],
    )
    while fold_pending_batches(timezone.now()).batches:
        pass
    _objective_with_maintenance(
        ours, Pipeline.objects.filter(team=ours).order_by("pk")[0], our_admin, "fraud-fast-4412"
    )
    _objective_with_maintenance(theirs, ledger, their_admin, "ledger-fast-7731")
    return _collect(ours, our_admin), _collect(theirs, their_admin)


def team_rows(team: Team) -> dict[str, Any]:
    """Everything of ``team`` a request could change, in comparable form."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM spans_span WHERE team_id = %s", [team.pk])
        (spans,) = cursor.fetchone()
    return {
        "pipelines": list(Pipeline.objects.filter(team=team).order_by("pk").values()),
        "stages": list(Stage.objects.filter(pipeline__team=team).order_by("pk").values()),
        "objectives": list(Objective.objects.filter(team=team).order_by("pk").values()),
        "maintenance": list(
            MaintenanceWindow.objects.filter(objective__team=team).order_by("pk").values()
        ),
        "sla_minutes": SlaMinute.objects.filter(objective__team=team).count(),
        "rollups": Rollup.objects.filter(team=team).count(),
        "spans": spans,
    }


def leaks(body: bytes, sent: str, own: TeamData, other: TeamData) -> list[str]:
    """What of ``other`` the answer shows that the request did not itself contain."""
    text = body.decode(errors="replace")
    found = [name for name in other.names if name in text and name not in sent]
    try:
        data = json.loads(body)
    except ValueError:
        return found
    # An id of the other team that is also one of ours (of another kind) says nothing.
    other_ids = {
        key: {i for i in getattr(other, field) - own.ids if str(i) not in sent}
        for key, field in ID_KEYS.items()
    }
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(value, int) and value in other_ids.get(key, ()):
                    found.append(f"{key}={value}")
                if isinstance(value, str) and key == "trace_id" and value in other.trace_ids:
                    found.append(f"trace_id={value}")
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _operation(result: Ok[APIOperation] | Err[InvalidSchema]) -> APIOperation:
    """The operation, or the schema's error about it raised."""
    if isinstance(result, Err):
        raise result.err()
    return result.ok()


def _csrf_token() -> str:
    return Client().get("/login/").cookies["csrftoken"].value


# Which ids a path, query or body parameter may be replaced by: the team's own, the other's.
_ID_PARAMETERS = {
    "pipeline_id": "pipeline_ids",
    "pipeline": "pipeline_ids",
    "objective_id": "objective_ids",
    "window_id": "window_ids",
    "stage": "stage_ids",
    "trace_id": "trace_ids",
}


_AIMS = 10  # ids of each team to choose from (ours have thousands of traces)


def _aim(case: Any, data: st.DataObject, own: TeamData, other: TeamData) -> None:
    """Point some of the case's ids at real rows of either team (random ids are mostly 404)."""
    for container in (case.path_parameters, case.query, case.body):
        if not isinstance(container, dict):
            continue
        for name, field in _ID_PARAMETERS.items():
            if name in container:
                mine, theirs = sorted(getattr(own, field)), sorted(getattr(other, field))
                choices = [container[name], *mine[:_AIMS], *theirs[:_AIMS]]
                container[name] = data.draw(st.sampled_from(choices))


@pytest.mark.parametrize("persona", ["member", "outsider"])
def test_no_operation_of_the_api_fails_or_leaks_whatever_is_sent(teams, persona, capsys):
    # Given a team admin of one team (ours for "member", theirs for "outsider")
    ours, theirs = teams
    own, other = (ours, theirs) if persona == "member" else (theirs, ours)
    client = Client()
    client.force_login(own.admin)
    token = _csrf_token()
    cookies = {"sessionid": client.cookies["sessionid"].value, "csrftoken": token}
    schema = schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())
    before = team_rows(other.team)
    failures: list[str] = []
    cases = 0

    # When every operation gets schema-valid and schema-breaking requests
    # Deletions last, so that the rows they remove are there for the other operations first.
    operations = sorted(
        map(_operation, schema.get_all_operations()),
        key=lambda operation: operation.method.upper() == "DELETE",
    )
    for operation in operations:
        strategy = st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE),
            operation.as_strategy(GenerationMode.NEGATIVE),
        )

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            derandomize=DERANDOMIZE,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy, data=st.data())
        def send(case: Any, data: st.DataObject) -> None:
            nonlocal cases
            _aim(case, data, own, other)
            response = case.call(cookies=cookies, headers={"X-CSRFToken": token})
            cases += 1
            sent = case.as_curl_command()
            problems = [
                *([f"status {response.status_code}"] if response.status_code >= 500 else []),
                *(["a traceback"] if b"Traceback" in response.content else []),
                *(f"leaks {leak}" for leak in leaks(response.content, sent, own, other)),
            ]
            assert not problems, f"{', '.join(problems)}: {sent}"

        try:
            send()
        except AssertionError as exc:
            failures.append(f"{operation.label}: {exc}")

    # Then nothing failed or leaked, and the other team's rows are as they were
    with capsys.disabled():
        print(f"\nAPI fuzz ({persona}): {len(operations)} operations, {cases} cases")
    assert failures == []
    assert team_rows(other.team) == before
    assert {"POST /api/slas/", "DELETE /api/slas/{objective_id}/"} <= {
        op.label for op in operations
    }

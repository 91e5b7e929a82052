"""A quarter of demo traffic (2026 Q3) with SLA objectives, built once per module.

Backfilling and folding a quarter takes about a minute, so the module's tests share it: the
fixture commits it outside the tests' transactions (each test's own writes roll back) and
flushes the database when the module is done, as a transactional test would.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from latencyboard.demo.backfill import backfill_demo
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.compaction import compact_rollups
from latencyboard.rollups.services import fold_until_idle
from latencyboard.sla import services as sla_services
from latencyboard.sla.models import Coverage, Objective
from latencyboard.teams.models import Role, Team
from tests.factories import make_team, make_user
from tests.span_storage import empty_span_table

QUARTER_START = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
QUARTER_END = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
# The workers' clock: every day of the quarter is closed and compacted, and none has reached
# the end of its retention, whatever today's date.
WORKERS_AT = QUARTER_END + dt.timedelta(hours=1)
# Sparse, but every path is exercised: about 350 requests a day per pipeline.
REQUESTS_PER_S = 0.004
MAINTENANCE = (dt.datetime(2026, 8, 10, 6, tzinfo=dt.UTC), dt.datetime(2026, 8, 11, tzinfo=dt.UTC))
# Tight enough to be missed in some months: the known SLA violations.
OBJECTIVES = (
    ("fraud-scorer", None, 60.0, Decimal("99.000")),
    ("fraud-scorer", "model_forward", 20.0, Decimal("95.000")),
    ("recommender", "feature_hydration", 15.0, Decimal("99.500")),
)


@dataclass(frozen=True)
class Quarter:
    team: Team
    admin: User
    auditor: User
    objectives: tuple[Objective, ...]
    spans: int


def _objectives(team: Team, admin: User) -> tuple[Objective, ...]:
    made = []
    for service, stage_name, threshold, target in OBJECTIVES:
        pipeline = Pipeline.objects.get(team=team, service_name=service)
        stage = None if stage_name is None else pipeline.stages.get(name=stage_name)
        made.append(
            sla_services.create_objective(
                team,
                pipeline,
                stage,
                f"{service} {stage_name or 'end-to-end'}",
                threshold,
                target,
                "calendar_month",
                admin,
            )
        )
    sla_services.add_maintenance_window(
        made[0],
        Coverage.OBJECTIVE,
        *MAINTENANCE,
        "database failover drill",
        admin,
        QUARTER_END,
    )
    return tuple(made)


@pytest.fixture(scope="module")
def quarter(django_db_setup: None, django_db_blocker: pytest.FixtureRequest) -> Iterator[Quarter]:
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        team = make_team("audited")
        written = backfill_demo(
            team,
            days=(QUARTER_END - QUARTER_START).days + 1,
            end=QUARTER_END,
            now=QUARTER_END,
            requests_per_s=REQUESTS_PER_S,
            seed=15,
        )
        while fold_until_idle(lambda: WORKERS_AT, 30.0).batches:
            pass
        compact_rollups(WORKERS_AT)
        admin = cast(User, make_user(team, Role.ADMIN))
        auditor = cast(User, make_user(team, Role.AUDITOR))
        objectives = _objectives(team, admin)
    yield Quarter(team, admin, auditor, objectives, written.spans)
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        call_command("flush", interactive=False, verbosity=0)
        empty_span_table()

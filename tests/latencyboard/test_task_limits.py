"""Every Celery task has soft and hard time limits, per task family, overridable by setting."""

from __future__ import annotations

import pytest
from django.conf import settings

from latencyboard.celery import app
from latencyboard.task_limits import TIME_LIMITS, TimeLimit, parse_time_limits


def _our_tasks() -> dict[str, object]:
    app.loader.import_default_modules()
    return {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}


def test_every_task_is_in_a_family_with_its_own_limits() -> None:
    assert set(_our_tasks()) == set(TIME_LIMITS)


@pytest.mark.parametrize("name", sorted(TIME_LIMITS))
def test_the_worker_applies_each_tasks_soft_and_hard_limit(name: str) -> None:
    task = _our_tasks()[name]
    limit = settings.TASK_TIME_LIMITS[name]

    assert (task.soft_time_limit, task.time_limit) == (limit.soft, limit.hard)  # type: ignore[attr-defined]
    assert 0 < limit.soft < limit.hard


def test_notifications_are_routed_to_their_own_queue() -> None:
    route = app.amqp.router.route({}, "alerts.send_deliveries")
    assert route["queue"].name == "notifications"
    assert app.amqp.router.route({}, "rollups.fold")["queue"].name == "celery"


def test_limits_can_be_given_per_task_in_one_setting() -> None:
    assert parse_time_limits(" audits.build_report=3600:3900 , rollups.fold=30:45,") == {
        "audits.build_report": TimeLimit(3600, 3900),
        "rollups.fold": TimeLimit(30, 45),
    }


@pytest.mark.parametrize(
    "text",
    ["rollups.fold=60", "rollups.fold=a:b", "=1:2", "rollups.fold=90:60", "rollups.fold=0:10"],
    ids=["no-hard", "words", "no-name", "hard-below-soft", "zero"],
)
def test_a_malformed_limit_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"task=soft:hard|soft < hard"):
        parse_time_limits(text)

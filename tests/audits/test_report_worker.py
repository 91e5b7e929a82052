"""A report requested on the page is built by a real worker consuming the ``reports`` queue."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from audits.models import Report, ReportStatus
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user
from tests.support import PYTHON, RunningProcess, start_process, stop_process, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.celery]


@pytest.fixture
def reports_worker(
    child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningProcess]:
    running = start_process(
        [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "latencyboard",
            "worker",
            "--pool",
            "solo",
            "--queues",
            "reports",
            "--loglevel",
            "INFO",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        child_env,
        tmp_path_factory.mktemp("reports-worker") / "worker.log",
    )
    yield running
    stop_process(running)


def test_requested_report_is_built_by_the_reports_worker(client, reports_worker):
    # given an auditor of a team with a pipeline, and a worker consuming only "reports"
    team = make_team()
    Pipeline.objects.create(team=team, service_name="fraud-scorer")
    client.force_login(make_user(team, Role.AUDITOR))

    # when they request a report on the page
    client.post("/audits/reports/", {"team": team.pk, "year": 2026, "quarter": 3})

    # then the worker builds it: done, with its files
    report = Report.objects.get(team=team)
    finished = (ReportStatus.DONE, ReportStatus.FAILED)
    wait_until(
        lambda: Report.objects.filter(pk=report.pk, status__in=finished).exists(),
        timeout=60,
        interval=0.3,
        message=reports_worker.log,
    )
    report.refresh_from_db()
    assert (report.status, report.progress) == (ReportStatus.DONE, 100)
    assert sorted(report.files.values_list("name", flat=True)) == [
        "alerts.csv",
        "attainment.csv",
        "completeness.csv",
        "ingest.csv",
        "maintenance.csv",
        "manifest.json",
        "objective_changes.csv",
        "objective_versions.csv",
        "percentiles.csv",
        "report.pdf",
        "signature.json",
    ]

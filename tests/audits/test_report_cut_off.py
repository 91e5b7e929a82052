"""One cut-off: a report of the running quarter reads every figure as of one moment, so spans
arriving during and after its build, late ones included, never change it; it says it is
provisional and what share of the quarter its verdicts stand on."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import subprocess
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from audits import services
from audits.models import Report
from audits.reporting import periods
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.services import fold_until_idle
from latencyboard.sla import services as sla_services
from latencyboard.teams.models import Role, Team
from latencyboard.windows import floor_minute
from tests.factories import make_requests, make_team, make_user

pytestmark = pytest.mark.django_db(transaction=True)

MINUTE = dt.timedelta(minutes=1)
SERVICE = "fraud-scorer"


@pytest.fixture
def writer(django_db_setup: None) -> Iterator[SpanWriter]:
    span_writer = SpanWriter(conninfo(), max_connections=2)
    yield span_writer
    span_writer.close()


def _arrive(writer: SpanWriter, team: Team, start: dt.datetime, count: int = 30) -> None:
    """``count`` requests in the minute of ``start``, stored and folded as ingest would."""
    now = timezone.now()
    writer.write(
        team.pk, make_requests(SERVICE, count, start), rejected=0, protocol="test", received_at=now
    )
    fold_until_idle(timezone.now, 60)


def _files(report: Report) -> dict[str, bytes]:
    return {f.name: bytes(f.content) for f in report.files.all()}


def _quarter_row(report: Report) -> dict[str, str]:
    rows = csv.DictReader(io.StringIO(_files(report)["attainment.csv"].decode()))
    quarter = _current_quarter()
    return next(r for r in rows if r["period"] == quarter.label)


def _current_quarter() -> periods.Period:
    now = timezone.now()
    return periods.quarter(now.year, (now.month - 1) // 3 + 1)


def _requested(team: Team, auditor: User) -> Report:
    quarter = _current_quarter()
    year, number = quarter.start.year, (quarter.start.month - 1) // 3 + 1
    return services.request_report(None, team, year, number, None, auditor, timezone.now())


@pytest.fixture
def scene(writer: SpanWriter) -> tuple[Team, User]:
    """A team whose end-to-end objective has counted three minutes of this quarter."""
    team = make_team()
    start = floor_minute(timezone.now()) - 6 * MINUTE
    for n in range(3):
        _arrive(writer, team, start + n * MINUTE)
    admin = cast(User, make_user(team, Role.ADMIN))
    pipeline = Pipeline.objects.get(team=team, service_name=SERVICE)
    sla_services.create_objective(
        team, pipeline, None, "scoring", 8.0, Decimal("99.000"), "calendar_month", admin
    )
    return team, cast(User, make_user(team, Role.AUDITOR))


def test_a_report_built_while_spans_arrive_verifies_after_more_and_late_spans(writer, scene):
    # given spans arriving all through the build of a report of the running quarter
    team, auditor = scene
    report = _requested(team, auditor)
    stop = threading.Event()

    def keep_arriving() -> None:
        try:
            while not stop.is_set():
                _arrive(writer, team, floor_minute(timezone.now()) - MINUTE, count=5)
        finally:
            connection.close()

    arriving = threading.Thread(target=keep_arriving)
    arriving.start()
    try:
        assert services.build_report(report.pk)
    finally:
        stop.set()
        arriving.join(timeout=120)
    report.refresh_from_db()
    assert report.as_of is not None
    built = _quarter_row(report)

    # when more spans arrive after the build, one of them late: for a minute before as_of
    _arrive(writer, team, floor_minute(timezone.now()))
    late = floor_minute(report.as_of) - 2 * MINUTE
    _arrive(writer, team, late + dt.timedelta(seconds=1), count=7)

    # then the report still verifies: every file renders to the same bytes, signed
    verification = services.verify_report(report)
    assert [c.name for c in verification.files if not c.matches] == []
    assert verification.holds
    # and a new report counts the late spans the first one never saw
    newer = _requested(team, auditor)
    assert services.build_report(newer.pk)
    assert int(_quarter_row(newer)["total"]) >= int(built["total"]) + 7


def test_a_report_of_the_running_quarter_is_provisional_with_its_coverage(scene, tmp_path: Path):
    # given an objective counting three minutes of the running quarter
    team, auditor = scene
    report = _requested(team, auditor)

    # when its report is built
    assert services.build_report(report.pk)
    report.refresh_from_db()
    assert report.as_of is not None

    # then the manifest, the quarter's row and every page say provisional, and the row says
    # on how many of the quarter's minutes (so far) it stands
    files = _files(report)
    manifest = json.loads(files["manifest.json"])
    assert manifest["provisional"] is True
    row = _quarter_row(report)
    assert row["verdict"] in {"provisional: met so far", "provisional: missed so far"}
    quarter = _current_quarter()
    minutes = int((floor_minute(report.as_of) - quarter.start) / MINUTE)
    first = floor_minute(timezone.now())  # at most: the first counted minute is 6 minutes ago
    assert (int(row["minutes"]), int(row["minutes_with_traffic"])) == (minutes, 3)
    assert 3 <= int(row["minutes_counted"]) <= int((first - quarter.start) / MINUTE)
    assert manifest["objectives"][0]["minutes_with_traffic"] == 3
    # and the percentiles count the same spans as the counters (minute rollups of today)
    percentiles = csv.DictReader(io.StringIO(files["percentiles.csv"].decode()))
    end_to_end = [int(r["n"]) for r in percentiles if r["stage"] == "end-to-end"]
    assert end_to_end == [int(row["total"])] == [90]
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(files["report.pdf"])
    text = subprocess.run(
        ["pdftotext", str(pdf), "-"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    pages = [page for page in text.split("\f") if page.strip()]
    assert len(pages) >= 2
    assert all("PROVISIONAL" in page for page in pages)
    assert all(f"Report #{report.pk}" in page for page in pages)
    manifest_hash = report.files.get(name="manifest.json").sha256
    assert all(manifest_hash in "".join(page.split()) for page in pages)
    assert all(f"of {len(pages)}" in page for page in pages)


def test_a_quarter_without_data_says_so(scene):
    # given an objective with no counts in an earlier, finished quarter
    team, auditor = scene
    report = services.request_report(None, team, 2026, 1, None, auditor, timezone.now())

    # when its report is built
    assert services.build_report(report.pk)

    # then nothing is called met: the quarter says no data, and it is final
    rows = list(csv.DictReader(io.StringIO(_files(report)["attainment.csv"].decode())))
    assert [(r["period"], r["total"], r["met"], r["verdict"]) for r in rows] == [
        (label, "0", "", "no data") for label in ("2026-01", "2026-02", "2026-03", "2026-Q1")
    ]
    manifest = json.loads(_files(report)["manifest.json"])
    assert manifest["provisional"] is False

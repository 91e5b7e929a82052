"""Quarterly reports over a quarter of back-filled traffic: exact, re-derivable, verifiable."""

from __future__ import annotations

import csv
import datetime as dt
import io
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from audits import services
from audits.log import record
from audits.models import Report, ReportFile
from audits.reporting import periods
from audits.reporting.tables import moment
from latencyboard.sla import versions
from latencyboard.sla.models import SlaMinute
from tests.audits.conftest import MAINTENANCE, Quarter
from tests.support import ROOT

# Building the quarter (the module fixture) takes minutes on a shared machine.
pytestmark = [pytest.mark.django_db, pytest.mark.timeout(900)]

ARTIFACTS = ROOT / "test-artifacts" / "reports"
CSV_NAMES = [
    "alerts.csv",
    "attainment.csv",
    "completeness.csv",
    "ingest.csv",
    "maintenance.csv",
    "objective_changes.csv",
    "objective_versions.csv",
    "percentiles.csv",
]
ALL_NAMES = sorted([*CSV_NAMES, "manifest.json", "report.pdf", "signature.json"])


def _built(quarter: Quarter) -> Report:
    report = services.request_report(
        None, quarter.team, 2026, 3, None, quarter.auditor, timezone.now()
    )
    assert services.build_report(report.pk)
    report.refresh_from_db()
    return report


def _files(report: Report) -> dict[str, bytes]:
    return {f.name: bytes(f.content) for f in report.files.all()}


def _rows(report: Report, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(_files(report)[name].decode())))


_RAW_COUNT = """
SELECT count(*) FILTER (WHERE duration_ns <= %(threshold)s), count(*)
FROM spans_span
WHERE pipeline_id = %(pipeline)s
  AND (CASE WHEN %(stage)s::int8 IS NULL THEN is_root ELSE stage_id = %(stage)s::int8 END)
  AND start_time >= %(start)s AND start_time < %(end)s
  AND NOT (%(exclude)s AND start_time >= %(m_start)s AND start_time < %(m_end)s)
"""


def _raw_count(objective, period, excluded: bool) -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            _RAW_COUNT,
            {
                "threshold": int(Decimal(str(objective.threshold_ms)) * 1_000_000),
                "pipeline": objective.pipeline_id,
                "stage": objective.stage_id,
                "start": period.start,
                "end": period.end,
                "exclude": excluded,
                "m_start": MAINTENANCE[0],
                "m_end": MAINTENANCE[1],
            },
        )
        good, total = cursor.fetchone()
    return int(good), int(total)


def test_attainment_equals_an_independent_count_over_raw_spans(quarter):
    # given a quarter of traffic with three objectives, one with a maintenance window

    # when the quarterly report is built
    report = _built(quarter)

    # then every month's and the quarter's good and total equal a count over the raw spans
    # (maintenance minutes left out of the first objective), and some were missed
    rows = _rows(report, "attainment.csv")
    expected = []
    for index, objective in enumerate(quarter.objectives):
        for period in (*periods.months(2026, 3), periods.quarter(2026, 3)):
            good, total = _raw_count(objective, period, excluded=index == 0)
            expected.append((str(objective.pk), period.label, str(good), str(total)))
    assert [(r["objective_id"], r["period"], r["good"], r["total"]) for r in rows] == expected
    assert all(int(total) > 5000 for *_, total in expected)
    assert {r["met"] for r in rows} == {"yes", "no"}


def test_percentile_table_covers_every_pipeline_stage_and_month(quarter):
    # given a quarter of traffic of three pipelines of six stages

    # when the report is built
    report = _built(quarter)

    # then the table has a row per pipeline, stage (six, the root span's own, and end to
    # end) and month, from every day of the month, with n the exact span count
    rows = _rows(report, "percentiles.csv")
    assert len(rows) == 3 * 8 * 3
    assert {(r["month"], r["days"]) for r in rows} == {
        ("2026-07", "31"),
        ("2026-08", "31"),
        ("2026-09", "30"),
    }
    assert sum(int(r["n"]) for r in rows) == quarter_spans(quarter)
    assert {(r["method"], r["relative_error"]) for r in rows} == {("sketch/lower", "0.01")}


def quarter_spans(quarter: Quarter) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE stage_id IS NOT NULL) + count(*) FILTER (WHERE is_root) "
            "FROM spans_span WHERE team_id = %s AND start_time >= %s AND start_time < %s",
            [quarter.team.pk, periods.quarter(2026, 3).start, periods.quarter(2026, 3).end],
        )
        return int(cursor.fetchone()[0])


def test_regenerating_gives_identical_csv_bytes(quarter):
    # given a built report
    first = _built(quarter)

    # when the same report is requested again
    second = _built(quarter)

    # then it is a new report whose CSV files are byte for byte the same
    assert second.pk != first.pk
    one, two = _files(first), _files(second)
    assert sorted(one) == sorted(two) == sorted(ALL_NAMES)
    assert {name: one[name] for name in CSV_NAMES} == {name: two[name] for name in CSV_NAMES}


def test_verify_report_matches_then_detects_a_one_byte_change(quarter):
    # given a built report that verifies
    report = _built(quarter)
    out = io.StringIO()
    call_command("verify_report", report.pk, stdout=out)
    lines = [line.split()[:2] for line in out.getvalue().splitlines()]
    assert lines[: len(ALL_NAMES)] == [["match", name] for name in ALL_NAMES]
    assert {word for word, _ in lines[len(ALL_NAMES) : -1]} == {"signed"}
    assert lines[-1] == ["chained", "audit_log"]

    # when one byte of a stored file changes
    stored = ReportFile.objects.get(report=report, name="attainment.csv")
    content = bytearray(stored.content)
    content[-2] = ord("7") if content[-2] != ord("7") else ord("8")
    ReportFile.objects.filter(pk=stored.pk).update(content=bytes(content))

    # then verify_report says which file no longer matches, and fails
    out = io.StringIO()
    with pytest.raises(CommandError, match="does not match"):
        call_command("verify_report", report.pk, stdout=out)
    assert [line.split()[:2] for line in out.getvalue().splitlines()][: len(ALL_NAMES)] == [
        ["MISMATCH" if name == "attainment.csv" else "match", name] for name in ALL_NAMES
    ]


def test_pdf_renders_to_png(quarter, tmp_path: Path):
    # given a built report
    report = _built(quarter)
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(_files(report)["report.pdf"])

    # when its pages are rendered with poppler
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["pdftoppm", "-png", "-r", "110", str(pdf), str(ARTIFACTS / "quarterly")], check=True
    )

    # then there are pages, the cover with the title and a verdict per objective, then the
    # charts (look at them)
    pages = sorted(ARTIFACTS.glob("quarterly-*.png"))
    assert len(pages) >= 3
    cover = subprocess.run(
        ["pdftotext", "-l", "1", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout
    text = subprocess.run(
        ["pdftotext", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout
    assert f"SLA audit report: {quarter.team.name}, 2026-Q3" in cover
    assert "Final: the quarter had ended" in cover
    assert {"met", "missed"} <= set(cover.split())
    assert "SLA attainment by month" in text


def test_quarterly_report_of_three_pipelines_builds_within_ten_seconds(quarter):
    # given a quarter of 3 pipelines x 6 stages and a queued report
    report = services.request_report(
        None, quarter.team, 2026, 3, None, quarter.auditor, timezone.now()
    )

    # when the worker's function builds it
    started = time.perf_counter()
    services.build_report(report.pk)
    seconds = time.perf_counter() - started

    # then it took at most 10 s
    print(f"report build: {seconds:.2f} s for {quarter.spans} spans")
    assert seconds <= 10


EDIT_AT = dt.datetime(2026, 8, 15, 12, 0, 30, tzinfo=dt.UTC)


def test_threshold_changed_mid_quarter_is_reported_as_two_versions_with_their_own_counts(
    quarter,
):
    # given the model_forward objective, its threshold raised mid-August (and recorded)
    objective = quarter.objectives[1]
    old_threshold = objective.threshold_ms
    edit = versions.edit_objective(
        objective,
        name=objective.name,
        threshold_ms=35.0,
        target_percent=objective.target_percent,
        edited_by=quarter.admin,
        now=EDIT_AT,
    )
    record(
        None,
        "objective.edited",
        versions.audit_subject(objective),
        {"threshold_ms": "35.0"},
        actor=quarter.admin,
        now=EDIT_AT,
    )

    # when the quarterly report is built
    report = _built(quarter)

    # then the objective has two versions split at the edit's minute, the first from its first
    # counted minute, each counted at its own threshold over its own period, and the change
    # is listed
    counted_from = moment(SlaMinute.objects.filter(objective=objective).earliest("minute").minute)
    split = dt.datetime(2026, 8, 15, 12, 0, tzinfo=dt.UTC)
    assert (edit.previous.number, edit.current.number) == (1, 2)
    assert [
        (r["version"], r["threshold_ms"], r["effective_from"], r["effective_until"])
        for r in _rows(report, "objective_versions.csv")
        if r["objective_id"] == str(objective.pk)
    ] == [
        ("1", "20.000", counted_from, "2026-08-15T12:00:00Z"),
        ("2", "35.000", "2026-08-15T12:00:00Z", ""),
    ]
    rows = [r for r in _rows(report, "attainment.csv") if r["objective_id"] == str(objective.pk)]
    q = periods.quarter(2026, 3)
    july, august, september = periods.months(2026, 3)
    expected = []
    for number, threshold, start, end in ((1, old_threshold, None, split), (2, 35.0, split, None)):
        objective.threshold_ms = threshold
        for period in (july, august, september, q):
            cut = periods.clip(period, start, end)
            if cut is not None:
                good, total = _raw_count(objective, cut, excluded=False)
                expected.append(
                    (
                        str(number),
                        cut.label,
                        moment(cut.start),
                        moment(cut.end),
                        str(good),
                        str(total),
                    )
                )
    assert [
        (r["version"], r["period"], r["start"], r["end"], r["good"], r["total"]) for r in rows
    ] == expected
    assert [(r["action"], r["at"]) for r in _rows(report, "objective_changes.csv")] == [
        ("objective.edited", "2026-08-15T12:00:30Z")
    ]


def test_completeness_says_when_counters_begin(quarter):
    # given an objective whose counters begin mid-August (as if created then: the creation
    # back-fill reaches only as far back as raw spans are kept)
    objective = quarter.objectives[2]
    SlaMinute.objects.filter(
        objective=objective, minute__lt=dt.datetime(2026, 8, 20, tzinfo=dt.UTC)
    ).delete()
    first = moment(SlaMinute.objects.filter(objective=objective).earliest("minute").minute)

    # when the report is built
    report = _built(quarter)

    # then its months say plainly what is and is not covered, from its first counted minute
    assert first.startswith("2026-08-20T00:")
    assert [
        (r["month"], r["counters_from"], r["covered"])
        for r in _rows(report, "completeness.csv")
        if r["objective_id"] == str(objective.pk)
    ] == [
        ("2026-07", first, "no: counters start later"),
        ("2026-08", first, f"partly: no counters before {first}"),
        ("2026-09", first, "yes"),
    ]

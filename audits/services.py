"""Writes of the audits app: requesting, building and verifying quarterly reports.

A report is requested (a queued row), built once by the ``reports`` worker into stored files
with their hashes, and from then on never changed: regenerating requests a new report.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from audits import tasks
from audits.log import record
from audits.models import Report, ReportFile, ReportStatus
from audits.reporting import figures, manifest, pdf, periods, tables
from latencyboard.audit_trail import Subject
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Team

logger = logging.getLogger(__name__)

ProgressHook = Callable[[int], None]

MANIFEST = "manifest.json"
PDF = "report.pdf"
CONTENT_TYPES = {
    ".csv": "text/csv; charset=utf-8",
    ".json": "application/json",
    ".pdf": "application/pdf",
}


def software_version() -> str:
    return version("latencyboard")


def report_subject(report: Report) -> Subject:
    return Subject("report", report.pk, f"{report.year} Q{report.quarter}", report.team_id)


def request_report(
    request: HttpRequest | None,
    team: Team,
    year: int,
    quarter: int,
    pipelines: list[Pipeline] | None,
    requested_by: User,
    now: dt.datetime,
) -> Report:
    """Queue a report of ``team``'s ``pipelines`` (None: all of them) for a quarter that has
    begun; the ``reports`` worker builds it after this transaction commits. The caller has
    checked ``requested_by`` may (an auditor or admin of ``team``)."""
    if periods.quarter(year, quarter).start > now:
        raise ValidationError({"quarter": "That quarter has not begun."})
    if pipelines is None:
        pipelines = list(team.pipelines.all())
    if any(p.team_id != team.pk for p in pipelines):
        raise ValidationError({"pipelines": "Not a pipeline of this team."})
    with transaction.atomic():
        report = Report.objects.create(
            team=team,
            year=year,
            quarter=quarter,
            pipeline_ids=sorted(p.pk for p in pipelines),
            requested_by=requested_by,
            requested_at=now,
            status=ReportStatus.QUEUED,
            software_version=software_version(),
        )
        record(
            request,
            "report.requested",
            report_subject(report),
            {"pipelines": report.pipeline_ids},
            actor=requested_by,
            now=now,
        )
        transaction.on_commit(lambda: tasks.build_report_task.delay(report.pk))
    return report


def build_files(report: Report, progress: ProgressHook | None = None) -> dict[str, bytes]:
    """Every file of ``report``, computed from the data as of its ``requested_at``."""
    step = progress or (lambda percent: None)
    data = figures.collect(report, report.software_version)
    step(60)
    files = tables.csv_files(data)
    files[PDF] = pdf.render(data, sorted(files))
    step(90)
    files[MANIFEST] = manifest.render(data, files)
    return files


def build_report(report_id: int) -> bool:
    """Build a queued report and freeze it; False when it was not queued (built already, or
    being built by another worker)."""
    if not Report.objects.filter(pk=report_id, status=ReportStatus.QUEUED).update(
        status=ReportStatus.RUNNING, progress=5
    ):
        return False
    report = Report.objects.select_related("team").get(pk=report_id)

    def progress(percent: int) -> None:
        Report.objects.filter(pk=report_id, status=ReportStatus.RUNNING).update(progress=percent)

    try:
        files = build_files(report, progress)
    except Exception as error:
        Report.objects.filter(pk=report_id).update(
            status=ReportStatus.FAILED, error=f"{type(error).__name__}: {error}"
        )
        logger.exception("report.failed", extra={"report": report_id})
        raise
    with transaction.atomic():
        ReportFile.objects.bulk_create(
            ReportFile(
                report=report,
                name=name,
                content_type=content_type(name),
                content=content,
                sha256=manifest.sha256(content),
            )
            for name, content in sorted(files.items())
        )
        Report.objects.filter(pk=report_id, status=ReportStatus.RUNNING).update(
            status=ReportStatus.DONE, progress=100, finished_at=timezone.now()
        )
    logger.info("report.built", extra={"report": report_id, "files": len(files)})
    return True


def content_type(name: str) -> str:
    return CONTENT_TYPES[name[name.rfind(".") :]]


@dataclass(frozen=True, slots=True)
class FileCheck:
    name: str
    stored_sha256: str  # of the stored bytes, as they are now
    listed_sha256: str  # recorded when the report was built
    recomputed_sha256: str

    @property
    def matches(self) -> bool:
        return self.stored_sha256 == self.listed_sha256 == self.recomputed_sha256


def verify_report(report: Report) -> list[FileCheck]:
    """Rebuild ``report`` from the data and compare every stored file with the rebuild and
    with the hash recorded when it was built."""
    rebuilt = build_files(report)
    checks = []
    for stored in report.files.order_by("name"):
        content = bytes(stored.content)
        checks.append(
            FileCheck(
                stored.name,
                manifest.sha256(content),
                stored.sha256,
                manifest.sha256(rebuilt.get(stored.name, b"")),
            )
        )
    return checks

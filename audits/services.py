"""Writes of the audits app: requesting, building and verifying quarterly reports.

A report is requested (a queued row), built once by the ``reports`` worker into stored files
with their hashes, and from then on never changed: regenerating requests a new report.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from importlib.metadata import version

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.http import HttpRequest
from django.utils import timezone

from audits import chain, signatures
from audits.log import chained_rows, record
from audits.models import Report, ReportFile, ReportStatus, SigningKey
from audits.queries import AUDIT_ROLES
from audits.reporting import figures, frozen, manifest, pdf, periods, queue_wait, tables
from audits.reporting.figures import ReportData
from audits.signatures import MANIFEST, PDF, SIGNATURE
from latencyboard.audit_trail import Subject
from latencyboard.celery import app
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Team
from latencyboard.teams.queries import has_role

logger = logging.getLogger(__name__)

BUILD_REPORT_TASK = "audits.build_report"
REPORTS_QUEUE = "reports"

KEY_NAME = "reports"
PENDING = (ReportStatus.QUEUED, ReportStatus.RUNNING)
CONTENT_TYPES = {
    ".csv": "text/csv; charset=utf-8",
    ".json": "application/json",
    ".pdf": "application/pdf",
}


def software_version() -> str:
    return version("latencyboard")


def report_subject(report: Report) -> Subject:
    return Subject("report", report.pk, f"{report.year} Q{report.quarter}", report.team_id)


class ReportsPending(Exception):
    """The team has as many reports queued or building as it may have at once; the oldest
    should be done in ``retry_after_s``."""

    def __init__(self, pending: int, retry_after_s: int) -> None:
        super().__init__(
            f"This team has {pending} reports queued or being built; "
            "request another when one of them is done."
        )
        self.retry_after_s = retry_after_s


RECENT_REPORTS = 10
"""Reports of a team whose build times say how long its next one takes."""


def _queue_wait(team: Team, now: dt.datetime) -> int:
    """Seconds until the team's oldest waiting report should be done, by its recent ones."""
    recent = Report.objects.filter(team=team, status=ReportStatus.DONE, finished_at__isnull=False)
    took = [
        duration.total_seconds()
        for duration in recent.order_by("-finished_at")
        .annotate(took=F("finished_at") - F("requested_at"))
        .values_list("took", flat=True)[:RECENT_REPORTS]
    ]
    oldest = min(
        Report.objects.filter(team=team, status__in=PENDING).values_list("requested_at", flat=True)
    )
    return queue_wait.retry_after_seconds(
        took, (now - oldest).total_seconds(), settings.AUDIT_REPORT_RETRY_AFTER_SECONDS
    )


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
    begun; the ``reports`` worker builds it after this transaction commits. Refuses with
    ``PermissionDenied`` unless ``requested_by`` audits or administers ``team``, and with
    :class:`ReportsPending` while the team has ``AUDIT_MAX_PENDING_REPORTS`` waiting."""
    if not has_role(requested_by, team, *AUDIT_ROLES):
        raise PermissionDenied("Only the team's auditors and admins request its reports.")
    if periods.quarter(year, quarter).start > now:
        raise ValidationError({"quarter": "That quarter has not begun."})
    if pipelines is None:
        pipelines = list(team.pipelines.all())
    if any(p.team_id != team.pk for p in pipelines):
        raise ValidationError({"pipelines": "Not a pipeline of this team."})
    with transaction.atomic():
        # The team's row serialises concurrent requests, so the count cannot be raced past.
        list(Team.objects.select_for_update().filter(pk=team.pk).values_list("pk"))
        pending = Report.objects.filter(team=team, status__in=PENDING).count()
        if pending >= settings.AUDIT_MAX_PENDING_REPORTS:
            raise ReportsPending(pending, _queue_wait(team, now))
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
        # Sent by name: the tasks module imports this one, never the other way round.
        transaction.on_commit(
            lambda: app.send_task(BUILD_REPORT_TASK, args=(report.pk,), queue=REPORTS_QUEUE)
        )
    return report


def signing_key() -> SigningKey:
    """The server's report signing key, made on first use."""
    key = SigningKey.objects.filter(name=KEY_NAME).first()
    if key is not None:
        return key
    private = signatures.new_private_key()
    try:
        with transaction.atomic():
            return SigningKey.objects.create(
                name=KEY_NAME,
                private_key=private,
                public_key=signatures.public_key_of(private),
                created_at=timezone.now(),
            )
    except IntegrityError:  # another worker made it first
        return SigningKey.objects.get(name=KEY_NAME)


def read_figures(report: Report, as_of: dt.datetime | None = None) -> ReportData:
    """Every figure of ``report``, read in one repeatable-read snapshot whose moment is its
    ``as_of`` (None: now): data committed later (late spans included) is never seen. An
    earlier ``as_of`` (tests replaying a past request) also cuts the data by time."""
    nested = connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        if not nested:  # a test's transaction has its snapshot already
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SELECT statement_timestamp()")
        (snapshot,) = cursor.fetchone()
        return figures.collect(report, as_of or snapshot, report.software_version)


def render_files(data: ReportData, private_key: bytes) -> dict[str, bytes]:
    """Every file of a report from its figures: the tables, the manifest, the PDF carrying
    the manifest's hash, and the signature of both."""
    files = tables.csv_files(data)
    public_key = signatures.public_key_of(private_key)
    files[MANIFEST] = manifest.render(data, files, public_key)
    files[PDF] = pdf.render(data, sorted(files), signatures.sha256(files[MANIFEST]), public_key)
    files[SIGNATURE] = signatures.sign(private_key, data.report_id, files)
    return files


def is_provisional(report: Report) -> bool:
    """Whether ``report``'s quarter had not ended at its cut-off (False until it is built)."""
    if report.as_of is None:
        return False
    return periods.provisional(periods.quarter(report.year, report.quarter), report.as_of)


def build_report(report_id: int, as_of: dt.datetime | None = None) -> bool:
    """Build a queued report and freeze it; False when it was not queued (built already, or
    being built by another worker). ``as_of``: see :func:`read_figures`."""
    if not Report.objects.filter(pk=report_id, status=ReportStatus.QUEUED).update(
        status=ReportStatus.RUNNING, progress=5
    ):
        return False
    report = Report.objects.select_related("team").get(pk=report_id)
    try:
        data = read_figures(report, as_of)
        Report.objects.filter(pk=report_id, status=ReportStatus.RUNNING).update(progress=60)
        files = render_files(data, bytes(signing_key().private_key))
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
                sha256=signatures.sha256(content),
            )
            for name, content in sorted(files.items())
        )
        Report.objects.filter(pk=report_id, status=ReportStatus.RUNNING).update(
            status=ReportStatus.DONE,
            progress=100,
            finished_at=timezone.now(),
            as_of=data.as_of,
            figures=frozen.dumps(data),
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
    recomputed_sha256: str  # rendered again from the figures kept at as_of

    @property
    def matches(self) -> bool:
        return self.stored_sha256 == self.listed_sha256 == self.recomputed_sha256


@dataclass(frozen=True, slots=True)
class Verification:
    files: list[FileCheck]
    signature: list[signatures.Check]  # of the stored files, with the server's public key
    audit_log: chain.Verdict  # the log now, against the chain head the report signed

    @property
    def holds(self) -> bool:
        return (
            all(f.matches for f in self.files)
            and all(c.ok for c in self.signature)
            and self.audit_log.broken is None
        )


def verify_report(report: Report) -> Verification:
    """Render ``report`` again from the figures kept at its ``as_of``, compare every stored
    file with the rendering and with the hash recorded at the build, and check the stored
    files' signature as an auditor would, with the server's public key."""
    if report.figures is None:
        raise ValueError(f"Report {report.pk} was built before reports kept their figures.")
    key = signing_key()
    data = frozen.loads(bytes(report.figures))
    rebuilt = render_files(data, bytes(key.private_key))
    stored = {f.name: f for f in report.files.order_by("name")}
    checks = [
        FileCheck(
            name,
            signatures.sha256(bytes(f.content)),
            f.sha256,
            signatures.sha256(rebuilt.get(name, b"")),
        )
        for name, f in stored.items()
    ]
    files = {name: bytes(f.content) for name, f in stored.items()}
    signed = [] if data.audit_log is None else [_checkpoint(report.pk, data.audit_log, data.as_of)]
    return Verification(
        checks, signatures.verify(files, key.public_key), chain.verify(chained_rows(), signed)
    )


def _checkpoint(report_id: int, head: chain.Head, as_of: dt.datetime) -> chain.Checkpoint:
    return chain.Checkpoint(head, as_of, f"report {report_id}")


def report_checkpoints() -> tuple[list[chain.Checkpoint], list[int]]:
    """The chain heads the finished reports carry in their signed manifests, and the ids of
    the reports whose manifest the server's key does not vouch for."""
    public_key = signing_key().public_key
    checkpoints, unsigned = [], []
    for report in Report.objects.filter(status=ReportStatus.DONE).order_by("pk"):
        files = dict(
            report.files.filter(name__in=(MANIFEST, PDF, SIGNATURE)).values_list("name", "content")
        )
        manifest = signatures.signed_manifest(
            {name: bytes(content) for name, content in files.items()}, public_key
        )
        if manifest is None:
            unsigned.append(report.pk)
        elif "audit_log" in manifest:
            head = chain.Head(manifest["audit_log"]["seq"], manifest["audit_log"]["sha256"])
            as_of = dt.datetime.fromisoformat(manifest["as_of"])
            checkpoints.append(_checkpoint(report.pk, head, as_of))
    return checkpoints, unsigned


def verify_audit_log() -> tuple[chain.Verdict, list[int]]:
    """The audit log's chain from its first event, against every finished report's signed
    checkpoint; and the reports whose checkpoint could not be trusted."""
    checkpoints, unsigned = report_checkpoints()
    return chain.verify(chained_rows(), checkpoints), unsigned

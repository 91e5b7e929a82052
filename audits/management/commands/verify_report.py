"""``manage.py verify_report <id>``: render a stored report again from the figures it read at
its cut-off, compare every file, check its signature with the server's public key, and check
the audit log against the chain head the report signed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audits import services
from audits.models import Report, ReportStatus


class Command(BaseCommand):
    help = (
        "Render a finished report again from the figures read at its as_of, compare it with "
        "its stored files, and check the signature."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("report_id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        report = Report.objects.select_related("team").filter(pk=options["report_id"]).first()
        if report is None:
            raise CommandError(f"No report {options['report_id']}.")
        if report.status != ReportStatus.DONE:
            raise CommandError(f"Report {report.pk} is {report.status}, not done.")
        try:
            verification = services.verify_report(report)
        except ValueError as error:
            raise CommandError(str(error)) from error
        for check in verification.files:
            if check.matches:
                self.stdout.write(f"match     {check.name}  {check.stored_sha256}")
            else:
                self.stdout.write(
                    f"MISMATCH  {check.name}  stored {check.stored_sha256}  "
                    f"listed {check.listed_sha256}  recomputed {check.recomputed_sha256}"
                )
        for signed in verification.signature:
            word = "signed" if signed.ok else "UNSIGNED"
            self.stdout.write(f"{word:10}{signed.subject}  {signed.detail}")
        log, broken = verification.audit_log, verification.audit_log.broken
        if broken is None:
            self.stdout.write(f"chained   audit_log  {log.events} events, head seq {log.head.seq}")
        else:
            self.stdout.write(f"BROKEN    audit_log  {broken}")
        if not verification.holds:
            raise CommandError("The report does not match its figures or its signature.")

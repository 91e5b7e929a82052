"""``manage.py verify_report <id>``: rebuild a stored report and say match or mismatch per file."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audits import services
from audits.models import Report, ReportStatus


class Command(BaseCommand):
    help = "Rebuild a finished report from the data and compare it with its stored files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("report_id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        report = Report.objects.select_related("team").filter(pk=options["report_id"]).first()
        if report is None:
            raise CommandError(f"No report {options['report_id']}.")
        if report.status != ReportStatus.DONE:
            raise CommandError(f"Report {report.pk} is {report.status}, not done.")
        checks = services.verify_report(report)
        for check in checks:
            if check.matches:
                self.stdout.write(f"match     {check.name}  {check.stored_sha256}")
            else:
                self.stdout.write(
                    f"MISMATCH  {check.name}  stored {check.stored_sha256}  "
                    f"listed {check.listed_sha256}  recomputed {check.recomputed_sha256}"
                )
        if not all(check.matches for check in checks):
            raise CommandError("The report does not match the data.")

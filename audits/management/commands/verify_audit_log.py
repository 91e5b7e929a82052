"""``manage.py verify_audit_log``: walk the audit log's hash chain from its first event and
name the first row that was edited, deleted or inserted out of order (back-dated), checking
it against the chain head every finished report signed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from audits import services


class Command(BaseCommand):
    help = (
        "Check the audit log's hash chain and the reports' signed checkpoints; name the first "
        "row that was edited, deleted or inserted back-dated."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        verdict, unsigned = services.verify_audit_log()
        for report_id in unsigned:
            self.stdout.write(f"FAILED  report {report_id}: its manifest's signature does not hold")
        broken = verdict.broken
        if broken is not None:
            self.stdout.write(f"FAILED  {broken}")
            raise CommandError(
                f"The audit log does not hold from seq {broken.seq}; "
                f"{verdict.events} events before it chain."
            )
        self.stdout.write(
            f"ok      {verdict.events} events chained, head seq {verdict.head.seq} "
            f"{verdict.head.sha256}"
        )
        if unsigned:
            raise CommandError("The audit log holds, but some reports' checkpoints do not.")

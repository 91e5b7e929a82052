from __future__ import annotations

from celery import shared_task

from audits import services

REPORTS_QUEUE = "reports"


@shared_task(name="audits.build_report", ignore_result=True, queue=REPORTS_QUEUE)
def build_report_task(report_id: int) -> None:
    services.build_report(report_id)

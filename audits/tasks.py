from __future__ import annotations

from celery import shared_task

from audits import services


@shared_task(name=services.BUILD_REPORT_TASK, ignore_result=True, queue=services.REPORTS_QUEUE)
def build_report_task(report_id: int) -> None:
    services.build_report(report_id)

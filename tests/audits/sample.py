"""A small report's figures built by hand, for the pure renderers (tables, PDF, manifest)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal
from typing import Any

from audits.reporting import pdf, periods, tables
from audits.reporting.figures import Attainment, Completeness, Ingest, ReportData
from audits.reporting.percentile_figures import Percentiles
from latencyboard.sla import attainment as maths

REQUESTED_AT = dt.datetime(2026, 10, 1, 1, tzinfo=dt.UTC)
PUBLIC_KEY = "MCowBQYDK2VwAyEA" + "A" * 28


def render_pdf(data: ReportData) -> bytes:
    return pdf.render(data, sorted(tables.csv_files(data)), "0" * 64, PUBLIC_KEY)


def report_data(
    pipeline: str = "fraud-scorer", objective: str = "fast", **changes: Any
) -> ReportData:
    """Figures of 2026 Q3 with one pipeline, one objective and a month of counts each."""
    quarter = periods.quarter(2026, 3)
    months = periods.months(2026, 3)
    target = Decimal("99.000")
    attainment = tuple(_attainment(objective, pipeline, p, target) for p in (*months, quarter))
    data = ReportData(
        report_id=7,
        team="payments",
        quarter=quarter,
        months=months,
        pipelines=(pipeline,),
        requested_at=REQUESTED_AT,
        as_of=REQUESTED_AT,
        software_version="0.1.0",
        versions=(),
        attainment=attainment,
        exclusions=(),
        percentiles=tuple(
            Percentiles(pipeline, "model_forward", m.label, 30, 1000, (5.0, 9.0, 12.0, 20.0))
            for m in months
        ),
        completeness=tuple(
            Completeness(1, objective, m, 44640, 40000, months[0].start) for m in months
        ),
        ingest=tuple(Ingest(m.label, 1000, 0) for m in months),
        changes=(),
        alerts=(),
    )
    return dataclasses.replace(data, **changes)


def _attainment(
    objective: str, pipeline: str, period: periods.Period, target: Decimal
) -> Attainment:
    return Attainment(
        1,
        objective,
        pipeline,
        "end-to-end",
        1,
        60.0,
        period,
        maths.budget(995, 1000, target),
        maths.Counts(0, 0),
        44640,
        44640,
        40000,
    )

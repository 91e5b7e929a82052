"""The report's tables as CSV files with deterministic bytes (pure: no Django).

Rows come in a fixed order (the order ``figures`` reads them in), every float has a fixed
format and times are ISO 8601 UTC with a ``Z``: the same figures always give the same bytes.
Names people typed (objectives, pipelines, reasons) that a spreadsheet would run as formulas
are neutralised by ``latencyboard.spreadsheet``.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from audits.reporting.figures import Attainment, Completeness, ReportData
from audits.reporting.handling import Step
from audits.reporting.percentile_figures import QUANTILE_METHOD, QUANTILES
from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.spreadsheet import csv_bytes
from latencyboard.stats.labels import quantile_label


def moment(value: dt.datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def percent(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


def ms(value: float) -> str:
    return f"{value:.3f}"


def decimal(value: Decimal) -> str:
    return f"{value:.5f}"


def share(part: int, whole: int) -> float | None:
    return None if whole == 0 else 100 * part / whole


def verdict(data: ReportData, row: Attainment) -> str:
    """The row's outcome in plain words: met, missed or no data, "so far" and provisional
    while its period had not ended at the report's cut-off."""
    met = row.budget.met
    word = "no data" if met is None else ("met" if met else "missed")
    if data.provisional and row.period.end >= data.data_end:
        return f"provisional: {word} so far"
    return word


def coverage(row: Attainment) -> str:
    """How much of the row's period its figure stands on."""
    if row.minutes == 0:
        return "no minutes"
    counted = share(row.counted_minutes, row.minutes) or 0.0
    traffic = share(row.traffic_minutes, row.minutes) or 0.0
    return f"counters on {counted:.1f}% of its minutes, traffic on {traffic:.1f}%"


def attainment(data: ReportData) -> bytes:
    header = [
        "objective_id",
        "objective",
        "pipeline",
        "stage",
        "version",
        "threshold_ms",
        "target_percent",
        "period",
        "start",
        "end",
        "good",
        "total",
        "bad",
        "attainment_percent",
        "met",
        "allowed_bad",
        "budget_consumed_percent",
        "maintenance_good",
        "maintenance_total",
        "minutes",
        "minutes_counted",
        "minutes_with_traffic",
        "counted_percent",
        "traffic_percent",
        "verdict",
    ]
    rows = [
        (
            a.objective_id,
            a.objective,
            a.pipeline,
            a.stage,
            a.version,
            ms(a.threshold_ms),
            f"{a.budget.target_percent:.3f}",
            a.period.label,
            moment(a.period.start),
            moment(a.period.end),
            a.budget.good,
            a.budget.total,
            a.budget.bad,
            percent(a.budget.attainment_percent),
            "" if a.budget.met is None else ("yes" if a.budget.met else "no"),
            decimal(a.budget.allowed_bad),
            percent(a.budget.consumed_percent),
            a.excluded.good,
            a.excluded.total,
            a.minutes,
            a.counted_minutes,
            a.traffic_minutes,
            percent(share(a.counted_minutes, a.minutes)),
            percent(share(a.traffic_minutes, a.minutes)),
            verdict(data, a),
        )
        for a in data.attainment
    ]
    return csv_bytes(header, rows)


def maintenance(data: ReportData) -> bytes:
    header = [
        "objective_id",
        "window_id",
        "covers",
        "start",
        "end",
        "reason",
        "declared_by",
        "declared_at",
    ]
    rows = [
        (
            e.objective_id,
            e.window_id,
            e.covers,
            moment(e.start),
            moment(e.end),
            e.reason,
            e.created_by,
            moment(e.created_at),
        )
        for e in data.exclusions
    ]
    return csv_bytes(header, rows)


def percentiles(data: ReportData) -> bytes:
    header = [
        "pipeline",
        "stage",
        "month",
        "days",
        "n",
        *(f"{quantile_label(q)}_ms" for q in QUANTILES),
        "method",
        "relative_error",
    ]
    rows = [
        (
            p.pipeline,
            p.stage,
            p.month,
            p.days,
            p.n,
            *(ms(v) for v in p.values),
            f"sketch/{QUANTILE_METHOD}",
            f"{RELATIVE_ERROR:g}",
        )
        for p in data.percentiles
    ]
    return csv_bytes(header, rows)


def covered(row: Completeness) -> str:
    """Whether the objective's counters cover the month: never implied when they do not."""
    if row.counters_from is None:
        return "no: no counters"
    if row.counters_from >= row.period.end:
        return "no: counters start later"
    if row.counters_from > row.period.start:
        return f"partly: no counters before {moment(row.counters_from)}"
    return "yes"


def completeness(data: ReportData) -> bytes:
    header = [
        "objective_id",
        "objective",
        "month",
        "start",
        "end",
        "minutes",
        "minutes_with_data",
        "minutes_without_data",
        "counters_from",
        "covered",
    ]
    rows = [
        (
            c.objective_id,
            c.objective,
            c.period.label,
            moment(c.period.start),
            moment(c.period.end),
            c.minutes,
            c.minutes_with_data,
            c.minutes - c.minutes_with_data,
            moment(c.counters_from),
            covered(c),
        )
        for c in data.completeness
    ]
    return csv_bytes(header, rows)


def ingest(data: ReportData) -> bytes:
    rows = [(i.month, i.stored_spans, i.rejected_spans) for i in data.ingest]
    return csv_bytes(["month", "stored_spans", "rejected_spans"], rows)


def versions(data: ReportData) -> bytes:
    header = [
        "objective_id",
        "objective",
        "version",
        "name",
        "threshold_ms",
        "target_percent",
        "effective_from",
        "effective_until",
    ]
    rows = [
        (
            v.objective_id,
            v.objective,
            v.version.number,
            v.version.name,
            ms(v.version.threshold_ms),
            f"{v.version.target_percent:.3f}",
            moment(v.version.effective_from),
            moment(v.version.effective_until),
        )
        for v in data.versions
    ]
    return csv_bytes(header, rows)


def changes(data: ReportData) -> bytes:
    rows = [(moment(c.at), c.actor, c.action, c.subject, c.detail) for c in data.changes]
    return csv_bytes(["at", "actor", "action", "subject", "detail"], rows)


def _step(step: Step | None) -> tuple[str, str]:
    return ("", "") if step is None else (moment(step.at), step.by)


def integer(value: int | None) -> str:
    return "" if value is None else str(value)


def alerts(data: ReportData) -> bytes:
    header = [
        "alert_id",
        "pipeline",
        "stage",
        "rule",
        "severity",
        "started_at",
        "acknowledged_at",
        "acknowledged_by",
        "resolved_at",
        "resolved_by",
        "seconds_to_acknowledge",
        "seconds_to_resolve",
        "summary",
    ]
    rows = [
        (
            a.alert_id,
            a.pipeline,
            a.stage,
            a.rule,
            a.severity,
            moment(a.started_at),
            *_step(a.acknowledged),
            *_step(a.resolved),
            integer(a.seconds_to_acknowledge),
            integer(a.seconds_to_resolve),
            a.summary,
        )
        for a in data.alerts
    ]
    return csv_bytes(header, rows)


def csv_files(data: ReportData) -> dict[str, bytes]:
    """Every table of the report, by file name."""
    return {
        "attainment.csv": attainment(data),
        "maintenance.csv": maintenance(data),
        "percentiles.csv": percentiles(data),
        "completeness.csv": completeness(data),
        "ingest.csv": ingest(data),
        "objective_versions.csv": versions(data),
        "objective_changes.csv": changes(data),
        "alerts.csv": alerts(data),
    }

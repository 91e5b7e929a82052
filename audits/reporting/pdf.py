"""The report as a PDF with charts, rendered locally by reportlab (pure: no Django, no network:
the standard Helvetica fonts are built into every PDF reader, charts are vector drawings).

A cover says the verdict of each objective in plain words with the share of the quarter it
stands on; every page carries the report's id, its manifest's SHA-256 and its page number.
``invariant`` fixes the creation date and document id, so the same figures give the same
bytes, as the CSV files do.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
from collections.abc import Sequence

from reportlab.lib.pagesizes import A4
from reportlab.platypus import PageBreak, SimpleDocTemplate, Spacer
from reportlab.platypus.flowables import Flowable

from audits.reporting import tables
from audits.reporting.figures import ReportData
from audits.reporting.handling import Durations, Step, per_pipeline
from audits.reporting.pdf_layout import (
    MARGIN,
    PALETTE,
    Footer,
    PagedCanvas,
    bar_chart,
    legend,
)
from audits.reporting.pdf_layout import paragraph as _paragraph
from audits.reporting.pdf_layout import table as _table
from audits.reporting.percentile_figures import QUANTILE_METHOD, QUANTILES
from latencyboard.sketches.buckets import RELATIVE_ERROR


def _attainment_chart(data: ReportData) -> list[Flowable]:
    months = [m.label for m in data.months]
    series: dict[str, list[float | None]] = {}
    for a in data.attainment:
        if a.period.label in months and a.budget.attainment_percent is not None:
            values = series.setdefault(f"{a.objective} v{a.version}", [None] * len(months))
            values[months.index(a.period.label)] = a.budget.attainment_percent
    if not series:
        return [_paragraph("No SLA objective counted any request in this quarter.")]
    lowest = min(v for vs in series.values() for v in vs if v is not None)
    shown = list(series.items())[: len(PALETTE)]
    return [
        *bar_chart(
            "SLA attainment by month, % of requests within the threshold (maintenance excluded)",
            months,
            [values for _, values in shown],
            value_min=max(0.0, float(int(lowest)) - 1.0),
            value_max=100.0,
        ),
        legend([name for name, _ in shown]),
    ]


def _percentile_charts(data: ReportData) -> list[Flowable]:
    p99 = QUANTILES.index(0.99)
    months = [m.label for m in data.months]
    charts: list[Flowable] = []
    for pipeline in data.pipelines:
        rows = [p for p in data.percentiles if p.pipeline == pipeline]
        if not rows:
            charts.append(_paragraph(f"{pipeline}: no rollups in this quarter."))
            continue
        stages = sorted({p.stage for p in rows})
        series = []
        for month in months:
            by_stage = {p.stage: p.values[p99] for p in rows if p.month == month}
            series.append([by_stage.get(stage) for stage in stages])
        charts += bar_chart(f"{pipeline}: p99 latency (ms) by stage and month", stages, series, 0.0)
        charts.append(legend(months))
    return charts


def _short(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


def _median(durations: Durations) -> str:
    return "" if durations.median_s is None else f"{durations.median_s:.1f}"


def _step(step: Step | None) -> tuple[str, str]:
    return ("", "") if step is None else (_short(step.at), step.by)


def _alerts(data: ReportData) -> list[Flowable]:
    return [
        _paragraph("Alerts and their handling", "Heading2"),
        _table(
            ["pipeline", "alerts", "acknowledged", "median to ack s", "max to ack s",
             "resolved", "median to resolve s", "max to resolve s"],
            [
                (p.pipeline, p.alerts, p.acknowledge.count, _median(p.acknowledge),
                 tables.integer(p.acknowledge.max_s), p.resolve.count, _median(p.resolve),
                 tables.integer(p.resolve.max_s))
                for p in per_pipeline(data.pipelines, data.alerts)
            ],
        ),
        Spacer(1, 6),
        _table(
            ["id", "pipeline", "stage", "rule", "severity", "started", "acknowledged", "by",
             "resolved", "by", "to ack s", "to resolve s"],
            [
                (a.alert_id, a.pipeline, a.stage, a.rule, a.severity,
                 _short(a.started_at), *_step(a.acknowledged), *_step(a.resolved),
                 tables.integer(a.seconds_to_acknowledge), tables.integer(a.seconds_to_resolve))
                for a in data.alerts
            ],
        ),
    ]  # fmt: skip


def _cover(data: ReportData, manifest_sha256: str, public_key: str) -> list[Flowable]:
    quarter_rows = [a for a in data.attainment if a.period.label == data.quarter.label]
    state = (
        "PROVISIONAL: the quarter had not ended at the cut-off; every figure covers the "
        f"quarter up to {tables.moment(data.data_end)} only and may still change."
        if data.provisional
        else "Final: the quarter had ended at the cut-off."
    )
    if not quarter_rows:
        summary = "No SLA objective covers these pipelines: this report states no attainment."
    elif all(a.budget.total == 0 for a in quarter_rows):
        summary = "No objective counted any request in this period: nothing was met or missed."
    else:
        summary = "Verdict per objective version over the quarter:"
    return [
        _paragraph(f"SLA audit report: {data.team}, {data.quarter.label}", "Title"),
        _paragraph(
            f"Report #{data.report_id}. Period {tables.moment(data.quarter.start)} to "
            f"{tables.moment(data.quarter.end)}. Requested {tables.moment(data.requested_at)}; "
            f"every figure read as of {tables.moment(data.as_of)} (one database snapshot), "
            f"minutes counted until {tables.moment(data.data_end)}."
        ),
        _paragraph(state, "Heading3"),
        _paragraph(f"Pipelines: {', '.join(data.pipelines) or '(none)'}."),
        _paragraph(summary),
        _table(
            ["objective", "version", "pipeline / stage", "target %", "attainment %", "verdict",
             "coverage"],
            [
                (a.objective, a.version, f"{a.pipeline} / {a.stage}",
                 f"{a.budget.target_percent:.3f}", tables.percent(a.budget.attainment_percent),
                 tables.verdict(data, a), tables.coverage(a))
                for a in quarter_rows
            ],
        ),
        Spacer(1, 8),
        _paragraph(
            "Coverage: the share of the period's minutes from the objective's first counted "
            "minute on (its counters), and the share with at least one request (traffic). A "
            "verdict stands on those minutes only."
        ),
        _paragraph(
            f"Signed with Ed25519. Public key: {public_key}. manifest.json SHA-256: "
            f"{manifest_sha256}. Verify the downloaded files with: python -m audits.verify "
            "<folder> --public-key <key>."
        ),
        _paragraph(f"Software: latencyboard {data.software_version}."),
        PageBreak(),
    ]  # fmt: skip


def render(
    data: ReportData, file_names: Sequence[str], manifest_sha256: str, public_key: str
) -> bytes:
    """The PDF of ``data``; ``file_names`` are the files shipped beside it, ``manifest_sha256``
    is printed on every page."""
    quarter_rows = [a for a in data.attainment if a.period.label == data.quarter.label]
    story: list[Flowable] = [
        *_cover(data, manifest_sha256, public_key),
        _paragraph("Attainment per objective version over the quarter", "Heading2"),
        _table(
            ["objective", "v", "threshold ms", "target %", "from", "to", "good", "total",
             "attainment %", "verdict", "budget used %", "coverage"],
            [
                (a.objective, a.version, tables.ms(a.threshold_ms),
                 f"{a.budget.target_percent:.3f}", _short(a.period.start),
                 _short(a.period.end), a.budget.good, a.budget.total,
                 tables.percent(a.budget.attainment_percent), tables.verdict(data, a),
                 tables.percent(a.budget.consumed_percent), tables.coverage(a))
                for a in quarter_rows
            ],
        ),
        Spacer(1, 8),
        *_attainment_chart(data),
        _paragraph("Stage percentiles", "Heading2"),
        *_percentile_charts(data),
        _table(
            ["pipeline", "stage", "month", "n", "p50", "p95", "p99", "p99.9"],
            [
                (p.pipeline, p.stage, p.month, p.n, *(tables.ms(v) for v in p.values))
                for p in data.percentiles
            ],
        ),
        *_alerts(data),
        _paragraph("Data completeness", "Heading2"),
        _table(
            ["objective", "month", "minutes", "with data", "without", "covered"],
            [
                (c.objective, c.period.label, c.minutes, c.minutes_with_data,
                 c.minutes - c.minutes_with_data, tables.covered(c))
                for c in data.completeness
            ],
        ),
        _paragraph(
            "An objective's counters exist from its first counted minute: creating an objective "
            "counts the raw spans still retained (30 days), nothing older. A month before that "
            "minute is not covered, and is marked so in completeness.csv."
        ),
        _table(
            ["month", "stored spans", "rejected spans"],
            [(i.month, i.stored_spans, i.rejected_spans) for i in data.ingest],
        ),
        _paragraph("Maintenance exclusions", "Heading2"),
        _table(
            ["objective", "start", "end", "covers", "reason", "declared by"],
            [
                (e.objective_id, tables.moment(e.start), tables.moment(e.end), e.covers,
                 e.reason, e.created_by)
                for e in data.exclusions
            ],
        ),
        _paragraph(
            "Changes to objectives, maintenance windows and alert rules during the quarter "
            "(audit log)",
            "Heading2",
        ),
        _table(
            ["at", "who", "action", "subject", "before → after"],
            [(tables.moment(c.at), c.actor, c.action, c.subject, c.detail) for c in data.changes],
        ),
        _paragraph("Methodology", "Heading2"),
        _paragraph(
            "Attainment is good requests over all requests from exact per-minute counters: a "
            "request is good when its duration is at most the threshold. Minutes starting in "
            "a maintenance window declared before this report are left out. Each objective "
            "version is reported over its own period with the counts made at its own "
            "threshold. Error budget consumed is bad requests over (100% - target) of the total."
        ),
        _paragraph(
            "One cut-off: every figure was read in one database snapshot taken at the report's "
            "as_of, so counters, rollups, batches, alerts and audit events are those committed "
            "by then, over the minutes before it. Data arriving later (late spans included) "
            "never changes this report; a new report counts it."
        ),
        _paragraph(
            f"Percentiles merge the rollups' sketches per pipeline, stage and month: day "
            f"rollups for closed days, minute rollups after the last one, up to the same minute "
            f"as the counters; quantile method '{QUANTILE_METHOD}', relative error at most "
            f"{RELATIVE_ERROR:g} of the value; n is the exact number of spans."
        ),
        _paragraph(
            "Alerts are those of the report's pipelines that started in the quarter, with "
            "their history as it stood at the cut-off. Time to acknowledge and "
            "time to resolve are whole seconds from the alert's start to its first transition "
            "to acknowledged and to resolved, every moment cut to the second as printed in "
            "alerts.csv; 'automatic' means the evaluator resolved it after enough clean "
            "windows. An alert resolved without acknowledgement has no time to acknowledge; "
            "medians and maxima are over the alerts that reached the status."
        ),
        _paragraph(
            f"Files: {', '.join(file_names)}, this PDF and signature.json. manifest.json lists "
            f"every table with its SHA-256; signature.json signs the SHA-256 of manifest.json "
            f"and of this PDF. manage.py verify_report {data.report_id} renders every file "
            f"again from the figures read at as_of and checks them and the signature."
        ),
    ]  # fmt: skip
    out = io.BytesIO()
    doc = SimpleDocTemplate(
        out,
        pagesize=A4,
        invariant=1,
        title=f"SLA audit report {data.team} {data.quarter.label}",
        author="latencyboard",
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=MARGIN,
    )
    footer = Footer(
        f"Report #{data.report_id}, {data.team}, {data.quarter.label}",
        manifest_sha256,
        data.provisional,
    )
    doc.build(story, canvasmaker=functools.partial(PagedCanvas, footer=footer))
    return out.getvalue()

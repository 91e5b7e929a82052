"""The report as a PDF with charts, rendered locally by reportlab (pure: no Django, no network:
the standard Helvetica fonts are built into every PDF reader, charts are vector drawings).

``invariant`` fixes the creation date and document id, so the same figures give the same
bytes, as the CSV files do.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Sequence
from xml.sax.saxutils import escape

from reportlab.graphics.charts.barcharts import VerticalBarChart
from reportlab.graphics.charts.legends import Legend
from reportlab.graphics.shapes import Drawing, String
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle
from reportlab.platypus.flowables import Flowable

from audits.reporting import tables
from audits.reporting.figures import QUANTILE_METHOD, QUANTILES, ReportData
from audits.reporting.handling import Durations, Step, per_pipeline
from latencyboard.sketches.buckets import RELATIVE_ERROR

_PALETTE = (
    colors.HexColor("#1f77b4"),
    colors.HexColor("#ff7f0e"),
    colors.HexColor("#2ca02c"),
    colors.HexColor("#d62728"),
    colors.HexColor("#9467bd"),
    colors.HexColor("#8c564b"),
    colors.HexColor("#e377c2"),
    colors.HexColor("#7f7f7f"),
)
_WIDTH = A4[0] - 4 * cm
_STYLES = getSampleStyleSheet()
_TABLE_STYLE = TableStyle(
    [
        ("FONT", (0, 0), (-1, -1), "Helvetica", 6.5),
        ("FONT", (0, 0), (-1, 0), "Helvetica-Bold", 6.5),
        ("LEFTPADDING", (0, 0), (-1, -1), 3),
        ("RIGHTPADDING", (0, 0), (-1, -1), 3),
        ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#eeeeee")),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
    ]
)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    body = [list(header), *([str(cell) for cell in row] for row in rows)]
    if len(body) == 1:
        body.append(["(none)", *[""] * (len(header) - 1)])
    table = Table(body, repeatRows=1, hAlign="LEFT")
    table.setStyle(_TABLE_STYLE)
    return table


def _bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    value_label: str,
    value_min: float,
    value_max: float | None = None,
) -> Drawing:
    drawing = Drawing(_WIDTH, 250)
    drawing.add(String(0, 235, title, fontName="Helvetica-Bold", fontSize=10))
    chart = VerticalBarChart()
    chart.x, chart.y, chart.width, chart.height = 40, 70, _WIDTH - 190, 150
    # None draws no bar: a month without counts is not a month at 0%.
    chart.data = [list(values) for _, values in series] or [[None]]
    chart.categoryAxis.categoryNames = list(categories)
    chart.categoryAxis.labels.fontName = "Helvetica"
    chart.categoryAxis.labels.fontSize = 7
    # Stage names are long: slanted, they stay readable side by side.
    chart.categoryAxis.labels.angle = 30
    chart.categoryAxis.labels.boxAnchor = "ne"
    chart.valueAxis.labels.fontName = "Helvetica"
    chart.valueAxis.labels.fontSize = 7
    chart.valueAxis.valueMin = value_min
    chart.valueAxis.valueMax = value_max
    for i in range(len(series)):
        chart.bars[i].fillColor = _PALETTE[i % len(_PALETTE)]
    drawing.add(chart)
    drawing.add(String(0, 5, value_label, fontName="Helvetica", fontSize=7))
    legend = Legend()
    legend.x, legend.y = _WIDTH - 140, 220
    legend.fontName, legend.fontSize = "Helvetica", 7
    legend.alignment = "right"
    legend.columnMaximum = len(_PALETTE)
    legend.colorNamePairs = [
        (_PALETTE[i % len(_PALETTE)], name[:32]) for i, (name, _) in enumerate(series)
    ]
    drawing.add(legend)
    return drawing


def _attainment_chart(data: ReportData) -> Flowable:
    months = [m.label for m in data.months]
    series: dict[str, list[float | None]] = {}
    for a in data.attainment:
        if a.period.label in months and a.budget.attainment_percent is not None:
            values = series.setdefault(f"{a.objective} v{a.version}", [None] * len(months))
            values[months.index(a.period.label)] = a.budget.attainment_percent
    if not series:
        return _paragraph("No SLA objective counted any request in this quarter.")
    lowest = min(v for vs in series.values() for v in vs if v is not None)
    return _bar_chart(
        "SLA attainment by month (maintenance excluded)",
        months,
        list(series.items())[: len(_PALETTE)],
        "percent of requests within the threshold",
        value_min=max(0.0, float(int(lowest)) - 1.0),
        value_max=100.0,
    )


def _percentile_charts(data: ReportData) -> list[Flowable]:
    p99 = QUANTILES.index(0.99)
    months = [m.label for m in data.months]
    charts: list[Flowable] = []
    for pipeline in data.pipelines:
        rows = [p for p in data.percentiles if p.pipeline == pipeline]
        if not rows:
            charts.append(_paragraph(f"{pipeline}: no day rollups in this quarter."))
            continue
        stages = sorted({p.stage for p in rows})
        series = []
        for month in months:
            by_stage = {p.stage: p.values[p99] for p in rows if p.month == month}
            series.append((month, [by_stage.get(stage) for stage in stages]))
        charts.append(
            _bar_chart(
                f"{pipeline}: p99 by stage and month", stages, series, "p99 latency (ms)", 0.0
            )
        )
    return charts


def _short(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


def _median(durations: Durations) -> str:
    return "" if durations.median_s is None else f"{durations.median_s:.1f}"


def _step(step: Step | None) -> tuple[str, str]:
    return ("", "") if step is None else (_short(step.at), step.by[:20])


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
                (a.alert_id, a.pipeline, a.stage, a.rule[:24], a.severity,
                 _short(a.started_at), *_step(a.acknowledged), *_step(a.resolved),
                 tables.integer(a.seconds_to_acknowledge), tables.integer(a.seconds_to_resolve))
                for a in data.alerts
            ],
        ),
    ]  # fmt: skip


def _paragraph(text: str, style: str = "BodyText") -> Paragraph:
    """``text`` as it reads: a Paragraph parses markup (``<img src=…>`` embeds a file of the
    worker's disk, a broken tag fails the build), and pipeline, team and objective names are
    whatever someone typed or a span said."""
    return Paragraph(escape(text), _STYLES[style])


def render(data: ReportData, csv_names: Sequence[str]) -> bytes:
    """The PDF of ``data``; ``csv_names`` are the tables shipped beside it."""
    quarter_rows = [a for a in data.attainment if a.period.label == data.quarter.label]
    story: list[Flowable] = [
        _paragraph(f"SLA audit report: {data.team}, {data.quarter.label}", "Title"),
        _paragraph(
            f"Report #{data.report_id}, as of {tables.moment(data.requested_at)}. Pipelines: "
            f"{', '.join(data.pipelines) or '(none)'}. Software: latencyboard "
            f"{data.software_version}."
        ),
        Spacer(1, 6),
        _paragraph("Attainment per objective version over the quarter", "Heading2"),
        _table(
            ["objective", "v", "threshold ms", "target %", "from", "to", "good", "total",
             "attainment %", "met", "budget used %"],
            [
                (a.objective, a.version, tables.ms(a.threshold_ms),
                 f"{a.budget.target_percent:.3f}", _short(a.period.start),
                 _short(a.period.end), a.budget.good, a.budget.total,
                 tables.percent(a.budget.attainment_percent),
                 "" if a.budget.met is None else ("yes" if a.budget.met else "no"),
                 tables.percent(a.budget.consumed_percent))
                for a in quarter_rows
            ],
        ),
        Spacer(1, 8),
        _attainment_chart(data),
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
                 e.reason[:60], e.created_by)
                for e in data.exclusions
            ],
        ),
        _paragraph("Objective changes during the quarter (audit log)", "Heading2"),
        _table(
            ["at", "who", "action", "subject"],
            [(tables.moment(c.at), c.actor, c.action, c.subject[:60]) for c in data.changes],
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
            f"Percentiles merge the day rollups' sketches per pipeline, stage and month; "
            f"quantile method '{QUANTILE_METHOD}', relative error at most {RELATIVE_ERROR:g} "
            f"of the value; n is the exact number of spans."
        ),
        _paragraph(
            "Alerts are those of the report's pipelines that started in the quarter, with "
            "their history as it stood when the report was requested. Time to acknowledge and "
            "time to resolve are whole seconds from the alert's start to its first transition "
            "to acknowledged and to resolved, every moment cut to the second as printed in "
            "alerts.csv; 'automatic' means the evaluator resolved it after enough clean "
            "windows. An alert resolved without acknowledgement has no time to acknowledge; "
            "medians and maxima are over the alerts that reached the status."
        ),
        _paragraph(
            f"Files: {', '.join(csv_names)} and manifest.json (SHA-256 of every file). "
            f"manage.py verify_report {data.report_id} rebuilds them and compares."
        ),
    ]  # fmt: skip
    out = io.BytesIO()
    doc = SimpleDocTemplate(
        out,
        pagesize=A4,
        invariant=1,
        title=f"SLA audit report {data.team} {data.quarter.label}",
        author="latencyboard",
        leftMargin=2 * cm,
        rightMargin=2 * cm,
        topMargin=2 * cm,
        bottomMargin=2 * cm,
    )
    doc.build(story)
    return out.getvalue()

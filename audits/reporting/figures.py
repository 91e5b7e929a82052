"""The figures of a quarterly report, read from the exact SLA counters, the day rollups, the
ingest batches, the alerts' history and the audit log (Django reads, returning plain frozen
dataclasses).

Everything is read in one database snapshot, taken at the report's ``as_of`` (the build
runs in one repeatable-read transaction): counters, rollups, batches, alerts and audit events
as they were committed then, and only minutes before ``as_of`` cut to the minute. Maintenance
windows declared or deleted later, objective versions started later, alerts, alert transitions
and audit events after it are left out. The figures are kept with the report, so late data
never changes a finished report; a new report counts it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.db.models import Sum

from audits.chain import Head
from audits.log import chain_head
from audits.models import AuditEvent, Report
from audits.reporting import alert_figures, percentile_figures, periods
from audits.reporting.handling import HandledAlert
from audits.reporting.percentile_figures import Percentiles
from audits.reporting.periods import Period
from latencyboard.sla import attainment as maths
from latencyboard.sla import queries as sla_queries
from latencyboard.sla.models import Objective
from latencyboard.sla.versions import Version, versions_of
from latencyboard.spans.models import IngestBatch
from latencyboard.windows import MINUTE


@dataclass(frozen=True, slots=True)
class Attainment:
    """One objective version's counts over ``period`` (cut to the version and to ``as_of``),
    with how much of it the counters cover: ``counted_minutes`` of its ``minutes`` from the
    objective's first counted minute on, ``traffic_minutes`` with at least one request."""

    objective_id: int
    objective: str
    pipeline: str
    stage: str
    version: int
    threshold_ms: float
    period: Period
    budget: maths.Budget
    excluded: maths.Counts
    minutes: int
    counted_minutes: int
    traffic_minutes: int


@dataclass(frozen=True, slots=True)
class Exclusion:
    objective_id: int
    window_id: int
    covers: str
    start: dt.datetime
    end: dt.datetime
    reason: str
    created_by: str
    created_at: dt.datetime


@dataclass(frozen=True, slots=True)
class Completeness:
    objective_id: int
    objective: str
    period: Period  # the month, cut to what has passed at requested_at
    minutes: int
    minutes_with_data: int
    counters_from: dt.datetime | None  # the objective's first counted minute, ever


@dataclass(frozen=True, slots=True)
class Ingest:
    month: str
    stored_spans: int
    rejected_spans: int


@dataclass(frozen=True, slots=True)
class VersionRow:
    objective_id: int
    objective: str
    version: Version


@dataclass(frozen=True, slots=True)
class Change:
    at: dt.datetime
    actor: str
    action: str
    subject: str
    detail: str


@dataclass(frozen=True, slots=True)
class ReportData:
    report_id: int
    team: str
    quarter: Period
    months: tuple[Period, ...]
    pipelines: tuple[str, ...]
    requested_at: dt.datetime
    as_of: dt.datetime
    software_version: str
    versions: tuple[VersionRow, ...]
    attainment: tuple[Attainment, ...]
    exclusions: tuple[Exclusion, ...]
    percentiles: tuple[Percentiles, ...]
    completeness: tuple[Completeness, ...]
    ingest: tuple[Ingest, ...]
    changes: tuple[Change, ...]
    alerts: tuple[HandledAlert, ...]
    audit_log: Head | None = None
    """The last event of the audit log in the snapshot (None in reports built before the
    chain): a checkpoint the signature vouches for."""

    @property
    def data_end(self) -> dt.datetime:
        return periods.cut_off_minute(self.as_of)

    @property
    def provisional(self) -> bool:
        """The quarter had not ended at ``as_of``: every figure may still change."""
        return periods.provisional(self.quarter, self.as_of)


def _as_of(versions: Sequence[Version], at: dt.datetime) -> list[Version]:
    """The versions as they stood at ``at``: later ones dropped, the then-current one open."""
    kept = [v for v in versions if v.effective_from <= at]
    if not kept:
        return []
    last = kept[-1]
    if last.effective_until is not None and last.effective_until > at:
        kept[-1] = Version(
            last.number,
            last.name,
            last.threshold_ms,
            last.target_percent,
            last.effective_from,
            None,
        )
    return kept


def _stage_name(objective: Objective) -> str:
    return objective.stage.name if objective.stage is not None else "end-to-end"


def _minutes(period: Period) -> int:
    return int((period.end - period.start) // MINUTE)


def _objective_figures(
    objective: Objective, data_end: dt.datetime, at: dt.datetime, quarter: Period
) -> tuple[list[Attainment], list[Exclusion], list[Completeness], list[VersionRow]]:
    months = periods.months(quarter.start.year, quarter.start.month // 3 + 1)
    counts_read = sla_queries.counted(objective, quarter.start, quarter.end, as_of=at)
    per_minute = counts_read.per_minute()
    minute, good, total = per_minute.epochs, per_minute.good, per_minute.total
    excluded = per_minute.excluded
    windows = list(sla_queries.windows_in_force(objective, quarter.start, quarter.end, as_of=at))

    def counts(mask: np.ndarray) -> maths.Counts:
        return maths.Counts(int(good[mask].sum()), int(total[mask].sum()))

    counters_from = sla_queries.first_counted_minute(objective, data_end)
    attainment = []
    versions = _as_of(versions_of(objective), at)
    for index, version in enumerate(versions):
        # The first version's rows span the whole period: no counters exist before it took
        # effect, and its coverage must say so over the period, not over the version.
        since = None if index == 0 else version.effective_from
        for period in (*months, quarter):
            cut = periods.clip(period, since, version.effective_until)
            cut = None if cut is None else periods.clip(cut, None, data_end)
            if cut is None:
                continue
            inside = (minute >= maths.unix_seconds(cut.start)) & (
                minute < maths.unix_seconds(cut.end)
            )
            kept = counts(inside & ~excluded)
            counted = None if counters_from is None else periods.clip(cut, counters_from, None)
            attainment.append(
                Attainment(
                    objective.pk,
                    objective.name,
                    objective.pipeline.service_name,
                    _stage_name(objective),
                    version.number,
                    version.threshold_ms,
                    cut,
                    maths.budget(kept.good, kept.total, version.target_percent),
                    counts(inside & excluded),
                    _minutes(cut),
                    0 if counted is None else _minutes(counted),
                    int(np.count_nonzero(inside & (total > 0))),
                )
            )
    completeness = []
    for month in months:
        cut = periods.clip(month, None, data_end)
        if cut is None:
            continue
        inside = (minute >= maths.unix_seconds(cut.start)) & (minute < maths.unix_seconds(cut.end))
        completeness.append(
            Completeness(
                objective.pk,
                objective.name,
                cut,
                _minutes(cut),
                int(np.count_nonzero(inside & (total > 0))),
                counters_from,
            )
        )
    exclusions = [
        Exclusion(
            objective.pk,
            w.pk,
            w.covers,
            w.start,
            w.end,
            w.reason,
            "" if w.created_by is None else w.created_by.get_username(),
            w.created_at,
        )
        for w in windows
    ]
    version_rows = [VersionRow(objective.pk, objective.name, v) for v in versions]
    return attainment, exclusions, completeness, version_rows


def _ingest(team_id: int, months: Sequence[Period], data_end: dt.datetime) -> list[Ingest]:
    result = []
    for month in months:
        sums = IngestBatch.objects.filter(
            team_id=team_id, received_at__gte=month.start, received_at__lt=min(month.end, data_end)
        ).aggregate(stored=Sum("stored_spans"), rejected=Sum("rejected_spans"))
        result.append(Ingest(month.label, sums["stored"] or 0, sums["rejected"] or 0))
    return result


def _changes(team_id: int, quarter: Period, at: dt.datetime) -> list[Change]:
    events = AuditEvent.objects.filter(
        team_id=team_id,
        at__gte=quarter.start,
        at__lt=min(quarter.end, at),
        action__regex=r"^(objective|maintenance|alert_rule)\.",
    ).order_by("at", "id")
    return [
        Change(
            e.at,
            e.actor_username,
            e.action,
            f"{e.subject_type} {e.subject_id} {e.subject_label}",
            _json_line(e.detail),
        )
        for e in events
    ]


def _json_line(detail: object) -> str:
    return json.dumps(detail, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def collect(report: Report, as_of: dt.datetime, software_version: str) -> ReportData:
    """Every figure of ``report`` as of ``as_of`` (call it in the snapshot taken then)."""
    quarter = periods.quarter(report.year, report.quarter)
    months = periods.months(report.year, report.quarter)
    at = as_of
    data_end = periods.cut_off_minute(at)
    objectives = (
        Objective.objects.filter(team_id=report.team_id, pipeline_id__in=report.pipeline_ids)
        .filter(created_at__lte=at)
        .select_related("pipeline", "stage")
        .order_by("pipeline__service_name", "name", "id")
    )
    attainment, exclusions, completeness, versions = [], [], [], []
    for objective in objectives:
        a, e, c, v = _objective_figures(objective, data_end, at, quarter)
        attainment += a
        exclusions += e
        completeness += c
        versions += v
    pipelines = tuple(
        sorted(
            report.team.pipelines.filter(pk__in=report.pipeline_ids).values_list(
                "service_name", flat=True
            )
        )
    )
    return ReportData(
        report_id=report.pk,
        team=report.team.name,
        quarter=quarter,
        months=months,
        pipelines=pipelines,
        requested_at=report.requested_at,
        as_of=as_of,
        software_version=software_version,
        versions=tuple(versions),
        attainment=tuple(attainment),
        exclusions=tuple(exclusions),
        percentiles=percentile_figures.collect(report.pipeline_ids, months, data_end),
        completeness=tuple(completeness),
        ingest=tuple(_ingest(report.team_id, months, data_end)),
        changes=tuple(_changes(report.team_id, quarter, at)),
        alerts=alert_figures.collect(report.team_id, report.pipeline_ids, quarter, at),
        audit_log=chain_head(),
    )

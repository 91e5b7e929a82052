"""The audit pages: quarterly reports (list, request, files) and the audit log (page, CSV).

Auditors and admins of a team see its reports and log; to everyone else they do not exist
(404). Requesting a report and every download are recorded in the audit log.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from audits import queries, services
from audits.forms import LogFilterForm, ReportForm
from audits.log import record
from audits.models import LOG_COLUMNS, Report, ReportStatus
from latencyboard.audit_trail import Subject
from latencyboard.spreadsheet import csv_bytes

LOG_PAGE_ROWS = 100
_FILE_NAME = re.compile(r"[a-z_]{1,80}\.(csv|json|pdf)")
_PENDING = (ReportStatus.QUEUED, ReportStatus.RUNNING)


@login_required
@require_http_methods(["GET", "POST"])
def report_list(request: HttpRequest) -> HttpResponse:
    """GET lists the reports of the user's audited teams; POST requests a new one."""
    assert isinstance(request.user, User)  # login_required
    teams = queries.audited_teams(request.user)
    now = timezone.now()
    initial = {"year": now.year, "quarter": (now.month - 1) // 3 + 1}
    form = ReportForm(request.POST or None, user=request.user, initial=initial)
    retry_after_s = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            report = services.request_report(
                request,
                data["team"],
                data["year"],
                data["quarter"],
                list(data["pipelines"]) or None,
                request.user,
                now,
            )
        except ValidationError as error:
            form.add_error(None, error)
        except services.ReportsPending as busy:
            form.add_error(None, str(busy))
            retry_after_s = busy.retry_after_s
        else:
            messages.success(request, f"Report #{report.pk} queued: it is built in the background.")
            return redirect("audits:report-list")
    reports = list(queries.reports_of(request.user)[:100])
    context = {
        "form": form,
        "reports": reports,
        "has_teams": teams.exists(),
        "pending": any(r.status in _PENDING for r in reports),
        "public_key": services.signing_key().public_key,
    }
    status = 429 if retry_after_s is not None else 400 if form.errors else 200
    response = render(request, "audits/reports.html", context, status=status)
    if retry_after_s is not None:
        response["Retry-After"] = str(retry_after_s)
    return response


@login_required
@require_GET
def report_detail(request: HttpRequest, report_id: int) -> HttpResponse:
    report = get_object_or_404(queries.reports_of(request.user), pk=report_id)
    files = report.files.order_by("name").only("name", "sha256", "content_type")
    context = {
        "report": report,
        "files": files,
        "pending": report.status in _PENDING,
        "provisional": services.is_provisional(report),
        "public_key": services.signing_key().public_key,
    }
    return render(request, "audits/report.html", context)


@login_required
@require_GET
def report_file(request: HttpRequest, report_id: int, file_name: str) -> HttpResponse:
    report = get_object_or_404(queries.reports_of(request.user), pk=report_id)
    return file_response(request, report, file_name)


def file_response(request: HttpRequest, report: Report, file_name: str) -> HttpResponse:
    """One stored file of ``report`` as a download (404 when it has none of that name); the
    download is recorded in the team's audit log."""
    if not _FILE_NAME.fullmatch(file_name):  # no file has another name (nor a NUL byte)
        raise Http404("No such file.")
    stored = get_object_or_404(report.files, name=file_name)
    record(request, "report.downloaded", services.report_subject(report), {"file": stored.name})
    response = HttpResponse(bytes(stored.content), content_type=stored.content_type)
    response["Content-Disposition"] = (
        f'attachment; filename="report-{report.pk}-{report.year}q{report.quarter}-{stored.name}"'
    )
    return response


def _log_filters(request: HttpRequest) -> tuple[LogFilterForm, dict[str, Any] | None]:
    """The filter form of the query string, and its cleaned values (None when invalid)."""
    form = LogFilterForm(request.GET or None)
    if not request.GET:
        return form, {}
    return form, (form.cleaned_data if form.is_valid() else None)


@login_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    """The events the user may read, newest first, filtered and paged."""
    form, filters = _log_filters(request)
    events = queries.events_of(request.user).order_by("-at", "-id")
    page = Paginator(
        queries.filtered_events(events, filters) if filters is not None else events.none(),
        LOG_PAGE_ROWS,
    ).get_page(request.GET.get("page"))
    # The links to other pages and to the CSV carry the filters, nothing else of the query.
    query = QueryDict(mutable=True)
    for name in LogFilterForm.base_fields:
        if request.GET.get(name):
            query[name] = request.GET[name]
    context = {
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "has_teams": queries.audited_teams(request.user).exists(),
    }
    return render(request, "audits/log.html", context, status=200 if filters is not None else 400)


@login_required
@require_GET
def audit_log_csv(request: HttpRequest) -> HttpResponse:
    """Every event the user may read that the filters keep, oldest first; the export itself is
    recorded per team, with the filters."""
    form, filters = _log_filters(request)
    if filters is None:
        return HttpResponse(form.errors.as_text(), status=400, content_type="text/plain")
    rows = (
        [
            e.at.isoformat(),
            e.team_id or "",
            e.actor_id or "",
            e.actor_username,
            e.action,
            e.subject_type,
            e.subject_id,
            e.subject_label,
            e.detail_line,
            e.ip or "",
            e.user_agent,
        ]
        for e in queries.filtered_events(queries.events_of(request.user), filters).iterator()
    )
    content = csv_bytes(LOG_COLUMNS, rows)
    for team in queries.audited_teams(request.user):
        record(
            request,
            "audit_log.exported",
            Subject("team", team.pk, team.name, team.pk),
            {"filters": {k: v for k, v in request.GET.items() if k in LogFilterForm.base_fields}},
        )
    response = HttpResponse(content, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="audit-log.csv"'
    return response

"""The SLA pages: my teams' objectives, a new objective, and one objective with its charts and
maintenance windows.

Objectives of other teams do not exist here (404); members read, team admins create
objectives and add or delete maintenance windows (others are told why they cannot, 403).
The charts draw from ``/api/slas/{id}/attainment/`` (``static/js/sla.js``), so what the page
plots is what the API answers.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from latencyboard.audit_trail import act
from latencyboard.moments import iso_utc
from latencyboard.sla import queries, services, versions
from latencyboard.sla.forms import MaintenanceWindowForm, ObjectiveForm
from latencyboard.sla.models import Objective
from latencyboard.teams.models import Role
from latencyboard.teams.queries import has_role
from latencyboard.windows import HOUR, SECOND, floor_minute

# A 28-day or one-month window in hours: at most 744 points, each still readable.
CHART_STEP = dt.timedelta(hours=1)


def _roles(request: HttpRequest) -> dict[str, Any]:
    """What the pages say to someone who cannot create objectives, and why."""
    memberships = queries.memberships_with_admins(request.user)
    return {
        "memberships": memberships,
        "admin_teams": [m.team for m, _ in memberships if m.role == Role.ADMIN],
    }


@login_required
@require_GET
def objective_list(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    rows = [
        (objective, queries.window_budget(objective, now))
        for objective in queries.objectives_of(request.user)
    ]
    return render(
        request,
        "sla/list.html",
        {
            "rows": rows,
            "can_create": queries.pipelines_for_new_objectives(request.user).exists(),
            **_roles(request),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def objective_new(request: HttpRequest) -> HttpResponse:
    pipelines = queries.pipelines_for_new_objectives(request.user)
    if not pipelines.exists():
        roles = _roles(request)
        # An admin whose teams have no pipeline yet may create objectives, just not yet.
        return render(request, "sla/new.html", roles, status=200 if roles["admin_teams"] else 403)
    form = ObjectiveForm(request.POST or None, pipelines=pipelines)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            objective = services.create_objective(
                team=data["pipeline"].team,
                pipeline=data["pipeline"],
                stage=data["stage"],
                name=data["name"],
                threshold_ms=float(data["threshold_ms"]),
                target_percent=data["target_percent"],
                window=data["window"],
                created_by=request.user,
            )
        except ValidationError as error:
            form.add_error(None, error)
        else:
            act(
                request,
                "objective.created",
                versions.audit_subject(objective),
                versions.audit_detail(objective),
            )
            messages.success(request, f"Created “{objective.name}”, counted from retained spans.")
            return redirect("slas:detail", objective_id=objective.pk)
    return render(request, "sla/new.html", {"form": form}, status=400 if form.errors else 200)


def _detail(
    request: HttpRequest,
    objective: Objective,
    form: MaintenanceWindowForm,
    status: int = 200,
) -> HttpResponse:
    now = timezone.now()
    budget = queries.window_budget(objective, now)
    series_url = reverse("sla-attainment", kwargs={"objective_id": objective.pk})
    query = {
        "start": iso_utc(budget.window.start),
        "end": iso_utc(budget.window.end),
        "step": str(CHART_STEP // SECOND),
    }
    return render(
        request,
        "sla/detail.html",
        {
            "objective": objective,
            "budget": budget,
            "burns": queries.burn_rates(objective, now, budget.summary),
            "maintenance_windows": queries.maintenance_windows(objective),
            "is_admin": has_role(request.user, objective.team, Role.ADMIN),
            "form": form,
            "series_url": f"{series_url}?{urlencode(query)}",
            "chart_step_hours": CHART_STEP // HOUR,
        },
        status=status,
    )


@login_required
@require_GET
def objective_detail(request: HttpRequest, objective_id: int) -> HttpResponse:
    objective = get_object_or_404(queries.objectives_of(request.user), pk=objective_id)
    start = floor_minute(timezone.now())
    form = MaintenanceWindowForm(initial={"start": start, "end": start + dt.timedelta(hours=1)})
    return _detail(request, objective, form)


@login_required
@require_POST
def add_maintenance(request: HttpRequest, objective_id: int) -> HttpResponse:
    objective = get_object_or_404(queries.objectives_of(request.user), pk=objective_id)
    form = MaintenanceWindowForm(request.POST)
    if form.is_valid():
        try:
            window = services.add_maintenance_window(
                objective,
                covers=form.cleaned_data["covers"],
                start=form.cleaned_data["start"],
                end=form.cleaned_data["end"],
                reason=form.cleaned_data["reason"],
                created_by=request.user,
                now=timezone.now(),
            )
        except ValidationError as error:
            form.add_error(None, error)
        else:
            act(
                request,
                "maintenance.added",
                versions.audit_subject(objective),
                versions.maintenance_detail(window),
            )
            messages.success(request, "Maintenance window added: its minutes no longer count.")
            return redirect("slas:detail", objective_id=objective.pk)
    return _detail(request, objective, form, status=400)


@login_required
@require_POST
def delete_maintenance(request: HttpRequest, objective_id: int, window_id: int) -> HttpResponse:
    objective = get_object_or_404(queries.objectives_of(request.user), pk=objective_id)
    window = get_object_or_404(queries.maintenance_windows(objective), pk=window_id)
    if services.delete_maintenance_window(window, request.user, timezone.now()):
        act(
            request,
            "maintenance.deleted",
            versions.audit_subject(objective),
            versions.maintenance_detail(window),
        )
        messages.success(request, "Maintenance window deleted: its minutes count again.")
    return redirect("slas:detail", objective_id=objective.pk)

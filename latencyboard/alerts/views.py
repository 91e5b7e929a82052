"""The on-call pages: open and recent incidents with their alerts, one alert with its
evidence, history and deliveries, and the rules and channels (team admins edit them).

Alerts of other teams do not exist here (404). Members read; on-call and admins acknowledge,
resolve and silence (403 for others, and the buttons are not shown to them).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from latencyboard.alerts import queries, services
from latencyboard.alerts.charts import alert_chart
from latencyboard.alerts.forms import ChannelForm, NoteForm, RuleForm, SilenceForm
from latencyboard.alerts.links import alert_links
from latencyboard.alerts.models import Alert, Delivery
from latencyboard.alerts.rule_reach import rule_reach
from latencyboard.detectors.evidence import change_words, level_words
from latencyboard.fairness.heavy_reads import heavy_read
from latencyboard.notifications import registry
from latencyboard.teams.issued import keep_once, take_once
from latencyboard.teams.queries import has_role

DELIVERY_LOG_ROWS = 50
RECENT_ROWS = 50


@login_required
@require_GET
def oncall(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    return render(
        request,
        "alerts/oncall.html",
        {
            "open_incidents": queries.open_incidents(request.user),
            "recent_incidents": queries.recent_incidents(request.user, now)[:RECENT_ROWS],
        },
    )


def _now_figures(alert: Alert) -> dict[str, Any]:
    """The latest evaluation's figures at the quantile the alert fired on (none before the
    first evaluation after firing, or for a burn-rate alert)."""
    found = alert.evidence.get("regression") or {}
    figures = alert.current.get("quantiles", {}).get(found.get("quantile"))
    if not figures:
        return {}
    return {
        "at": alert.current_at,
        "n": alert.current.get("n"),
        "mix": alert.current.get("mix"),
        "change": change_words(figures),
        **figures,
    }


def _change_figures(alert: Alert) -> dict[str, Any]:
    """The change at firing in words, with its interval and the level of the alert's intervals
    (none for a burn-rate alert; no interval nor level in evidence stored before they were
    kept)."""
    found = alert.evidence.get("regression")
    if not found:
        return {}
    interval = found.get("change_interval")
    return {
        "percent": change_words(found),
        "ms": change_words(found, " ms"),
        "interval": interval,
        "level": level_words(interval["confidence"]) if interval else None,
    }


def _expected_percent(alert: Alert) -> str:
    """p99 → 1: the share of values above the baseline quantile when nothing changed."""
    found = alert.evidence.get("regression") or {}
    return f"{100.0 - float(found.get('quantile', 'p99')[1:]):g}"


@login_required
@require_GET
def alert_detail(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(queries.alerts_of(request.user), pk=alert_id)
    return render(
        request,
        "alerts/detail.html",
        {
            "alert": alert,
            "events": alert.events.select_related("who"),
            "deliveries": Delivery.objects.filter(event__alert=alert).select_related(
                "channel", "event"
            ),
            "can_respond": has_role(request.user, alert.pipeline.team, *services.RESPONDERS),
            "admin_team_ids": set(queries.admin_teams(request.user).values_list("pk", flat=True)),
            "links": alert_links(alert),
            "chart": alert_chart(alert, request.user, timezone.now()),
            "expected_percent": _expected_percent(alert),
            "now": _now_figures(alert),
            "change": _change_figures(alert),
            "silence_form": SilenceForm(),
            "note_form": NoteForm(),
        },
    )


@login_required
@require_POST
def acknowledge(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(queries.alerts_of(request.user), pk=alert_id)
    form = NoteForm(request.POST)
    if not form.is_valid():
        return HttpResponse("A note is at most 400 characters.", status=400)
    note = form.cleaned_data["note"]
    if services.acknowledge(alert, request.user, timezone.now(), request, note):
        messages.success(request, "Acknowledged, with every alert of its incident.")
    else:
        messages.info(request, f"Nothing to acknowledge: the alert is {alert.status}.")
    return redirect("alerts:detail", alert_id=alert.pk)


@login_required
@require_POST
def resolve(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(queries.alerts_of(request.user), pk=alert_id)
    form = NoteForm(request.POST)
    if not form.is_valid():
        return HttpResponse("A note is at most 400 characters.", status=400)
    if services.resolve(alert, request.user, timezone.now(), form.cleaned_data["note"], request):
        messages.success(request, "Resolved.")
    else:
        messages.info(request, "Already resolved.")
    return redirect("alerts:detail", alert_id=alert.pk)


@login_required
@require_POST
def silence(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(queries.alerts_of(request.user), pk=alert_id)
    form = SilenceForm(request.POST)
    if not form.is_valid():
        return HttpResponse("Choose a duration and give a reason.", status=400)
    now = timezone.now()
    until = now + dt.timedelta(minutes=form.cleaned_data["minutes"])
    services.silence(alert, request.user, until, form.cleaned_data["reason"], now, request)
    messages.success(request, f"Silenced {alert.stage_name} until {until:%H:%M} UTC.")
    return redirect("alerts:detail", alert_id=alert.pk)


@never_cache
@login_required
@require_GET
def settings_page(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "alerts/settings.html",
        {
            "rules": queries.rules_of(request.user),
            "channels": queries.channels_of(request.user),
            "deliveries": queries.deliveries_of(request.user)[:DELIVERY_LOG_ROWS],
            "admin_team_ids": set(queries.admin_teams(request.user).values_list("pk", flat=True)),
            "is_admin": queries.admin_teams(request.user).exists(),
            "issued": take_once(request, "channel_secret"),
        },
    )


def _edit(
    request: HttpRequest,
    form_class: type[RuleForm] | type[ChannelForm],
    instance: Any,
    what: str,
    shown: dict[str, Any] | None = None,
) -> HttpResponse:
    teams = queries.admin_teams(request.user)
    if not teams.exists():
        raise PermissionDenied("Only team admins change alert rules and channels.")
    # Read before validating: a model form writes the posted values into its instance.
    before = None if instance is None else services.setting_values(instance, form_class.base_fields)
    form = form_class(request.POST or None, instance=instance, user=request.user)
    if request.method == "POST" and form.is_valid():
        saved = form.save()
        verb = "created" if instance is None else "changed"
        services.record_setting(request, saved, verb, form.cleaned_data, before)
        if isinstance(form, ChannelForm) and form.generated_secret:
            issued = {
                "name": saved.name,
                "target": saved.target,
                "secret": form.generated_secret,
                "use": registry.kind_named(saved.kind).issued_note,
            }
            keep_once(request, "channel_secret", issued)
        messages.success(request, f"Saved {what} “{saved}”.")
        return redirect("alerts:settings")
    status = 400 if form.errors else 200
    page = {"form": form, "what": what, **(shown or {})}
    return render(request, "alerts/edit.html", page, status=status)


@login_required
@require_http_methods(["GET", "POST"])
@heavy_read  # its page shows the rule's reach
def rule_edit(request: HttpRequest, rule_id: int | None = None) -> HttpResponse:
    rule = None
    if rule_id is not None:
        rule = get_object_or_404(queries.rules_of(request.user), pk=rule_id)
        if not has_role(request.user, rule.pipeline.team, *services.ADMINS):
            raise PermissionDenied("Only team admins change alert rules.")
    shown = {"reach": rule_reach(rule, timezone.now())} if rule and request.method == "GET" else {}
    return _edit(request, RuleForm, rule, "rule", shown)


@login_required
@require_http_methods(["GET", "POST"])
def channel_edit(request: HttpRequest, channel_id: int | None = None) -> HttpResponse:
    channel = None
    if channel_id is not None:
        channel = get_object_or_404(queries.channels_of(request.user), pk=channel_id)
        if not has_role(request.user, channel.team, *services.ADMINS):
            raise PermissionDenied("Only team admins change channels.")
    return _edit(request, ChannelForm, channel, "channel")


@login_required
@require_POST
def channel_test(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = get_object_or_404(queries.channels_of(request.user), pk=channel_id)
    services.send_test(channel, request.user, timezone.now())
    messages.success(request, f"Test notification queued for “{channel.name}”: see the log.")
    return redirect(reverse("alerts:settings") + "#deliveries")

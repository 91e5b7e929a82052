from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from latencyboard.alerts.forms import clean_channel
from latencyboard.alerts.models import (
    Alert,
    AlertEvent,
    Baseline,
    Channel,
    Delivery,
    Rule,
    Silence,
)
from latencyboard.notifications import registry


class ChannelAdminForm(forms.ModelForm):
    kind = forms.ChoiceField(choices=registry.choices)
    # Never rendered back: left empty, the stored secret is kept.
    secret = forms.CharField(
        required=False, widget=forms.PasswordInput(render_value=False), strip=True
    )

    class Meta:
        model = Channel
        fields = ["team", "name", "kind", "target", "secret", "enabled"]

    def clean(self) -> dict[str, Any]:
        return clean_channel(self, self.instance)


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelAdminForm
    list_display = ["name", "team", "kind_shown", "target_hint", "secret_hint", "enabled"]
    list_filter = ["kind", "enabled", "team"]

    @admin.display(description="kind", ordering="kind")
    def kind_shown(self, channel: Channel) -> str:
        return channel.kind_label


@admin.register(Rule)
class RuleAdmin(admin.ModelAdmin):
    list_display = ["name", "pipeline", "regression", "burn_rate", "severity", "enabled"]
    list_filter = ["severity", "enabled"]
    filter_horizontal = ["stages", "channels"]


@admin.register(Baseline)
class BaselineAdmin(admin.ModelAdmin):
    """Read-only: the baseline job writes them."""

    list_display = ["pipeline", "stage", "n", "ready", "window_start", "window_end", "computed_at"]
    exclude = ["sketch"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class _AppendOnly(admin.ModelAdmin):
    """Decisions are rows: the history is read here, never written."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Alert)
class AlertAdmin(_AppendOnly):
    list_display = ["summary", "pipeline", "stage", "status", "started_at", "resolved_at"]
    list_filter = ["status"]


@admin.register(AlertEvent)
class AlertEventAdmin(_AppendOnly):
    list_display = ["alert", "from_status", "to_status", "who", "at"]


@admin.register(Delivery)
class DeliveryAdmin(_AppendOnly):
    list_display = ["event", "channel", "status", "attempts", "last_status_code", "detail"]
    list_filter = ["status"]


@admin.register(Silence)
class SilenceAdmin(admin.ModelAdmin):
    list_display = ["reason", "rule", "pipeline", "stage", "until", "who"]

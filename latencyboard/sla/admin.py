from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from latencyboard.sla.models import Objective


@admin.register(Objective)
class ObjectiveAdmin(admin.ModelAdmin):
    """Read-only: creating an objective must back-fill its counters and deleting one must wait
    for rollup folds in flight, both of which only ``latencyboard.sla.services`` does."""

    list_display = ["name", "team", "pipeline", "stage", "threshold_ms", "target_percent", "window"]
    list_filter = ["window", "team"]
    list_select_related = ["team", "pipeline", "stage"]
    search_fields = ["name", "team__name", "pipeline__service_name"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Objective | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Objective | None = None) -> bool:
        return False

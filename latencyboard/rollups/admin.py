from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from latencyboard.rollups.models import Rollup


@admin.register(Rollup)
class RollupAdmin(admin.ModelAdmin):
    """Read-only: rows are derived from raw spans by the rollup worker; an edit here would
    break the counts it checks, so repairs go through ``manage.py rebuild_rollups``."""

    list_display = ["bucket_start", "resolution", "pipeline", "stage", "count", "error_count"]
    list_filter = ["resolution", "team"]
    list_select_related = ["pipeline", "stage"]
    search_fields = ["pipeline__service_name", "stage__name"]
    date_hierarchy = "bucket_start"
    exclude = ["sketch"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Rollup | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Rollup | None = None) -> bool:
        return False

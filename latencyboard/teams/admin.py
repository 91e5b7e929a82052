from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest

from latencyboard.teams import services
from latencyboard.teams.models import IngestToken, Membership, Team
from latencyboard.web.admin import IssueOnceAdmin


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(IngestToken)
class IngestTokenAdmin(IssueOnceAdmin):
    list_display = ["name", "team", "prefix", "created_at", "created_by", "revoked_at"]
    list_filter = ["team", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "team__name"]
    readonly_fields = ["prefix", "created_at", "created_by", "revoked_at"]
    actions = ["revoke"]

    def get_fields(  # type: ignore[override]
        self, request: HttpRequest, obj: IngestToken | None = None
    ) -> list[str]:
        if obj is None:
            return ["team", "name", "rate_limit"]
        return ["team", "name", "rate_limit", "prefix", "created_at", "created_by", "revoked_at"]

    def get_readonly_fields(
        self, request: HttpRequest, obj: IngestToken | None = None
    ) -> list[str]:
        if obj is None:
            return []
        return ["team", *self.readonly_fields]

    def issue(self, request: HttpRequest, obj: IngestToken) -> str:
        issued = services.issue_ingest_token(
            obj.team,
            obj.name,
            created_by=request.user if isinstance(request.user, User) else None,
            rate_limit=obj.rate_limit,
        )
        obj.pk = issued.token.pk
        obj.prefix, obj.digest = issued.token.prefix, issued.token.digest
        return issued.plaintext

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[IngestToken]) -> None:
        count = services.revoke_ingest_tokens(queryset)
        messages.success(request, f"Revoked {count} token(s).")

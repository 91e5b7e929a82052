from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest

from latencyboard.audit_trail import Subject, act
from latencyboard.teams import services
from latencyboard.teams.issued_admin import IssueOnceAdmin
from latencyboard.teams.models import IngestToken, Membership, Team


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

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        """Save memberships, and record each one added, changed (with the role before) or
        removed."""
        # The forms keep the roles as they were; their instances hold the posted ones.
        before = {f.instance.pk: f.initial.get("role") for f in formset.forms if f.instance.pk}
        super().save_formset(request, form, formset, change)
        if formset.model is not Membership:
            return
        for membership in formset.new_objects:
            _record_membership(request, "membership.added", membership)
        for membership, _fields in formset.changed_objects:
            old = {"before": {"role": before.get(membership.pk)}}
            _record_membership(request, "membership.role_changed", membership, old)
        for membership in formset.deleted_objects:
            _record_membership(request, "membership.removed", membership)


def _record_membership(
    request: HttpRequest, action: str, membership: Membership, extra: dict[str, Any] | None = None
) -> None:
    act(
        request,
        action,
        Subject(
            "membership", membership.user_id, membership.user.get_username(), membership.team_id
        ),
        {"role": membership.role, **(extra or {})},
    )


def _token_subject(token: IngestToken) -> Subject:
    return Subject("ingest_token", token.pk, token.name, token.team_id)


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
        act(request, "ingest_token.created", _token_subject(issued.token), {"prefix": obj.prefix})
        return issued.plaintext

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[IngestToken]) -> None:
        active = list(queryset.filter(revoked_at__isnull=True))
        count = services.revoke_ingest_tokens(queryset)
        for token in active:
            act(request, "ingest_token.revoked", _token_subject(token), {"prefix": token.prefix})
        messages.success(request, f"Revoked {count} token(s).")

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from latencyboard.apitokens import services
from latencyboard.apitokens.models import ApiToken
from latencyboard.audit_trail import act
from latencyboard.teams.issued_admin import IssueOnceAdmin

_FIXED = ["user", "scope", "prefix", "created_at", "last_used_at", "revoked_at"]


@admin.register(ApiToken)
class ApiTokenAdmin(IssueOnceAdmin):
    list_display = ["name", "user", "scope", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "user__username"]
    autocomplete_fields = ["user"]
    actions = ["revoke"]

    def get_fields(  # type: ignore[override]
        self, request: HttpRequest, obj: ApiToken | None = None
    ) -> list[str]:
        return ["user", "name", "scope"] if obj is None else ["name", *_FIXED]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        # A token's holder and scope are what its plaintext was handed out for: fixed.
        return (
            []
            if obj is None
            else ["user", "scope", "prefix", "created_at", "last_used_at", "revoked_at"]
        )

    def issue(self, request: HttpRequest, obj: ApiToken) -> str:
        issued = services.issue_api_token(obj.user, obj.name, obj.scope)
        obj.pk = issued.token.pk
        obj.prefix, obj.digest = issued.token.prefix, issued.token.digest
        return issued.plaintext

    @admin.action(description="Revoke selected API tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        active = list(queryset.filter(revoked_at__isnull=True))
        count = services.revoke_api_tokens(queryset, timezone.now())
        for token in active:
            subject = services.audit_subject(token)
            act(request, "api_token.revoked", subject, {"prefix": token.prefix})
        messages.success(request, f"Revoked {count} API token(s).")

"""Every change made in the Django admin is written to the audit log, as the product's own
pages write theirs: who, what, from where, and each changed field before → after.

The admin is served by :class:`AuditedAdminSite` (the default site, see ``AuditedAdminConfig``),
which gives every registered ``ModelAdmin`` (ours, and Django's users and groups) the
:class:`AuditedAdmin` mixin: it hooks the admin's own change log (``log_addition``,
``log_change``, ``log_deletions``), which the admin calls for every add, edit, delete and bulk
delete, inside the request's transaction.
"""

from __future__ import annotations

import hashlib
from typing import Any
from weakref import WeakKeyDictionary

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from latencyboard.audit_trail import Subject, act

# Fields whose values never go into the log: a fingerprint shows that one changed.
SECRET_FIELDS = frozenset({"password", "secret", "digest"})


def _shown(name: str, value: object) -> str:
    if name in SECRET_FIELDS:
        return f"(secret {hashlib.sha256(str(value).encode()).hexdigest()[:8]})"
    return str(value)


def _values(obj: Model) -> dict[str, str]:
    """The object's stored fields as the log shows them."""
    return {
        field.name: _shown(field.name, field.value_from_object(obj))
        for field in obj._meta.concrete_fields
    }


def _team_id(obj: Model) -> int | None:
    if obj._meta.label == "teams.Team":
        return int(obj.pk)
    for path in ("team_id", "pipeline.team_id", "rule.pipeline.team_id"):
        value: Any = obj
        for name in path.split("."):
            value = getattr(value, name, None)
        if value is not None:
            return int(value)
    return None


def _subject(obj: Model) -> Subject:
    return Subject(obj._meta.label_lower, obj.pk, str(obj), _team_id(obj))


class AuditedAdmin(admin.ModelAdmin):
    """Records the admin's adds, edits (field by field) and deletes in the audit log."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The object as loaded, before the form changed it, until its change is logged.
        self._before: WeakKeyDictionary[HttpRequest, dict[str, str]] = WeakKeyDictionary()

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is not None and request.method == "POST":
            self._before[request] = _values(obj)
        return obj

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        entry = super().log_addition(request, obj, message)
        act(request, "admin.added", _subject(obj), {"fields": _values(obj)})
        return entry

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        entry = super().log_change(request, obj, message)
        before, after = self._before.pop(request, {}), _values(obj)
        changes = {
            name: {"before": before.get(name), "after": value}
            for name, value in after.items()
            if before.get(name) != value
        }
        # The message also names what inlines (a team's memberships…) added, changed, deleted.
        detail = {"changes": changes, "message": entry.get_change_message()}
        act(request, "admin.changed", _subject(obj), detail)
        return entry

    def log_deletions(self, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        for obj in queryset:
            act(request, "admin.deleted", _subject(obj), {"fields": _values(obj)})
        return super().log_deletions(request, queryset)


class AuditedAdminSite(admin.AdminSite):
    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        base = admin_class or admin.ModelAdmin
        if not issubclass(base, AuditedAdmin):
            base = type(f"Audited{base.__name__}", (AuditedAdmin, base), {})
        super().register(model_or_iterable, base, **options)

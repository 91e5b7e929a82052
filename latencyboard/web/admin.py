"""Admin pages that issue a secret and show it once, in the response that created it."""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse


class IssueOnceAdmin(admin.ModelAdmin):
    """Creates rows through :meth:`issue` and renders the plaintext it returns on the page
    answering the add form, never in a message: Django's default message storage is a
    cookie, signed but not encrypted, so the secret would be readable without the key."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Between save_model and response_add of one request; weak so nothing outlives it.
        self._plaintexts: WeakKeyDictionary[HttpRequest, str] = WeakKeyDictionary()

    def issue(self, request: HttpRequest, obj: Any) -> str:
        """Create the row from the add form's ``obj`` (setting its pk); return the plaintext."""
        raise NotImplementedError

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        self._plaintexts[request] = self.issue(request, obj)

    def response_add(
        self, request: HttpRequest, obj: Any, post_url_continue: str | None = None
    ) -> HttpResponse:
        opts = self.opts
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "title": f"New {opts.verbose_name}",
            "object": obj,
            "plaintext": self._plaintexts.pop(request),
            "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
        }
        response = TemplateResponse(request, "admin/issued_once.html", context)
        # Not kept by the browser's back/forward cache or any proxy.
        response["Cache-Control"] = "no-store"
        return response

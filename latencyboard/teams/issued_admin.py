"""Admin pages that issue a secret and show it once, on the page the add form redirects to."""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from latencyboard.teams.issued import keep_once, take_once


class IssueOnceAdmin(admin.ModelAdmin):
    """Creates rows through :meth:`issue` and shows the plaintext it returns once, by
    Post/Redirect/Get (``teams.issued``): reloading the page shows no secret and creates no
    second row, and the secret is never in a cookie."""

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

    def _names(self) -> tuple[str, str]:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        return f"{prefix}_issued", f"admin:{prefix}_changelist"

    def get_urls(self) -> list[URLPattern]:
        issued = path(
            "issued/", self.admin_site.admin_view(self.issued_view), name=self._names()[0]
        )
        return [issued, *super().get_urls()]

    def response_add(
        self, request: HttpRequest, obj: Any, post_url_continue: str | None = None
    ) -> HttpResponse:
        plaintext = self._plaintexts.pop(request)
        keep_once(request, self._names()[0], {"object": str(obj), "plaintext": plaintext})
        return HttpResponseRedirect(reverse(f"admin:{self._names()[0]}"))

    def issued_view(self, request: HttpRequest) -> HttpResponse:
        """The secret just issued, once; afterwards (a reload) the list of rows."""
        name, changelist = self._names()
        issued = take_once(request, name)
        if issued is None:
            return HttpResponseRedirect(reverse(changelist))
        opts = self.opts
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "title": f"New {opts.verbose_name}",
            "object": issued["object"],
            "plaintext": issued["plaintext"],
            "changelist_url": reverse(changelist),
        }
        response = TemplateResponse(request, "admin/issued_once.html", context)
        # Not kept by the browser's back/forward cache or any proxy.
        response["Cache-Control"] = "no-store"
        return response

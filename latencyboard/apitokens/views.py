"""The "API tokens" page: a user lists, creates and revokes their own tokens."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from latencyboard.apitokens import queries, services
from latencyboard.apitokens.forms import ApiTokenForm
from latencyboard.apitokens.models import ApiToken
from latencyboard.audit_trail import act
from latencyboard.teams.issued import keep_once, take_once


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """GET lists the user's tokens (with the plaintext of the one just created, once); POST
    creates one and redirects to the GET, so that a reload never creates a second."""
    assert isinstance(request.user, User)  # login_required
    form = ApiTokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        issued = services.issue_api_token(
            request.user, form.cleaned_data["name"], form.cleaned_data["scope"]
        )
        act(
            request,
            "api_token.created",
            services.audit_subject(issued.token),
            {"scope": issued.token.scope, "prefix": issued.token.prefix},
        )
        keep_once(request, "api_token", {"name": issued.token.name, "plaintext": issued.plaintext})
        return redirect("api-tokens")
    context = {
        "form": form,
        "issued": take_once(request, "api_token"),
        "tokens": queries.tokens_of(request.user),
    }
    return render(request, "apitokens/tokens.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke one of the user's own tokens; anyone else's is a 404."""
    token = get_object_or_404(queries.tokens_of(request.user), pk=token_id, revoked_at=None)
    if services.revoke_api_tokens(ApiToken.objects.filter(pk=token.pk), timezone.now()):
        act(
            request,
            "api_token.revoked",
            services.audit_subject(token),
            {"prefix": token.prefix},
        )
    messages.success(request, f"Revoked “{token.name}”: it no longer opens the API.")
    return redirect("api-tokens")

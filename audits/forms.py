from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import AnonymousUser, User

from audits.queries import AUDIT_ROLES
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Team
from latencyboard.teams.queries import teams_of


class ReportForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    year = forms.IntegerField(min_value=2000, max_value=2999)
    quarter = forms.TypedChoiceField(
        choices=[(q, f"Q{q}") for q in range(1, 5)], coerce=int, empty_value=None
    )
    pipelines = forms.ModelMultipleChoiceField(
        queryset=Pipeline.objects.none(),
        required=False,
        help_text="None chosen: every pipeline of the team.",
    )

    def __init__(self, *args: Any, user: User | AnonymousUser, **kwargs: Any) -> None:
        # The teams and pipelines of the teams where ``user`` audits or administers.
        super().__init__(*args, **kwargs)
        team_field = self.fields["team"]
        assert isinstance(team_field, forms.ModelChoiceField)
        team_field.queryset = teams_of(user, *AUDIT_ROLES)
        pipelines = self.fields["pipelines"]
        assert isinstance(pipelines, forms.ModelMultipleChoiceField)
        pipelines.queryset = Pipeline.objects.visible_to(user, *AUDIT_ROLES).order_by(
            "service_name"
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        team, chosen = data.get("team"), data.get("pipelines")
        if team is not None and chosen and any(p.team_id != team.pk for p in chosen):
            self.add_error("pipelines", "Choose pipelines of the chosen team.")
        return data


class LogFilterForm(forms.Form):
    """The audit log's filters, as the page, its CSV and the API take them (all optional)."""

    actor = forms.CharField(required=False, max_length=150, help_text="User name, exactly.")
    action = forms.CharField(
        required=False, max_length=64, help_text="An action, or its prefix ending in a dot."
    )
    object = forms.CharField(
        required=False,
        max_length=130,
        help_text="A subject type (objective), or type and id (objective:12).",
    )
    since = forms.DateTimeField(required=False, help_text="From this moment on (UTC if no offset).")
    until = forms.DateTimeField(required=False, help_text="Before this moment.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since is not None and until is not None and since >= until:
            self.add_error("until", "Must be after since.")
        return data

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import AnonymousUser, User

from latencyboard.alerts.channels import check_channel
from latencyboard.alerts.models import RULE_SETTINGS, Channel, Rule
from latencyboard.notifications import registry
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla.forms import stage_label
from latencyboard.teams.models import Role
from latencyboard.teams.queries import teams_of

SILENCE_CHOICES = [(30, "30 minutes"), (60, "1 hour"), (240, "4 hours"), (1440, "1 day")]


class SilenceForm(forms.Form):
    minutes = forms.TypedChoiceField(choices=SILENCE_CHOICES, coerce=int, initial=60)
    reason = forms.CharField(max_length=400)


class NoteForm(forms.Form):
    """What acknowledging or resolving by hand says (optional)."""

    note = forms.CharField(max_length=400, required=False)


class ChannelForm(forms.ModelForm):
    """The secret is never rendered back; left empty on an edit, the stored one stays (a new
    channel of a kind that makes its secret gets one, ``generated_secret``, shown once). So
    is a target that is itself a credential (a Slack webhook URL)."""

    generated_secret = ""

    # The kinds registered when the form is shown, not when this module was imported.
    kind = forms.ChoiceField(choices=registry.choices)
    secret = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False),
    )

    class Meta:
        model = Channel
        fields = ["team", "name", "kind", "target", "secret", "enabled"]

    def __init__(self, *args: Any, user: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams_of(user, Role.ADMIN)  # type: ignore[attr-defined]
        secrets = [f"{kind.label}: {kind.asks_for}" for kind in registry.kinds() if kind.asks_for]
        self.fields["secret"].help_text = "; ".join(secrets) + ". Left empty: unchanged."
        if self.instance.pk and registry.find(self.instance.kind) is None:
            self.fields["kind"].help_text = (
                f"Now {self.instance.kind_label}, which this server cannot send: choose a kind,"
                " with its target and secret."
            )
        if self.instance.pk and self.instance.target_is_secret:
            self.initial["target"] = ""
            self.fields["target"].required = False
            self.fields[
                "target"
            ].help_text = f"Now {self.instance.target_hint}. Left empty: unchanged."

    def clean(self) -> dict[str, Any]:
        data = self.cleaned_data
        if not data.get("target") and self.instance.pk and self.instance.target_is_secret:
            data["target"] = self.instance.target
        return clean_channel(self, self.instance)


def clean_channel(form: forms.ModelForm, instance: Channel) -> dict[str, Any]:
    """Checks a channel form's target and secret the way the transport reads them."""
    data: dict[str, Any] = form.cleaned_data
    if "kind" in data and "target" in data:
        stored = instance if instance.pk else None
        checked = check_channel(data["kind"], data["target"], data.get("secret", ""), stored)
        data["secret"] = checked.secret
        if checked.generated and isinstance(form, ChannelForm):
            form.generated_secret = checked.secret
        for name, error in checked.errors.items():
            form.add_error(name, error)
    return data


class StageCheckboxes(forms.CheckboxSelectMultiple):
    """Each stage's box names its pipeline, for the page to offer the chosen pipeline's only."""

    def create_option(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option: dict[str, Any] = super().create_option(*args, **kwargs)
        choice = option["value"]
        if hasattr(choice, "instance"):
            option["attrs"]["data-pipeline"] = str(choice.instance.pipeline_id)
        return option


class RuleForm(forms.ModelForm):
    class Meta:
        model = Rule
        fields = list(RULE_SETTINGS)
        widgets = {
            "stages": StageCheckboxes,
            "channels": forms.CheckboxSelectMultiple,
        }

    def __init__(self, *args: Any, user: User | AnonymousUser, **kwargs: Any) -> None:
        # Pipelines, stages and channels of the teams ``user`` administers.
        super().__init__(*args, **kwargs)
        self.fields["pipeline"].queryset = Pipeline.objects.visible_to(user, Role.ADMIN)  # type: ignore[attr-defined]
        self.fields["stages"].queryset = Stage.objects.visible_to(user, Role.ADMIN)  # type: ignore[attr-defined]
        self.fields["stages"].label_from_instance = stage_label  # type: ignore[attr-defined]
        self.fields["channels"].queryset = Channel.objects.visible_to(user, Role.ADMIN)  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        pipeline = data.get("pipeline")
        if pipeline is not None:
            if any(stage.pipeline_id != pipeline.pk for stage in data.get("stages", [])):
                self.add_error("stages", "Choose stages of the rule's pipeline.")
            if any(channel.team_id != pipeline.team_id for channel in data.get("channels", [])):
                self.add_error("channels", "Choose channels of the pipeline's team.")
        if not (data.get("regression") or data.get("burn_rate")):
            self.add_error("regression", "Enable at least one detector.")
        return data

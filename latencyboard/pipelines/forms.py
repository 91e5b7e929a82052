"""The form of a derived stage rule, on the pipeline's stage rules page."""

from __future__ import annotations

from django import forms

from latencyboard.pipelines.models import DerivedStageRule


class DerivedStageRuleForm(forms.ModelForm):
    """A stage read from a duration attribute, or from one event to another."""

    class Meta:
        model = DerivedStageRule
        fields = ["stage", "attribute", "unit", "start_event", "end_event"]
        labels = {"attribute": "Duration attribute"}

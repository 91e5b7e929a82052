"""Forms of the SLA pages: a new objective, a new maintenance window.

They check input only; permissions and the rules that matter to the data stay in
:mod:`latencyboard.sla.services`, whose ``ValidationError`` the views add back to the form.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from latencyboard import bounds
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla.models import MAINTENANCE_REASON_MAX_LENGTH, Coverage, Window
from latencyboard.sla.templatetags.sla_format import plain

# What <input type="datetime-local"> sends and shows: minutes, no zone (the label says UTC).
_LOCAL_INPUT_FORMAT = "%Y-%m-%dT%H:%M"


class _StageSelect(forms.Select):
    """Marks each stage with its pipeline, so the page can offer only the chosen pipeline's."""

    def create_option(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(*args, **kwargs)
        value = option["value"]
        if isinstance(value, forms.models.ModelChoiceIteratorValue):
            stage = value.instance  # type: ignore[attr-defined]  # set at runtime, not in stubs
            option["attrs"]["data-pipeline"] = stage.pipeline_id
        return option


class _PipelineChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Pipeline) -> str:
        return f"{obj} · {obj.team}"


def stage_label(stage: Stage) -> str:
    """A stage as forms offer it: an LLM measure (time to first token…) says it is one."""
    return f"{stage.name} (LLM measure)" if stage.kind == "measure" else stage.name


class _StageChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Stage) -> str:
        return stage_label(obj)


class ObjectiveForm(forms.Form):
    """A new objective for one of ``pipelines`` (those of the teams the user administers)."""

    pipeline = _PipelineChoiceField(queryset=Pipeline.objects.none())
    stage = _StageChoiceField(
        queryset=Stage.objects.none(),
        required=False,
        empty_label="End to end (root spans)",
        widget=_StageSelect,
        label="Measure",
        help_text="A stage's spans, or the whole request (the pipeline's root spans).",
    )
    # The API's limits: whole nanoseconds at most, so the database's and the rollup worker's
    # comparisons with the threshold agree.
    threshold_ms = forms.DecimalField(
        label="Threshold (ms)",
        max_digits=15,
        decimal_places=6,
        min_value=Decimal("0.000001"),
        help_text="A request is good when it takes at most this long.",
        widget=forms.NumberInput(attrs={"step": "any", "placeholder": "250"}),
    )
    target_percent = forms.DecimalField(
        label="Target (%)",
        max_digits=6,
        decimal_places=3,
        min_value=Decimal("0.001"),
        max_value=Decimal(100),
        help_text="Share of requests that must be good, e.g. 99.9.",
        widget=forms.NumberInput(attrs={"step": "any", "placeholder": "99.9"}),
    )
    window = forms.ChoiceField(
        choices=[
            (Window.ROLLING_28D, "Rolling 28 days"),
            (Window.CALENDAR_MONTH, "Calendar month (UTC)"),
        ],
        initial=Window.ROLLING_28D,
        widget=forms.RadioSelect,
    )
    name = forms.CharField(
        max_length=200,
        required=False,
        help_text="Leave empty for one made of the fields above.",
    )

    def __init__(self, *args: Any, pipelines: QuerySet[Pipeline], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["pipeline"].queryset = pipelines.select_related("team")  # type: ignore[attr-defined]
        self.fields["stage"].queryset = (  # type: ignore[attr-defined]
            Stage.objects.filter(pipeline__in=pipelines).order_by("pipeline_id", "name")
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        pipeline, stage = cleaned.get("pipeline"), cleaned.get("stage")
        if pipeline is not None and stage is not None and stage.pipeline_id != pipeline.pk:
            self.add_error("stage", "Not a stage of this pipeline.")
        if not cleaned.get("name") and not self.errors:
            cleaned["name"] = (
                f"{stage.name if stage else 'end to end'} ≤ "
                f"{plain(cleaned['threshold_ms'])} ms for {plain(cleaned['target_percent'])}%"
            )
        return cleaned


class _UtcDateTimeField(forms.DateTimeField):
    """Read and shown in UTC whatever the active time zone: the pages speak UTC throughout."""

    widget = forms.DateTimeInput(attrs={"type": "datetime-local"}, format=_LOCAL_INPUT_FORMAT)
    default_validators = [bounds.validate_moment]

    def to_python(self, value: Any) -> dt.datetime | None:
        with timezone.override(dt.UTC):
            return super().to_python(value)

    def prepare_value(self, value: Any) -> Any:
        with timezone.override(dt.UTC):
            return super().prepare_value(value)


class MaintenanceWindowForm(forms.Form):
    start = _UtcDateTimeField(label="Start (UTC)")
    end = _UtcDateTimeField(
        label="End (UTC)",
        help_text="Minutes starting from the start up to, not including, the end.",
    )
    reason = forms.CharField(
        max_length=MAINTENANCE_REASON_MAX_LENGTH,
        widget=forms.TextInput(attrs={"placeholder": "e.g. GPU node pool upgrade, CHG-1234"}),
    )
    covers = forms.ChoiceField(
        label="Applies to",
        choices=Coverage.choices,
        initial=Coverage.OBJECTIVE,
        widget=forms.RadioSelect,
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        start, end = cleaned.get("start"), cleaned.get("end")
        if start is not None and end is not None and end <= start:
            self.add_error("end", "Must be after the start.")
        return cleaned

"""A pipeline's stage rules page: how its spans are put in stages, and where they come from.

Members read it; team admins turn the presets on or off and add or delete derived stage rules
(others are told why they cannot, 403); every change is audited. Pipelines of other teams do
not exist here (404).
"""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from latencyboard.audit_trail import Subject, act
from latencyboard.pipelines import derivation, services
from latencyboard.pipelines.forms import DerivedStageRuleForm
from latencyboard.pipelines.models import DerivedStageRule, Pipeline
from latencyboard.teams.models import Role
from latencyboard.teams.queries import has_role

_RULE_ID = re.compile(r"[0-9]{1,18}")
"""A rule's id as a form posts it: ASCII digits (``str.isdigit`` takes "²"), within bigint."""


def _subject(pipeline: Pipeline) -> Subject:
    return Subject("pipeline", pipeline.pk, str(pipeline), pipeline.team_id)


def _page(
    request: HttpRequest,
    pipeline: Pipeline,
    form: DerivedStageRuleForm,
    status: int = 200,
    refused: str = "",
) -> HttpResponse:
    own = list(DerivedStageRule.objects.filter(pipeline=pipeline))
    mine = {rule.stage for rule in own}
    presets = [
        (name, [(rule, rule.stage in mine) for rule in rules])
        for name, rules in derivation.PRESETS.items()
    ]
    return render(
        request,
        "pipelines/stage_rules.html",
        {
            "pipeline": pipeline,
            "own": own,
            "presets": presets,
            "mapping_rules": pipeline.stage_rules.all(),
            "is_admin": has_role(request.user, pipeline.team, Role.ADMIN),
            "form": form,
            "measures": sorted(derivation.MEASURES),
            "refused": refused,
        },
        status=status,
    )


@login_required
@require_http_methods(["GET", "POST"])
def stage_rules(request: HttpRequest, pipeline_id: int) -> HttpResponse:
    pipeline = get_object_or_404(Pipeline.objects.visible_to(request.user), pk=pipeline_id)
    if request.method == "GET":
        return _page(request, pipeline, DerivedStageRuleForm())
    if not has_role(request.user, pipeline.team, Role.ADMIN):
        refused = "Only an admin of the team can change its stage rules."
        return _page(request, pipeline, DerivedStageRuleForm(), status=403, refused=refused)
    action = request.POST.get("action")
    if action == "presets":
        on = request.POST.get("presets") == "on"
        if services.set_presets(pipeline, on):
            act(request, "pipeline.presets_set", _subject(pipeline), {"presets": on})
        messages.success(request, f"Presets {'on' if on else 'off'} for spans stored from now on.")
        return redirect("pipeline-stage-rules", pipeline_id=pipeline.pk)
    if action == "delete":
        rule_id = request.POST.get("rule", "")
        rule = (
            services.delete_derived_rule(pipeline, int(rule_id))
            if _RULE_ID.fullmatch(rule_id)
            else None
        )
        if rule is not None:
            detail = {"rule": int(rule_id), "stage": rule.stage, "source": rule.as_rule().source}
            act(request, "pipeline.stage_rule_deleted", _subject(pipeline), detail)
            messages.success(request, f"Deleted the rule of stage “{rule.stage}”.")
        return redirect("pipeline-stage-rules", pipeline_id=pipeline.pk)
    form = DerivedStageRuleForm(request.POST, instance=DerivedStageRule(pipeline=pipeline))
    if action != "add" or not form.is_valid():
        return _page(request, pipeline, form, status=400)
    rule = services.add_derived_rule(pipeline, form.save(commit=False))
    detail = {"rule": rule.pk, "stage": rule.stage, "source": rule.as_rule().source}
    act(request, "pipeline.stage_rule_added", _subject(pipeline), detail)
    messages.success(request, f"Stage “{rule.stage}” is read from {rule.as_rule().source}.")
    return redirect("pipeline-stage-rules", pipeline_id=pipeline.pk)

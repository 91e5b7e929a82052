from django.contrib import admin

from latencyboard.pipelines.models import (
    MAX_EXTRA_COHORT_ATTRIBUTES,
    CohortAttribute,
    Pipeline,
    Stage,
    StageRule,
)


class StageRuleInline(admin.TabularInline):
    model = StageRule
    extra = 1


class CohortAttributeInline(admin.TabularInline):
    """Span attributes whose values get their own sketches (model.version and
    service.version always do): what compare and the attribute breakdown can answer."""

    model = CohortAttribute
    extra = 1
    max_num = MAX_EXTRA_COHORT_ATTRIBUTES
    verbose_name = "cohort attribute"


@admin.register(Pipeline)
class PipelineAdmin(admin.ModelAdmin):
    list_display = ["service_name", "environment", "team", "stage_cap", "created_at"]
    list_filter = ["team"]
    search_fields = ["service_name"]
    inlines = [StageRuleInline, CohortAttributeInline]


@admin.register(Stage)
class StageAdmin(admin.ModelAdmin):
    list_display = ["name", "pipeline", "created_at"]
    list_filter = ["pipeline__team"]
    search_fields = ["name", "pipeline__service_name"]

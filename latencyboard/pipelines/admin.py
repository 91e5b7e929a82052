from django.contrib import admin

from latencyboard.pipelines.models import Pipeline, Stage, StageRule


class StageRuleInline(admin.TabularInline):
    model = StageRule
    extra = 1


@admin.register(Pipeline)
class PipelineAdmin(admin.ModelAdmin):
    list_display = ["service_name", "environment", "team", "stage_cap", "created_at"]
    list_filter = ["team"]
    search_fields = ["service_name"]
    inlines = [StageRuleInline]


@admin.register(Stage)
class StageAdmin(admin.ModelAdmin):
    list_display = ["name", "pipeline", "created_at"]
    list_filter = ["pipeline__team"]
    search_fields = ["name", "pipeline__service_name"]

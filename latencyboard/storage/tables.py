"""The PostgreSQL tables raw SQL reads and writes (pure: no Django)."""

from __future__ import annotations

from typing import Final

SPAN: Final = "spans_span"
SPAN_EVENTS: Final = "spans_spanevents"  # one row per span with events, partitioned like SPAN
SPAN_VIEW: Final = "spans_spanview"  # each span whole, name and attributes merged (read-only)
RESOURCE: Final = "spans_resource"
SPAN_TEMPLATE: Final = "spans_spantemplate"
INGEST_BATCH: Final = "spans_ingestbatch"
PIPELINE: Final = "pipelines_pipeline"
STAGE: Final = "pipelines_stage"
STAGE_RULE: Final = "pipelines_stagerule"
DERIVED_STAGE_RULE: Final = "pipelines_derivedstagerule"
ROLLUP: Final = "rollups_rollup"
COHORT_ROLLUP: Final = "rollups_cohortrollup"
# Every cohort row, those a rollup minute row stands for included (read-only, see Rollup.cohorts)
COHORT_ROWS: Final = "rollups_cohortrows"
COHORT_ATTRIBUTE: Final = "pipelines_cohortattribute"
STAGE_SHARE: Final = "rollups_stageshare"
STAGE_SHARE_WATERMARK: Final = "rollups_stagesharewatermark"
OBJECTIVE: Final = "sla_objective"
SLA_MINUTE: Final = "sla_slaminute"
THINNED_DAY: Final = "retention_thinnedday"
INGEST_TOKEN: Final = "teams_ingesttoken"  # noqa: S105 (a table name)
TEAM: Final = "teams_team"
MEMBERSHIP: Final = "teams_membership"

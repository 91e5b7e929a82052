from django.db import migrations, models

# Every cohort row: those of the cohort table, and those a rollup minute row stands for
# (``Rollup.cohorts``: each attribute every span of the row carries with one value).
VIEW = """
CREATE VIEW rollups_cohortrows AS
SELECT team_id, pipeline_id, attribute, value, stage_id, resolution, bucket_start,
       count, error_count, sum_ms, min_ms, max_ms, sketch
FROM rollups_cohortrollup
UNION ALL
SELECT r.team_id, r.pipeline_id, e.key, e.value, r.stage_id, r.resolution, r.bucket_start,
       r.count, r.error_count, r.sum_ms, r.min_ms, r.max_ms, r.sketch
FROM rollups_rollup r
CROSS JOIN LATERAL jsonb_each_text(r.cohorts) AS e(key, value)
WHERE r.cohorts IS NOT NULL
"""


class Migration(migrations.Migration):
    dependencies = [("rollups", "0003_cohorts")]

    operations = [
        migrations.AddField(
            model_name="rollup",
            name="cohorts",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunSQL(VIEW, reverse_sql="DROP VIEW rollups_cohortrows"),
    ]

"""The dashboards keep no rows of their own: deployment markers come from the cohort
rollups (``latencyboard.rollups.cohort_sightings.version_buckets``)."""

"""The dashboards keep no rows of their own: deployment markers come from the cohort
rollups (``latencyboard.rollups.sketch_windows.version_buckets``)."""

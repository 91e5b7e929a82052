"""Alert rules and what they raise: the rules and channels (models, forms, API, pages), their
evaluation every minute against stored rollups and baselines, incidents, and the outbox that
delivers notifications.

The statistics they run are pure and live in :mod:`latencyboard.detectors`: this package reads
the rows the detectors take, calls them, and stores what they conclude.
"""

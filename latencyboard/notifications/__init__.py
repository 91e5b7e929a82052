"""Telling on-call: what an alert notification says (:mod:`.notice`), the kinds of channel
that carry it (one module each in :mod:`.kinds`, registered by :mod:`.registry`: webhook,
Slack, PagerDuty, Alertmanager, email) and one delivery attempt with its retry verdict."""

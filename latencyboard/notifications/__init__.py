"""Telling on-call: what an alert notification says (:mod:`.notice`), how each kind of
receiver wants it (Slack, PagerDuty, Alertmanager, a signed generic webhook, email) and one
delivery attempt with its retry verdict."""

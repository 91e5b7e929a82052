"""Baselines, rules, alerts with their append-only history, silences and the delivery outbox.

The detectors beside this module are pure; these rows are what they read (baselines, rules)
and what their conclusions become (alerts, events, deliveries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from latencyboard.notifications import registry
from latencyboard.notifications.targets import mask
from latencyboard.pipelines.mapping import END_TO_END
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Role, Team
from latencyboard.teams.queries import teams_of

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


class Baseline(models.Model):
    """A stage's latencies over a trailing window, or over the same hours of the previous
    days (``seasonal``), (``stage`` null: end to end), merged from rollups by the baseline
    job; ``ready`` once it holds enough values to test against."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="baselines")
    stage = models.ForeignKey(
        Stage, null=True, blank=True, on_delete=models.CASCADE, related_name="baselines"
    )
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    n = models.BigIntegerField()
    sketch = models.BinaryField()
    computed_at = models.DateTimeField()
    ready = models.BooleanField(default=False)
    seasonal = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline", "stage"], name="baseline_identity_unique", nulls_distinct=False
            )
        ]

    def __str__(self) -> str:
        return f"{self.pipeline} {self.stage or END_TO_END} baseline (n={self.n})"


class ChannelQuerySet(models.QuerySet["Channel"]):
    def visible_to(self, user: User | AnonymousUser, *roles: Role) -> ChannelQuerySet:
        """The channels of ``user``'s teams, by the rule of ``Pipeline.objects.visible_to``."""
        return self.filter(team__in=teams_of(user, *roles))


class Channel(models.Model):
    """Where a team's notifications go. ``kind`` names a kind of
    :mod:`latencyboard.notifications.registry`, which says what ``target`` and ``secret``
    mean; it is checked where a channel is written (form, API, admin), so a new kind needs
    no migration, and a stored kind no module declares any more is shown and fails as
    unknown. ``secret`` (a signing key, PagerDuty routing key…) stays on the server: pages
    and the API show at most its last characters."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="alert_channels")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=registry.NAME_LIMIT)
    target = models.CharField(max_length=500, help_text="URL, or an email address for email.")
    secret = models.CharField(max_length=500, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ChannelQuerySet.as_manager()

    class Meta:
        ordering = ["team", "name", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind_label})"

    @property
    def kind_label(self) -> str:
        return registry.label(self.kind)

    @property
    def secret_hint(self) -> str:
        """The secret as pages may show it, masked as its kind says."""
        kind = registry.find(self.kind)
        return kind.secret_hint(self.secret) if kind else mask(self.secret)

    @property
    def target_is_secret(self) -> bool:
        return registry.target_is_secret(self.kind, self.target)

    @property
    def target_hint(self) -> str:
        """The target as pages may show it to the team's admins: a credential (a Slack
        webhook URL, whatever kind of channel holds it) masked."""
        return mask(self.target) if self.target_is_secret else self.target

    @property
    def target_masked(self) -> str:
        """The target as pages may show it to other members, masked as its kind says."""
        kind = registry.find(self.kind)
        return kind.members_target(self.target) if kind else mask(self.target)


class Severity(models.TextChoices):
    PAGE = "page", "Page"
    TICKET = "ticket", "Ticket"


RULE_SETTINGS: Final = (
    "pipeline",
    "name",
    "regression",
    "burn_rate",
    "stages",
    "end_to_end",
    "min_effect_percent",
    "min_effect_ms",
    "significance",
    "window_minutes",
    "severity",
    "channels",
    "enabled",
)
"""The fields of a :class:`Rule` its team's admins set, in the form and in the API."""


class Rule(models.Model):
    """What to watch on a pipeline, how strictly, and whom to tell.

    ``stages`` empty means every stage and end to end. Thresholds are the regression
    detector's (see ``latencyboard.alerts.regression``); burn-rate alerts use the pipeline's
    SLA objectives with the SRE Workbook's windows.
    """

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="alert_rules")
    name = models.CharField(max_length=200)
    regression = models.BooleanField(default=True, help_text="Tail regression vs the baseline.")
    burn_rate = models.BooleanField(default=False, help_text="SLO burn rate of the objectives.")
    stages = models.ManyToManyField(Stage, blank=True, related_name="alert_rules")
    end_to_end = models.BooleanField(
        default=True, help_text="With chosen stages: also watch end-to-end latency."
    )
    min_effect_percent = models.FloatField(default=20.0, validators=[MinValueValidator(0)])
    min_effect_ms = models.FloatField(default=5.0, validators=[MinValueValidator(0)])
    significance = models.FloatField(
        default=1e-5,
        validators=[MinValueValidator(1e-12), MaxValueValidator(0.05)],
        help_text="False-alarm probability per evaluation (Holm over stages and quantiles).",
    )
    window_minutes = models.PositiveIntegerField(
        default=10, validators=[MinValueValidator(1), MaxValueValidator(120)]
    )
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.PAGE)
    channels = models.ManyToManyField(Channel, blank=True, related_name="rules")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pipeline", "name", "id"]

    def __str__(self) -> str:
        return self.name


class AlertStatus(models.TextChoices):
    FIRING = "firing", "Firing"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    RESOLVED = "resolved", "Resolved"


OPEN_STATUSES = (AlertStatus.FIRING, AlertStatus.ACKNOWLEDGED)


class Incident(models.Model):
    """Alerts of one pipeline that overlap in time: what pages. It opens with its first
    alert, takes in every alert of the pipeline that fires while it is open, and resolves
    when its last open alert does. Receivers hear it under one ``dedup_key``; its ``title``
    names the stage that grew most."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="incidents")
    status = models.CharField(max_length=16, choices=AlertStatus.choices)
    title = models.CharField(max_length=500)
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline"],
                condition=models.Q(status__in=["firing", "acknowledged"]),
                name="incident_one_open_per_pipeline",
            )
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.status})"

    @property
    def dedup_key(self) -> str:
        """PagerDuty's incident key and Alertmanager's group, for every event of it."""
        return f"latencyboard-incident{self.pk}"


class Alert(models.Model):
    """One regression (or burn) of a (rule, pipeline, stage): from firing to resolved, as a
    member of its pipeline's :class:`Incident`.

    ``dedup_key`` is the same for every alert of the triple; at most one per key is open.
    ``evidence`` holds the figures of the evaluation that fired it, ``current`` those of
    the latest evaluation while it is open (``current_at``).
    """

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="alerts")
    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="alerts")
    stage = models.ForeignKey(
        Stage, null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="alerts")
    dedup_key = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=AlertStatus.choices)
    clean_streak = models.PositiveIntegerField(default=0)
    evidence = models.JSONField(default=dict)
    current = models.JSONField(default=dict, blank=True)
    current_at = models.DateTimeField(null=True, blank=True)
    summary = models.CharField(max_length=500)
    started_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["dedup_key"],
                condition=models.Q(status__in=["firing", "acknowledged"]),
                name="alert_one_open_per_dedup_key",
            )
        ]
        indexes = [models.Index(fields=["status", "started_at"], name="alert_status_started")]

    def __str__(self) -> str:
        return f"{self.summary} ({self.status})"

    @property
    def severity(self) -> str:
        """The rule's severity, or a firing burn-rate condition's when that detector fired
        (page for the 14.4x and 6x pairs, ticket for 3x and 1x): the most urgent of those
        that fired."""
        fired = []
        if self.evidence.get("regression") or not self.evidence.get("burn_rate"):
            fired.append(self.rule.severity)
        burn = self.evidence.get("burn_rate")
        if burn and burn.get("severity"):
            fired.append(burn["severity"])
        return Severity.PAGE if Severity.PAGE in fired else Severity.TICKET

    @property
    def stage_name(self) -> str:
        return self.stage.name if self.stage else END_TO_END


class AlertEvent(models.Model):
    """One transition of an alert, appended and never changed: who (null: the evaluator),
    when, from which status to which, and what was seen or said."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16)
    who = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField()
    note = models.CharField(max_length=500, blank=True)
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.alert_id}: {self.from_status or 'new'} → {self.to_status} at {self.at}"


class Silence(models.Model):
    """No notifications until ``until`` for a rule's alerts, or for a pipeline's (one stage,
    or every stage when ``stage`` is null). Alerts still open and close: only telling stops."""

    rule = models.ForeignKey(
        Rule, null=True, blank=True, on_delete=models.CASCADE, related_name="silences"
    )
    pipeline = models.ForeignKey(
        Pipeline, null=True, blank=True, on_delete=models.CASCADE, related_name="silences"
    )
    stage = models.ForeignKey(
        Stage, null=True, blank=True, on_delete=models.CASCADE, related_name="silences"
    )
    until = models.DateTimeField()
    reason = models.CharField(max_length=500)
    who = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(rule__isnull=False, pipeline__isnull=True)
                | models.Q(rule__isnull=True, pipeline__isnull=False),
                name="silence_covers_rule_or_pipeline",
            )
        ]

    def __str__(self) -> str:
        return f"{self.reason} (until {self.until:%Y-%m-%d %H:%M} UTC)"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    DELIVERED = "delivered", "Delivered"
    RETRYING = "retrying", "Retrying"
    FAILED = "failed", "Failed"


class Delivery(models.Model):
    """The outbox: one alert event to one channel, and what came of sending it. Without an
    event it is a channel's "send test", pressed by ``requested_by``.

    A worker claims a due delivery (``sending``, ``attempts`` counted) until
    ``next_attempt_at``: past it the worker is gone (see ``latencyboard.alerts.outbox``) and
    the delivery is due again."""

    event = models.ForeignKey(
        AlertEvent, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    queued_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    detail = models.CharField(max_length=500, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        what = self.event if self.event else "test"
        return f"{what} → {self.channel}: {self.status}"

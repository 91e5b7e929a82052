from __future__ import annotations

import json
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

from latencyboard.teams.models import Role, Team
from latencyboard.teams.queries import members_of, teams_of

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

LOG_COLUMNS = (
    "at",
    "team_id",
    "actor_id",
    "actor",
    "action",
    "subject_type",
    "subject_id",
    "subject",
    "detail",
    "ip",
    "user_agent",
)
"""An audit event's fields as the CSV export and the API name them."""


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def visible_to(self, user: User | AnonymousUser, *roles: Role) -> AuditEventQuerySet:
        """The events of the teams :func:`~latencyboard.teams.queries.teams_of` ``user`` (with
        ``roles``), and those of no team (refused changes, personal API tokens) by members of
        those teams."""
        members = members_of(user, *roles).values("user_id")
        return self.filter(
            models.Q(team__in=teams_of(user, *roles))
            | models.Q(team__isnull=True, actor_id__in=members)
        )


class AuditEvent(models.Model):
    """One thing someone did, recorded once and never changed (a database trigger refuses
    UPDATE, DELETE and TRUNCATE, see ``latencyboard.storage.audit_log``), and chained to the
    event before it by ``hash`` (``audits.chain``), so a change made past the trigger shows.

    Who and what are copied, not only referenced: the log must still say who did it after the
    user, the objective or the token is gone. ``team`` is a plain reference without a foreign
    key constraint for the same reason (a cascade would have to delete rows here).
    """

    at = models.DateTimeField(db_index=True)
    team = models.ForeignKey(
        Team,
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
        help_text="Whose subject it is; empty for a refusal outside any one team.",
    )
    actor_id = models.BigIntegerField(null=True, help_text="Empty for the system.")
    actor_username = models.CharField(max_length=150)
    action = models.CharField(max_length=64)
    subject_type = models.CharField(max_length=64)
    subject_id = models.CharField(max_length=64)
    subject_label = models.CharField(max_length=300)
    detail = models.JSONField(default=dict)
    ip = models.GenericIPAddressField(null=True)
    user_agent = models.CharField(max_length=500)
    seq = models.BigIntegerField(unique=True, help_text="Its place in the hash chain: 1, 2, 3…")
    hash = models.CharField(
        max_length=64,
        help_text="SHA-256 of the previous event's hash and this event (audits.chain).",
    )

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["team", "at"], name="audit_event_team_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_username} {self.action}"

    @property
    def detail_line(self) -> str:
        """``detail`` as one line of JSON, keys sorted, as the CSV export writes it."""
        return json.dumps(self.detail, sort_keys=True, ensure_ascii=False)


class ReportStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ReportQuerySet(models.QuerySet["Report"]):
    def visible_to(self, user: User | AnonymousUser, *roles: Role) -> ReportQuerySet:
        """The reports of ``user``'s teams, by the rule of ``Pipeline.objects.visible_to``."""
        return self.filter(team__in=teams_of(user, *roles))


class Report(models.Model):
    """A quarterly audit report of one team: queued, built by the ``reports`` worker, then
    frozen. The build reads every figure in one database snapshot (``as_of``) and keeps them
    (``figures``), so ``verify_report`` renders the same bytes at any later time."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="reports")
    year = models.PositiveSmallIntegerField()
    quarter = models.PositiveSmallIntegerField()
    pipeline_ids = models.JSONField(help_text="Sorted ids of the pipelines covered.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField()
    status = models.CharField(max_length=8, choices=ReportStatus.choices)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done.")
    software_version = models.CharField(max_length=40, blank=True)
    finished_at = models.DateTimeField(null=True)
    error = models.TextField(blank=True)
    as_of = models.DateTimeField(
        null=True, help_text="The database snapshot every figure was read in; set by the build."
    )
    figures = models.BinaryField(
        null=True, help_text="The figures as read at as_of (JSON), rendered again to verify."
    )

    objects = ReportQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(quarter__gte=1, quarter__lte=4), name="report_quarter_1_to_4"
            )
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.year} Q{self.quarter} (#{self.pk})"


class ReportFile(models.Model):
    """One stored file of a finished report, with the SHA-256 its manifest lists."""

    report = models.ForeignKey(Report, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=100)
    content_type = models.CharField(max_length=100)
    content = models.BinaryField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["report", "name"], name="report_file_name_unique")
        ]

    def __str__(self) -> str:
        return f"{self.report_id}/{self.name}"


class SigningKey(models.Model):
    """The server's Ed25519 key that signs every report (made on first use). Its public key
    is shown on the reports page and in each manifest; the private key never leaves here."""

    name = models.CharField(max_length=32, unique=True)
    private_key = models.BinaryField()
    public_key = models.CharField(max_length=64)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} ({self.public_key})"

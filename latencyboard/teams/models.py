from __future__ import annotations

from django.conf import settings
from django.db import models

from latencyboard.teams import tokens


class Team(models.Model):
    """A tenant: pipelines, SLAs, alerts and reports all belong to exactly one team."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    ONCALL = "oncall", "On-call"
    AUDITOR = "auditor", "Auditor"
    ADMIN = "admin", "Admin"


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_team_user_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} as {self.role}"


class IngestToken(models.Model):
    """A credential an OTel exporter presents; spans sent with it land in its team.

    Only the SHA-256 of the token is stored: the plaintext is shown once, at creation.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="ingest_tokens")
    name = models.CharField(max_length=100, help_text="What sends with it, e.g. 'prod collector'")
    prefix = models.CharField(max_length=tokens.DISPLAY_LENGTH, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    rate_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Spans per second accepted with this token (per ingest process); "
        "empty for no limit. Beyond it ingest answers 429 with Retry-After.",
    )

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

from __future__ import annotations

from django.conf import settings
from django.db import models

PREFIX = "lbk_"
DISPLAY_LENGTH = len(PREFIX) + 6


class Scope(models.TextChoices):
    READ = "read", "Read only"
    READ_WRITE = "read_write", "Read and write"


class ApiToken(models.Model):
    """A personal credential for scripts and data sources: it acts as its user, with at most
    that user's access, narrowed to safe methods when read-only.

    Only the SHA-256 of the token is stored: the plaintext is shown once, at creation.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What uses it, e.g. 'Grafana'")
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.READ)
    prefix = models.CharField(max_length=DISPLAY_LENGTH, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

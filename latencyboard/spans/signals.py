from __future__ import annotations

from typing import Any

from django.utils import timezone

from latencyboard.spans import services


def create_partitions_after_migrate(**kwargs: Any) -> None:
    """A fresh database can take spans as soon as ``migrate`` returns."""
    services.ensure_partitions(timezone.now())

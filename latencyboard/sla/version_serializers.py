"""The body of ``PATCH /api/slas/{id}/``: what an edit may change (each optional)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rest_framework import serializers


class ObjectiveEditSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=200, required=False)
    # The same precision as creation (see ObjectiveCreateSerializer).
    threshold_ms = serializers.DecimalField(
        max_digits=15, decimal_places=6, min_value=Decimal("0.000001"), required=False
    )
    target_percent = serializers.DecimalField(
        max_digits=6,
        decimal_places=3,
        min_value=Decimal("0.001"),
        max_value=Decimal(100),
        required=False,
    )

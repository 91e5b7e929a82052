"""PostgreSQL's binary ``timestamptz``: microseconds since 2000-01-01 UTC (pure: no Django)."""

from __future__ import annotations

from typing import Final

PG_EPOCH_S: Final = 946_684_800  # 2000-01-01T00:00:00Z in Unix seconds
PG_EPOCH_US: Final = PG_EPOCH_S * 10**6

"""The API's one timestamp format (pure: no Django).

ISO 8601 in UTC with a ``Z``: seconds always, a six-digit fraction only when the moment has
microseconds (``2026-11-24T10:41:00Z``, ``2026-11-24T10:41:00.250000Z``). It is what DRF's
``DateTimeField`` writes with ``TIME_ZONE = "UTC"``, so fields rendered by serializers and
those rendered by hand agree, and JavaScript's ``Date.parse`` reads both.
"""

from __future__ import annotations

import datetime as dt


def iso_utc(moment: dt.datetime) -> str:
    """``moment`` (aware) in the API's format."""
    return moment.astimezone(dt.UTC).isoformat().removesuffix("+00:00") + "Z"

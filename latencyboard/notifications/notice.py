"""What one alert transition tells a receiver, and what one delivery attempt came to.

Pure (no Django): the alerts app builds a :class:`Notice` from a stored transition, the
outbox hands it to a channel's formatter and transport, and records the :class:`Attempt`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum


class Action(StrEnum):
    """The transition: PagerDuty's event actions, which every receiver kind can express."""

    TRIGGER = "trigger"
    ACKNOWLEDGE = "acknowledge"
    RESOLVE = "resolve"
    TEST = "test"  # a "send test" from the channel page: no alert behind it


class Severity(StrEnum):
    PAGE = "page"
    TICKET = "ticket"


@dataclass(frozen=True, slots=True)
class Notice:
    """One alert transition, in words and figures a person on call can act on.

    ``dedup_key`` is the incident's, so a receiver groups the trigger, acknowledge and
    resolve of one incident (every stage of it). ``url`` opens the alert on the on-call
    page; ``figures`` are its evidence as label → text (e.g. "baseline p99" → "12.1 ms"),
    ``numbers`` the same as numbers to route on (``baseline_ms``, ``current_ms``,
    ``effect_pct`` with its interval's ``effect_pct_low`` and ``effect_pct_high``,
    ``p_value``, ``n``, ``k``), ``links`` name → absolute URL (the pipeline around the
    alert, exemplar traces of its window).
    """

    dedup_key: str
    action: Action
    severity: Severity
    team: str
    pipeline: str
    stage: str  # "end-to-end" for end to end, "" for a "send test"
    title: str
    summary: str
    url: str
    at: dt.datetime
    figures: tuple[tuple[str, str], ...] = field(default=())
    actor: str = ""  # who acknowledged or resolved, when a person did
    # When the alert first fired (Alertmanager's startsAt); None means ``at``, e.g. on trigger.
    started_at: dt.datetime | None = None
    numbers: tuple[tuple[str, float | int | None], ...] = field(default=())
    links: tuple[tuple[str, str], ...] = field(default=())


class Verdict(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"  # timeout, connection error, 429 or 5xx: try again later
    FAILED = "failed"  # any other 4xx, or a bad target: trying again cannot help


@dataclass(frozen=True, slots=True)
class Attempt:
    verdict: Verdict
    status_code: int | None  # None when no HTTP answer came (or for email)
    detail: str  # what a person reading the delivery log needs, e.g. "503 Service Unavailable"
    retry_after_s: float | None = None  # the receiver's Retry-After, when it sent one

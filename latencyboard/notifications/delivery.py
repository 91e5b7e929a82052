"""One delivery attempt of a notice to a channel, judged for the outbox.

:func:`deliver` never raises for a receiver's fault: every outcome is an :class:`Attempt`
whose verdict says whether trying again can help. The outbox owns the retry schedule.
"""

from __future__ import annotations

import datetime as dt
import logging

from latencyboard.notifications.notice import Attempt, Notice, Verdict
from latencyboard.notifications.registry import UnknownChannelKindError, kind_named

logger = logging.getLogger(__name__)


def deliver(
    channel_kind: str,
    target: str,
    secret: str,
    notice: Notice,
    timeout_s: float = 10.0,
    *,
    now: dt.datetime | None = None,
) -> Attempt:
    """Send ``notice`` once to a channel and say what came of it.

    2xx → delivered; 429, 5xx, timeouts and connection errors → retry (with the receiver's
    Retry-After); other 4xx, redirects, a bad target or secret → failed, and so does a kind
    no module declares (no other kind's format stands in for it). ``now`` is the attempt's
    time (the webhook timestamp, the origin of a Retry-After date).
    """
    try:
        kind = kind_named(channel_kind)
    except UnknownChannelKindError as exc:
        logger.warning("notifications.unknown_kind", extra={"kind": channel_kind})
        return Attempt(Verdict.FAILED, None, str(exc))
    problem = kind.target_problem(target)
    if problem is None:
        attempt = kind.send(target, secret, notice, timeout_s, now or dt.datetime.now(dt.UTC))
    else:
        attempt = Attempt(Verdict.FAILED, None, f"bad target: {problem}")
    logger.info(
        "notifications.attempt",
        extra={
            "kind": kind.name,
            "dedup_key": notice.dedup_key,
            "action": str(notice.action),
            "verdict": str(attempt.verdict),
            "status_code": attempt.status_code,
        },
    )
    return attempt

"""A week of demo history on a local stack's first start, folded before the dashboard opens.

A new stack would otherwise show minutes of data: 24 h and 7 d charts with a few dots at the
right edge, no deployment marker, no version comparison, one SLA point. So on a team with
no ingest batch yet, :func:`load_demo_history` backfills :data:`DAYS` days of the demo's
traffic (:mod:`.backfill`) and then does, at once, the catch-up work Celery beat would
spread over minutes: the rollup fold (rollups and SLA counters), compaction into hours and
days (cohort rollups, behind deployment markers, included), and the stage shares.

The history is sparser than live traffic (:data:`REQUESTS_PER_S` per pipeline instead of
3 to 15), so that it is written and folded in well under a minute and takes a few hundred MB,
while every hour of every pipeline still has hundreds of requests for its percentiles. It
follows the live demo's diurnal curve and model rollouts (:mod:`latencyboard.demo.profiles`),
so each pipeline rolls a slower model version out at least once in any week.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final

from django.db import connection
from django.db.models import Max, Sum
from django.utils import timezone

from latencyboard.demo.backfill import BACKFILL, CHUNK, BackfillProgress, backfill_demo
from latencyboard.demo.llm_backfill import backfill_llm
from latencyboard.rollups import compaction, services, stage_share_services
from latencyboard.spans.models import IngestBatch, Span
from latencyboard.teams.models import Team
from latencyboard.windows import DAY

logger = logging.getLogger(__name__)

DAYS: Final = 7
REQUESTS_PER_S: Final = 0.1
"""Per pipeline, daily mean: about 360 requests an hour (110 to 610 along the day's curve),
some 1.3 M spans a week for the three pipelines."""

_STEP_SECONDS: Final = 5.0
_REPORT_SECONDS: Final = 5.0
# The beat's stage-share steps are 15 minutes, sized for live traffic; a sparse backlog goes
# faster in larger ones.
_SHARE_MINUTES_PER_STEP: Final = 240


@dataclass(frozen=True, slots=True)
class HistoryResult:
    days: int
    spans: int
    seconds: float


def load_demo_history(
    team: Team,
    *,
    now: dt.datetime,
    progress: Callable[[str], None],
    days: int = DAYS,
    requests_per_s: float = REQUESTS_PER_S,
) -> HistoryResult | None:
    """Backfill ``days`` of demo traffic up to ``now`` for ``team`` and bring every derived
    table up to date with it, reporting each step to ``progress``; None, and nothing done,
    when the team has stored spans before (a later start reuses what the first one wrote).

    A first start stopped while writing the history is finished by the next start: the
    hours after the last one written, up to where the first start meant to end it.
    """
    todo = _still_to_write(team, now, days)
    if todo is None:
        return None
    start, end = todo
    started = time.perf_counter()

    def say(line: str) -> None:
        progress(f"{line} ({time.perf_counter() - started:.0f} s)")

    def report_day(done: BackfillProgress) -> None:
        day = round((done.through - (end - dt.timedelta(days=days))) / DAY)
        say(f"spans {day}/{days} days, {done.spans:,} spans")

    written = backfill_demo(
        team,
        days=days,
        start=start,
        end=end,
        now=end,
        requests_per_s=requests_per_s,
        progress=report_day,
    )
    llm_spans = backfill_llm(
        team, start=start, end=end, requests_per_s=requests_per_s, protocol=BACKFILL
    )
    say(f"LLM pipeline: {llm_spans:,} spans")
    # The fold (rollups, cohorts behind deployment markers) and the stage shares each read
    # the raw spans on their own;
    # they run side by side, each in as many threads as it has concurrent workers in
    # production (row locks with SKIP LOCKED split the work), so the database and Python
    # overlap.
    catch_up = _CatchUp.of(team, say)
    work = [
        lambda: catch_up.until_done(_fold_step),
        lambda: catch_up.until_done(catch_up.share_step),
        lambda: catch_up.until_done(catch_up.share_step),
    ]
    with ThreadPoolExecutor(len(work), thread_name_prefix="history") as executor:
        for future in [executor.submit(_closing_connection, job) for job in work]:
            future.result()
    catch_up.say_if_new()
    compaction.compact_rollups(timezone.now())
    say("rollups compacted into hours and days")
    result = HistoryResult(days, written.spans + llm_spans, time.perf_counter() - started)
    logger.info(
        "history.loaded",
        extra={"team": team.pk, "days": days, "spans": result.spans, "seconds": result.seconds},
    )
    return result


def _still_to_write(
    team: Team, now: dt.datetime, days: int
) -> tuple[dt.datetime, dt.datetime] | None:
    """``(start, end)`` of the history to write: all of it for a team without batches; the
    hours after the last one stored when only history was stored and it stops an hour or
    more short of its end (its batches' ``received_at``); else None."""
    batches = IngestBatch.objects.filter(team=team)
    if not batches.exists():
        return now - dt.timedelta(days=days), now
    if batches.exclude(protocol=BACKFILL).exists():
        return None  # live traffic followed the history: that start got past it
    end = batches.aggregate(end=Max("received_at"))["end"]
    last = Span.objects.filter(team=team, is_root=True).aggregate(last=Max("start_time"))["last"]
    if end is None or last is None or end - last < CHUNK:
        return None
    # The history's hours count back from its end; the one holding ``last`` is stored whole.
    return end - (end - last) // CHUNK * CHUNK, end


def _fold_step() -> bool:
    return bool(services.fold_until_idle(timezone.now, _STEP_SECONDS).batches)


def _closing_connection(job: Callable[[], None]) -> None:
    try:
        job()
    finally:
        connection.close()  # this thread's own


@dataclass
class _CatchUp:
    """Progress of the catch-up work, shared by its threads and said in one line at most
    every :data:`_REPORT_SECONDS`.

    The fold's progress is read from the team's batches pending when the catch-up began (an
    earlier, stopped start's included): the spans stored in those rolled up since. Not from
    what the folds return, which also counts the rows ingest derives from spans (stages
    taken from attributes and events) and the batches of other teams.
    """

    say: Callable[[str], None]
    batches: list[int]
    spans: int  # stored in ``batches``: to fold
    shares: int = 0  # pipeline minutes
    lock: threading.Lock = field(default_factory=threading.Lock)
    said_at: float = field(default_factory=time.monotonic)
    said: str = ""

    @classmethod
    def of(cls, team: Team, say: Callable[[str], None]) -> _CatchUp:
        pending = IngestBatch.objects.filter(team=team, rolled_up_at=None)
        stored = dict(pending.values_list("pk", "stored_spans"))
        return cls(say, list(stored), sum(stored.values()))

    def until_done(self, step: Callable[[], bool]) -> None:
        """Call ``step`` (returning whether more is left) until nothing is."""
        while True:
            more = step()
            with self.lock:
                if time.monotonic() - self.said_at >= _REPORT_SECONDS:
                    self.said_at = time.monotonic()
                    self.say_if_new()
            if not more:
                return

    def share_step(self) -> bool:
        step = stage_share_services.compute_stage_shares(
            timezone.now(), seconds=_STEP_SECONDS, minutes_per_step=_SHARE_MINUTES_PER_STEP
        )
        with self.lock:
            self.shares += step.minutes
        return bool(step.behind)

    def say_if_new(self) -> None:
        line = self.line()
        if line != self.said:
            self.said = line
            self.say(line)

    def line(self) -> str:
        return (
            f"rollups {self.spans - self._unfolded():,}/{self.spans:,} spans, "
            f"stage shares {self.shares:,} pipeline minutes"
        )

    def _unfolded(self) -> int:
        pending = IngestBatch.objects.filter(pk__in=self.batches, rolled_up_at=None)
        return pending.aggregate(spans=Sum("stored_spans"))["spans"] or 0

"""Reads of SLA objectives and their attainment, scoped to the teams a user belongs to.

Every count of SLA minutes goes through :func:`counted`: the SLA pages, the burn-rate alert
and the audit report read the same minutes by the same rule. Attainment leaves out the minutes
of maintenance windows (see ``attainment.excluded_minutes``); the counters keep them, so
:class:`~latencyboard.sla.attainment.WindowBudget` reports both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import BigIntegerField, DateTimeField, F, Func, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from numpy.typing import NDArray

from latencyboard.pipelines.models import Pipeline
from latencyboard.sla import attainment as maths
from latencyboard.sla import burn
from latencyboard.sla.models import MaintenanceWindow, Objective, SlaMinute
from latencyboard.teams import queries as team_queries
from latencyboard.teams.models import Membership, Role
from latencyboard.windows import floor_minute


def objectives_of(user: User | AnonymousUser) -> QuerySet[Objective]:
    """The objectives of ``user``'s teams; none for anonymous users."""
    return (
        Objective.objects.visible_to(user)
        .select_related("team", "pipeline", "stage")
        .order_by("team__name", "name", "id")
    )


def pipelines_for_new_objectives(user: User | AnonymousUser) -> QuerySet[Pipeline]:
    """The pipelines ``user`` may create objectives for: those of the teams they administer."""
    return (
        Pipeline.objects.visible_to(user, Role.ADMIN)
        .select_related("team")
        .order_by("team__name", "service_name", "environment")
    )


def memberships_with_admins(user: User | AnonymousUser) -> list[tuple[Membership, list[str]]]:
    """``user``'s memberships, each with the usernames of its team's admins (to ask)."""
    memberships = list(team_queries.memberships_of(user))
    admins: dict[int, list[str]] = {}
    for team_id, username in (
        team_queries.members_of(user)
        .filter(role=Role.ADMIN)
        .order_by("user__username")
        .values_list("team_id", "user__username")
    ):
        admins.setdefault(team_id, []).append(username)
    return [(m, admins.get(m.team_id, [])) for m in memberships]


def maintenance_windows(objective: Objective) -> QuerySet[MaintenanceWindow]:
    """Every maintenance window covering ``objective`` (its own and its pipeline's), deleted
    ones included, by start; ``deleted_at`` tells them apart."""
    return (
        MaintenanceWindow.objects.filter(Q(objective=objective) | Q(pipeline=objective.pipeline_id))
        .select_related("created_by", "deleted_by")
        .order_by("start", "id")
    )


def _in_force(as_of: dt.datetime | None) -> Q:
    """The maintenance windows in force as of ``as_of``: declared by then and not deleted by
    then (None: now, every window not deleted)."""
    if as_of is None:
        return Q(deleted_at__isnull=True)
    return Q(created_at__lte=as_of) & (Q(deleted_at__isnull=True) | Q(deleted_at__gt=as_of))


def windows_in_force(
    objective: Objective, start: dt.datetime, end: dt.datetime, as_of: dt.datetime | None = None
) -> QuerySet[MaintenanceWindow]:
    """The maintenance windows covering ``objective`` that overlap ``[start, end)`` and were in
    force as of ``as_of`` (None: now), by start."""
    return maintenance_windows(objective).filter(_in_force(as_of), start__lt=end, end__gt=start)


def _excluded_of(
    objectives: Sequence[Objective],
    spans: Mapping[int, tuple[dt.datetime, dt.datetime]],
    as_of: dt.datetime | None,
) -> dict[int, tuple[maths.MinuteRange, ...]]:
    """The maintenance minutes of each objective over its own ``spans[pk]``, in one read."""
    earliest = min(start for start, _ in spans.values())
    latest = max(end for _, end in spans.values())
    maintenance = list(
        MaintenanceWindow.objects.filter(
            Q(objective__in=objectives) | Q(pipeline__in={o.pipeline_id for o in objectives}),
            _in_force(as_of),
            start__lt=latest,
            end__gt=earliest,
        ).values_list("objective_id", "pipeline_id", "start", "end")
    )
    return {
        objective.pk: maths.excluded_minutes(
            [
                (window_start, window_end)
                for objective_id, pipeline_id, window_start, window_end in maintenance
                if objective_id == objective.pk or pipeline_id == objective.pipeline_id
            ],
            *spans[objective.pk],
        )
        for objective in objectives
    }


def _in_ranges(ranges: Sequence[maths.MinuteRange]) -> Q:
    return reduce(or_, (Q(minute__gte=r.start, minute__lt=r.end) for r in ranges))


def _sum(field: str, condition: Q | None = None) -> Coalesce:
    return Coalesce(Sum(field, filter=condition), 0, output_field=BigIntegerField())


@dataclass(frozen=True, slots=True)
class PerMinute:
    """Dense per-minute counts from ``start``: index ``i`` is the minute ``start + i``;
    minutes without a counter are zeros; ``excluded`` marks the maintenance minutes."""

    start: dt.datetime
    good: NDArray[np.int64]
    total: NDArray[np.int64]
    excluded: NDArray[np.bool_]

    @property
    def epochs(self) -> NDArray[np.int64]:
        """The start of each minute, in Unix seconds."""
        return maths.unix_seconds(self.start) + 60 * np.arange(self.good.size, dtype=np.int64)

    def kept(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Good and total counts with the maintenance minutes as no traffic."""
        return np.where(self.excluded, 0, self.good), np.where(self.excluded, 0, self.total)


@dataclass(frozen=True, slots=True)
class CountedMinutes:
    """The SLA counters of one objective over the whole minutes ``[start, end)``, with the
    minutes its maintenance windows take out (``maintenance``). Read with :func:`counted`."""

    objective: Objective
    start: dt.datetime
    end: dt.datetime
    maintenance: tuple[maths.MinuteRange, ...]

    def _span(self) -> Q:
        return Q(objective=self.objective, minute__gte=self.start, minute__lt=self.end)

    def _kept(self) -> Q:
        """Which counters count: the span's, the maintenance minutes left out."""
        return self._span() & ~_in_ranges(self.maintenance) if self.maintenance else self._span()

    def rows(self) -> QuerySet[SlaMinute]:
        """Every counter of the span, maintenance minutes included."""
        return SlaMinute.objects.filter(self._span())

    def kept(self) -> QuerySet[SlaMinute]:
        """The counters that count: the maintenance minutes left out."""
        return SlaMinute.objects.filter(self._kept())

    def sums(self) -> tuple[maths.Counts, maths.Counts]:
        """The kept counts and the left-out (maintenance) counts, in one read."""
        if not self.maintenance:
            sums = self.rows().aggregate(kept_good=_sum("good"), kept_total=_sum("total"))
            return maths.Counts(int(sums["kept_good"]), int(sums["kept_total"])), maths.Counts(0, 0)
        left_out = _in_ranges(self.maintenance)
        sums = self.rows().aggregate(
            kept_good=_sum("good", ~left_out),
            kept_total=_sum("total", ~left_out),
            left_out_good=_sum("good", left_out),
            left_out_total=_sum("total", left_out),
        )
        return (
            maths.Counts(int(sums["kept_good"]), int(sums["kept_total"])),
            maths.Counts(int(sums["left_out_good"]), int(sums["left_out_total"])),
        )

    def per_minute(self) -> PerMinute:
        """Every minute's counts as arrays (a row per counted minute is read)."""
        size = max(0, int((self.end - self.start) / maths.MINUTE))
        good = np.zeros(size, dtype=np.int64)
        total = np.zeros(size, dtype=np.int64)
        for minute, minute_good, minute_total in (
            self.rows().values_list("minute", "good", "total").iterator()
        ):
            index = int((minute - self.start) / maths.MINUTE)
            good[index], total[index] = minute_good, minute_total
        excluded = np.zeros(size, dtype=np.bool_)
        for r in self.maintenance:
            first = int((r.start - self.start) / maths.MINUTE)
            excluded[first : int((r.end - self.start) / maths.MINUTE)] = True
        return PerMinute(self.start, good, total, excluded)


def counted(
    objective: Objective, start: dt.datetime, end: dt.datetime, as_of: dt.datetime | None = None
) -> CountedMinutes:
    """The one read of SLA minute counts: ``objective``'s counters of ``[start, end)`` (rounded
    down to the minute) without the minutes of the maintenance windows in force as of ``as_of``
    (None: now). An ``as_of`` also cuts the span at its minute: a report counts nothing later.
    The SLA pages, the burn-rate alert, the overview and the audit report all count through it
    (the overview through :func:`counted_many`)."""
    return counted_many([objective], {objective.pk: (start, end)}, as_of)[objective.pk]


def counted_many(
    objectives: Sequence[Objective],
    spans: Mapping[int, tuple[dt.datetime, dt.datetime]],
    as_of: dt.datetime | None = None,
) -> dict[int, CountedMinutes]:
    """:func:`counted` of each objective over its own ``spans[pk]``, by objective id, with one
    read of the maintenance windows for all of them (non-empty ``objectives``)."""
    cut = {}
    for objective in objectives:
        start, end = (floor_minute(moment) for moment in spans[objective.pk])
        if as_of is not None:
            end = min(end, floor_minute(as_of))
        cut[objective.pk] = (start, max(start, end))
    excluded = _excluded_of(objectives, cut, as_of)
    return {o.pk: CountedMinutes(o, *cut[o.pk], excluded[o.pk]) for o in objectives}


def kept_sums(minutes: Sequence[CountedMinutes]) -> dict[int, maths.Counts]:
    """The kept counts of many :class:`CountedMinutes` (non-empty) in one grouped sum, by
    objective id; an objective without counters has none."""
    rows = (
        SlaMinute.objects.filter(reduce(or_, (span._kept() for span in minutes)))
        .values("objective")
        .annotate(good=Sum("good"), total=Sum("total"))
        .values_list("objective", "good", "total")
    )
    return {objective_id: maths.Counts(int(good), int(total)) for objective_id, good, total in rows}


def first_counted_minute(objective: Objective, before: dt.datetime) -> dt.datetime | None:
    """``objective``'s first counted minute before ``before``, or None."""
    return (
        SlaMinute.objects.filter(objective=objective, minute__lt=before)
        .order_by("minute")
        .values_list("minute", flat=True)
        .first()
    )


def maintenance_now(pipeline_id: int, now: dt.datetime) -> MaintenanceWindow | None:
    """A maintenance window of the pipeline or one of its objectives covering ``now``."""
    return (
        MaintenanceWindow.objects.filter(_in_force(None), start__lte=now, end__gt=now)
        .filter(Q(pipeline=pipeline_id) | Q(objective__pipeline=pipeline_id))
        .order_by("start", "id")
        .first()
    )


def window_budget(objective: Objective, now: dt.datetime) -> maths.WindowBudget:
    """Attainment and error budget of ``objective``'s window as of ``now``, without the
    minutes of its maintenance windows (whose counts come back as ``excluded``)."""
    window = maths.objective_window(objective.window, now)
    kept, left_out = counted(objective, window.start, window.end).sums()
    return maths.WindowBudget(
        window, maths.budget(kept.good, kept.total, objective.target_percent), left_out
    )


def burn_rates(objective: Objective, now: dt.datetime, left: maths.Budget) -> tuple[burn.Burn, ...]:
    """The burn of ``objective`` over each of ``burn.BURN_WINDOWS`` up to ``now``'s minute,
    maintenance minutes left out, against ``left`` (the window's budget)."""
    end = floor_minute(now)
    found = []
    for label, minutes in burn.BURN_WINDOWS:
        start = end - dt.timedelta(minutes=minutes)
        counts, _ = counted(objective, start, end).sums()
        found.append(
            burn.burn(
                label,
                minutes,
                counts.good,
                counts.total,
                objective.target_percent,
                left.remaining_bad,
            )
        )
    return tuple(found)


def budgets(
    objectives: Sequence[Objective], windows: Mapping[int, tuple[dt.datetime, dt.datetime]]
) -> dict[int, maths.Budget]:
    """Attainment and error budget of each objective over its own window ``windows[pk]`` (whole
    minutes, ``[start, end)``), without the minutes of its maintenance windows, by objective id.

    For many objectives at once (the overview): :func:`counted_many` and :func:`kept_sums`, one
    read of the maintenance windows and one sum of the counters, whatever the number of
    objectives.
    """
    if not objectives:
        return {}
    sums = kept_sums(list(counted_many(objectives, windows).values()))
    budgets = {}
    for objective in objectives:
        kept = sums.get(objective.pk, maths.Counts(0, 0))
        budgets[objective.pk] = maths.budget(kept.good, kept.total, objective.target_percent)
    return budgets


def attainment(
    objective: Objective,
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
    now: dt.datetime,
) -> maths.AttainmentSeries:
    """Good and total requests per ``step`` over ``[start, end)``, and the objective's window.

    Counters are per minute, so ``start`` and ``end`` are rounded down to the minute and
    ``step`` must be whole minutes. Minutes in maintenance windows are left out of every
    count. The window (rolling 28 days or calendar month, as of ``now``) carries attainment,
    error budget and whether the objective is met; ``burn_down`` is the budget left at the end
    of each step, counted from ``start``.
    """
    start, end = floor_minute(start), floor_minute(end)
    if step % maths.MINUTE or step <= dt.timedelta(0):
        raise ValueError("step must be a positive whole number of minutes")
    if maths.bucket_count(start, end, step) > maths.MAX_BUCKETS:
        raise ValueError(f"at most {maths.MAX_BUCKETS} steps")
    minutes = counted(objective, start, end)
    # Summed per step in the database (date_bin aligns steps to start, as series() does) so a
    # long range does not ship one row per minute.
    rows = (
        minutes.kept()
        .annotate(
            bucket=Func(
                Value(step),
                F("minute"),
                Value(start),
                function="date_bin",
                output_field=DateTimeField(),
            )
        )
        .values("bucket")
        .annotate(good_sum=Sum("good"), total_sum=Sum("total"))
        .values_list("bucket", "good_sum", "total_sum")
    )
    fetched = list(rows)
    buckets = maths.series(
        start,
        end,
        step,
        np.array([maths.unix_seconds(row[0]) for row in fetched], dtype=np.int64),
        np.array([int(row[1]) for row in fetched], dtype=np.int64),
        np.array([int(row[2]) for row in fetched], dtype=np.int64),
    )
    budget = window_budget(objective, now)
    return maths.AttainmentSeries(
        start=start,
        end=end,
        step=step,
        buckets=buckets,
        burn_down=maths.burn_down(buckets, objective.target_percent),
        maintenance=minutes.maintenance,
        window=budget.window,
        summary=budget.summary,
        excluded=budget.excluded,
    )

"""Reads of SLA objectives and their attainment, scoped to the teams a user belongs to.

Attainment leaves out the minutes of maintenance windows (see ``attainment.excluded_minutes``);
the counters keep them, so :class:`~latencyboard.sla.attainment.WindowBudget` reports both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from functools import reduce
from operator import or_

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import BigIntegerField, DateTimeField, F, Func, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from latencyboard.pipelines.models import Pipeline
from latencyboard.sla import attainment as maths
from latencyboard.sla import burn
from latencyboard.sla.models import MaintenanceWindow, Objective, SlaMinute
from latencyboard.teams.models import Membership, Role


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


def memberships_of(user: User | AnonymousUser) -> list[tuple[Membership, list[str]]]:
    """``user``'s memberships, each with the usernames of its team's admins (to ask)."""
    if not user.is_authenticated:
        return []
    memberships = list(
        Membership.objects.filter(user=user).select_related("team").order_by("team__name")
    )
    admins: dict[int, list[str]] = {}
    for team_id, username in (
        Membership.objects.filter(team__in=[m.team_id for m in memberships], role=Role.ADMIN)
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


def _excluded(
    objective: Objective, start: dt.datetime, end: dt.datetime
) -> tuple[maths.MinuteRange, ...]:
    windows = (
        maintenance_windows(objective)
        .filter(deleted_at__isnull=True, start__lt=end, end__gt=start)
        .values_list("start", "end")
    )
    return maths.excluded_minutes(windows, start, end)


def _in_ranges(ranges: Sequence[maths.MinuteRange]) -> Q:
    return reduce(or_, (Q(minute__gte=r.start, minute__lt=r.end) for r in ranges))


def _minutes(
    objective: Objective,
    start: dt.datetime,
    end: dt.datetime,
    excluded: Sequence[maths.MinuteRange] = (),
) -> QuerySet[SlaMinute]:
    minutes = SlaMinute.objects.filter(objective=objective, minute__gte=start, minute__lt=end)
    return minutes.exclude(_in_ranges(excluded)) if excluded else minutes


def _counts(minutes: QuerySet[SlaMinute]) -> maths.Counts:
    sums = minutes.aggregate(
        good=Coalesce(Sum("good"), 0, output_field=BigIntegerField()),
        total=Coalesce(Sum("total"), 0, output_field=BigIntegerField()),
    )
    return maths.Counts(int(sums["good"]), int(sums["total"]))


def window_budget(objective: Objective, now: dt.datetime) -> maths.WindowBudget:
    """Attainment and error budget of ``objective``'s window as of ``now``, without the
    minutes of its maintenance windows (whose counts come back as ``excluded``)."""
    window = maths.objective_window(objective.window, now)
    excluded = _excluded(objective, window.start, window.end)
    kept = _counts(_minutes(objective, window.start, window.end, excluded))
    left_out = (
        _counts(_minutes(objective, window.start, window.end).filter(_in_ranges(excluded)))
        if excluded
        else maths.Counts(0, 0)
    )
    return maths.WindowBudget(
        window, maths.budget(kept.good, kept.total, objective.target_percent), left_out
    )


def burn_rates(objective: Objective, now: dt.datetime, left: maths.Budget) -> tuple[burn.Burn, ...]:
    """The burn of ``objective`` over each of ``burn.BURN_WINDOWS`` up to ``now``'s minute,
    maintenance minutes left out, against ``left`` (the window's budget)."""
    end = maths.floor_minute(now)
    found = []
    for label, minutes in burn.BURN_WINDOWS:
        start = end - dt.timedelta(minutes=minutes)
        counts = _counts(_minutes(objective, start, end, _excluded(objective, start, end)))
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

    For many objectives at once (the overview): one read of the maintenance windows and one
    sum of the counters, whatever the number of objectives.
    """
    if not objectives:
        return {}
    earliest = min(start for start, _ in windows.values())
    latest = max(end for _, end in windows.values())
    maintenance = list(
        MaintenanceWindow.objects.filter(
            Q(objective__in=objectives) | Q(pipeline__in={o.pipeline_id for o in objectives}),
            deleted_at__isnull=True,
            start__lt=latest,
            end__gt=earliest,
        ).values_list("objective_id", "pipeline_id", "start", "end")
    )
    conditions = []
    for objective in objectives:
        start, end = windows[objective.pk]
        excluded = maths.excluded_minutes(
            [
                (window_start, window_end)
                for objective_id, pipeline_id, window_start, window_end in maintenance
                if objective_id == objective.pk or pipeline_id == objective.pipeline_id
            ],
            start,
            end,
        )
        condition = Q(objective=objective, minute__gte=start, minute__lt=end)
        conditions.append(condition & ~_in_ranges(excluded) if excluded else condition)
    sums = {
        objective_id: (int(good), int(total))
        for objective_id, good, total in SlaMinute.objects.filter(reduce(or_, conditions))
        .values("objective")
        .annotate(good=Sum("good"), total=Sum("total"))
        .values_list("objective", "good", "total")
    }
    return {
        objective.pk: maths.budget(*sums.get(objective.pk, (0, 0)), objective.target_percent)
        for objective in objectives
    }


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
    start, end = maths.floor_minute(start), maths.floor_minute(end)
    if step % maths.MINUTE or step <= dt.timedelta(0):
        raise ValueError("step must be a positive whole number of minutes")
    if maths.bucket_count(start, end, step) > maths.MAX_BUCKETS:
        raise ValueError(f"at most {maths.MAX_BUCKETS} steps")
    excluded = _excluded(objective, start, end)
    # Summed per step in the database (date_bin aligns steps to start, as series() does) so a
    # long range does not ship one row per minute.
    rows = (
        _minutes(objective, start, end, excluded)
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
        maintenance=excluded,
        window=budget.window,
        summary=budget.summary,
        excluded=budget.excluded,
    )

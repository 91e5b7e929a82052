"""Reads of SLA objectives and their attainment, scoped to the teams a user belongs to."""

from __future__ import annotations

import datetime as dt

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import BigIntegerField, DateTimeField, F, Func, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from latencyboard.sla import attainment as maths
from latencyboard.sla.models import Objective, SlaMinute
from latencyboard.teams.queries import teams_of


def objectives_of(user: User | AnonymousUser) -> QuerySet[Objective]:
    """The objectives of ``user``'s teams; none for anonymous users."""
    return (
        Objective.objects.filter(team__in=teams_of(user))
        .select_related("team", "pipeline", "stage")
        .order_by("team__name", "name", "id")
    )


def _minutes(objective: Objective, start: dt.datetime, end: dt.datetime) -> QuerySet[SlaMinute]:
    return SlaMinute.objects.filter(objective=objective, minute__gte=start, minute__lt=end)


def attainment(
    objective: Objective,
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
    now: dt.datetime,
) -> maths.AttainmentSeries:
    """Good and total requests per ``step`` over ``[start, end)``, and the objective's window.

    Counters are per minute, so ``start`` and ``end`` are rounded down to the minute and
    ``step`` must be whole minutes. The window (rolling 28 days or calendar month, as of
    ``now``) carries attainment, error budget and whether the objective is met.
    """
    start, end = maths.floor_minute(start), maths.floor_minute(end)
    if step % maths.MINUTE or step <= dt.timedelta(0):
        raise ValueError("step must be a positive whole number of minutes")
    if maths.bucket_count(start, end, step) > maths.MAX_BUCKETS:
        raise ValueError(f"at most {maths.MAX_BUCKETS} steps")
    # Summed per step in the database (date_bin aligns steps to start, as series() does) so a
    # long range does not ship one row per minute.
    rows = (
        _minutes(objective, start, end)
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

    window = maths.objective_window(objective.window, now)
    sums = _minutes(objective, window.start, window.end).aggregate(
        good=Coalesce(Sum("good"), 0, output_field=BigIntegerField()),
        total=Coalesce(Sum("total"), 0, output_field=BigIntegerField()),
    )
    summary = maths.budget(int(sums["good"]), int(sums["total"]), objective.target_percent)
    return maths.AttainmentSeries(start, end, step, buckets, window, summary)

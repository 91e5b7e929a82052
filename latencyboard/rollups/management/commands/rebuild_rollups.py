from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from latencyboard.rollups.rebuild import rebuild_rollups
from latencyboard.teams.models import Team


class Command(BaseCommand):
    help = (
        "Recompute a team's rollups (minutes, then the hours and days they make up) and SLA "
        "counters over a time range from the raw spans, replacing what is stored. The range is "
        "widened to whole hours and must lie within RETENTION_DAYS; folds wait while it runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, metavar="SLUG", help="the team's slug")
        parser.add_argument(
            "--start",
            required=True,
            type=_moment,
            metavar="ISO-DATETIME",
            help="start of the range (without a UTC offset it is UTC)",
        )
        parser.add_argument(
            "--end", required=True, type=_moment, metavar="ISO-DATETIME", help="end (exclusive)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(slug=options["team"]).first()
        if team is None:
            raise CommandError(f"no team with slug {options['team']!r}")
        try:
            result = rebuild_rollups(team, options["start"], options["end"], now=timezone.now())
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"rebuilt {result.start.isoformat()} to {result.end.isoformat()}: "
            f"{result.spans:,} spans, {result.minutes:,} minute rows, {result.hours:,} hour "
            f"rows, {result.days:,} day rows, {result.sla_minutes:,} SLA minutes"
        )


def _moment(value: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {value!r}") from None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from latencyboard.demo import history
from latencyboard.teams.models import Team


class Command(BaseCommand):
    help = (
        f"On a team without stored spans, backfill {history.DAYS} days of sparse demo traffic "
        "and fold it (rollups, SLA counters, deployments, stage shares) before returning; on "
        "any other team do nothing. `make run` calls it on first start."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, metavar="SLUG", help="the team's slug")
        parser.add_argument("--days", type=int, default=history.DAYS, metavar="N")

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(slug=options["team"]).first()
        if team is None:
            raise CommandError(f"no team with slug {options['team']!r}")
        if options["days"] < 1:
            raise CommandError("--days must be at least 1")
        result = history.load_demo_history(
            team,
            now=timezone.now(),
            days=options["days"],
            progress=lambda line: self.stdout.write(line),
        )
        if result is None:
            self.stdout.write("kept what an earlier start stored")
        else:
            self.stdout.write(
                f"done: {result.days} days, {result.spans:,} spans in {result.seconds:.1f} s"
            )

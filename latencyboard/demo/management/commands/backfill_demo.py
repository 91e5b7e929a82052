from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from latencyboard.demo import synthetic
from latencyboard.demo.backfill import BackfillProgress, backfill_demo
from latencyboard.demo.profiles import PIPELINES
from latencyboard.teams.models import Team

# 20 M spans over 90 days, the size of the rollup benchmark's history.
BENCHMARK_SCALE = 20e6 / synthetic.expected_spans(PIPELINES, days=90, scale=1.0)


class Command(BaseCommand):
    help = (
        "Write days of historical demo traffic (the three demo pipelines) for a team, straight "
        "into the span table. --scale 1 is the live demo's rate, about 18 M spans a day; "
        f"--scale {BENCHMARK_SCALE:.4f} gives 20 M spans over 90 days."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, metavar="SLUG", help="the team's slug")
        parser.add_argument("--days", type=int, required=True, metavar="N")
        parser.add_argument(
            "--end",
            type=_moment,
            metavar="ISO-DATETIME",
            help="end of the traffic (default now; without a UTC offset it is UTC)",
        )
        parser.add_argument("--scale", type=float, default=1.0, metavar="F")
        parser.add_argument("--seed", type=int, metavar="S", help="repeat the same traffic")

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(slug=options["team"]).first()
        if team is None:
            raise CommandError(f"no team with slug {options['team']!r}")
        days, scale = options["days"], options["scale"]
        if days < 1 or not scale > 0:
            raise CommandError("--days must be at least 1 and --scale positive")
        now = timezone.now()
        end = options["end"] or now
        kept_from = now - dt.timedelta(days=settings.RETENTION_DAYS)
        if end - dt.timedelta(days=days) < kept_from:
            self.stderr.write(
                f"warning: traffic older than RETENTION_DAYS ({settings.RETENTION_DAYS} days, "
                f"before {kept_from:%Y-%m-%d %H:%M} UTC) is dropped by the hourly retention task"
            )
        expected = synthetic.expected_spans(PIPELINES, days, scale)
        self.stdout.write(
            f"backfilling {days} days up to {end.isoformat()}, ~{expected:,.0f} spans"
        )
        result = backfill_demo(
            team,
            days=days,
            end=end,
            now=now,
            scale=scale,
            seed=options["seed"],
            progress=lambda done: self.stdout.write(_line(done)),
        )
        self.stdout.write(
            f"done: {result.spans:,} spans in {result.batches:,} batches, "
            f"{result.seconds:.1f} s, {result.spans_per_s:,.0f} spans/s"
        )


def _line(done: BackfillProgress) -> str:
    return (
        f"  through {done.through:%Y-%m-%d %H:%M}: {done.spans:,} spans, "
        f"{done.spans_per_s:,.0f} spans/s"
    )


def _moment(value: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {value!r}") from None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)

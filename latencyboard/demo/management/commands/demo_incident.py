"""``manage.py demo_incident fraud-scorer model_forward --factor 1.5 --minutes 20``: slow one
stage of the running demo (``make run``) for a while, so an alert fires and then resolves."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from latencyboard.demo import watched_incident


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("pipeline", help="a demo pipeline, e.g. fraud-scorer")
        parser.add_argument("stage", help="one of its stages, e.g. model_forward")
        parser.add_argument("--factor", type=float, default=1.5, help="slower by (default 1.5)")
        parser.add_argument("--minutes", type=float, default=20.0, help="for (default 20)")
        parser.add_argument("--team", default="demo", help="the demo team's slug")

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        try:
            started = watched_incident.start_incident(
                settings.VAR_DIR,
                options["team"],
                options["pipeline"],
                options["stage"],
                options["factor"],
                dt.timedelta(minutes=options["minutes"]),
                now,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{options['pipeline']} {options['stage']} is {options['factor']:g}x slower until "
            f"{started.until:%H:%M} UTC. Rule “{started.rule}”, baseline n={started.baseline_n}. "
            "Watch /alerts/: one incident opens within about two minutes and resolves about "
            "15 minutes after the slowdown ends."
        )

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from latencyboard.retention import services


class Command(BaseCommand):
    help = (
        "Thin the days of raw spans past SPAN_HOT_DAYS to their error traces, traces slower "
        "than their minute's p99 and SPAN_SAMPLE_PERCENT of the rest (what the hourly beat "
        "task does). With --day, thin that day only, and fail if it cannot be thinned yet."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--day", type=dt.date.fromisoformat, metavar="YYYY-MM-DD")

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        if options["day"] is None:
            results = services.thin_due(now)
        else:
            try:
                result = services.thin_day(options["day"], now)
            except services.NotThinnable as exc:
                raise CommandError(str(exc)) from exc
            if result is None:
                self.stdout.write(f"{options['day']} is thinned already")
            results = [] if result is None else [result]
        for result in results:
            self.stdout.write(
                f"thinned {result.day}: {result.spans_before:,} spans to {result.spans_after:,}; "
                f"kept {result.selection.kept:,} of {result.traces_before:,} traces "
                f"({result.selection.errors:,} with errors, {result.selection.slow:,} slow, "
                f"{result.selection.sampled:,} sampled)"
            )

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from ingest.replay import ReplayError, ReplayReport, replay_files
from latencyboard.teams.models import Team


class Command(BaseCommand):
    help = (
        "Store the spans of OTLP export files (protobuf, OTLP/JSON or JSON Lines, gzipped or "
        "not) for a team, through the same validation as live ingest. Replaying a file again "
        "stores nothing twice."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
        parser.add_argument("--team", required=True, metavar="SLUG", help="the team's slug")
        parser.add_argument(
            "--max-age-days",
            type=int,
            default=settings.RETENTION_DAYS,
            metavar="N",
            help="reject spans older than this (default RETENTION_DAYS, "
            f"{settings.RETENTION_DAYS}); raise it to replay older data",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(slug=options["team"]).first()
        if team is None:
            raise CommandError(f"no team with slug {options['team']!r}")
        max_age_days = options["max_age_days"]
        if max_age_days < 1:
            raise CommandError("--max-age-days must be at least 1")
        if max_age_days > settings.RETENTION_DAYS:
            self.stderr.write(
                f"warning: spans older than RETENTION_DAYS ({settings.RETENTION_DAYS} days) "
                "are dropped by the hourly retention task"
            )
        try:
            total = replay_files(
                team,
                options["files"],
                max_age_days=max_age_days,
                now=timezone.now(),
                on_file=lambda path, report: self.stdout.write(f"{path}: {_summary(report)}"),
            )
        except ReplayError as exc:
            raise CommandError(
                f"{exc}\nstored before it: {_summary(exc.report)}; files after it not read"
            ) from exc
        self.stdout.write(f"total: files={total.files} {_summary(total)}")


def _summary(report: ReplayReport) -> str:
    text = (
        f"requests={report.requests} stored={report.stored} duplicates={report.duplicates} "
        f"rejected={report.rejected}"
    )
    if report.reasons:
        text += " (" + ", ".join(f"{n} {why}" for why, n in report.reasons.most_common()) + ")"
    return text

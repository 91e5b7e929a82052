from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from latencyboard.local.services import bootstrap


class Command(BaseCommand):
    help = "Create the local admin, demo team and demo ingest token; print them as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--demo",
            action="store_true",
            help="also create the demo's pipelines, each with an SLA objective",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        credentials = bootstrap(Path(settings.VAR_DIR), demo=options["demo"])
        self.stdout.write(
            json.dumps(
                {
                    "username": credentials.username,
                    "password": credentials.password,
                    "demo_token": credentials.demo_token,
                }
            )
        )

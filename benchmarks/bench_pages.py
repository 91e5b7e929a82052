"""Latency of every page and every data call of the dashboard on a 20 M span dataset.

Run: ``python benchmarks/bench_pages.py [--requests 30] [--days 90] [--spans 20000000]``.

Self-contained: starts a throwaway PostgreSQL 16 and Redis (``_stack.BenchStack``), migrates
and builds the data as production would have it: ``manage.py backfill_demo`` writes ``--days``
of the three demo pipelines' traffic (``--spans`` spans in all, with their model rollouts),
then, in this process and timed, the rollup fold and compaction, the stage shares and the
version scan run until caught up (the last two from the raw spans retained,
``RETENTION_DAYS``, 30 by default) and an end-to-end SLA objective is created per pipeline
(which counts every span already folded).

Then, with production settings (``DEBUG`` off), it times each call the pages make, through
Django's test Client (session auth, middleware, DRF, JSON), ``--requests`` times after a
warm-up, rotating over the pipelines:

- ``GET /`` (the overview, rendered with its figures) and ``GET /pipelines/{id}/``;
- per window of the page (1h, 6h, 24h, 7d, 28d, 90d) with the page's step: the percentiles,
  the stage breakdown, the deployments and the SLA attainment, as ``static/js/pipeline/``
  asks for them, and the attribute breakdown (raw spans) by ``model.version`` and
  ``cache_hit``;
- trace search (``GET /api/traces/``, the search page's query; slowest first) over 1h, 6h
  and 24h (the longest search there is, ``windows.MAX_TRACE_SEARCH_WINDOW``): unfiltered, of one
  pipeline's ``model_forward`` stage, over a minimum duration (the SLA threshold), with that
  stage over a quarter of it, errors only and ``model.version`` of the candidate; the search
  page itself (``GET /traces/``, its default and a filtered 24h search);
- the exemplars of a chart point's p99 (end to end and of a stage; buckets of a minute, an
  hour and a day, as the percentile charts link them), as API and as page, and the waterfall
  of the slowest trace of the last hour, as API and as page (``static/js/traces.js`` draws
  from the JSON embedded in the page);
- compare (``GET /api/compare/``, as ``static/js/compare.js`` asks): its hour, day and week
  presets, two 12 h windows, and ``model.version`` baseline against candidate over 24 h and
  7 days; and the compare page;
- the SLA list page, the objective's page, ``GET /api/slas/`` and the attainment series the
  objective's page charts (``static/js/sla.js``, the URL read from the page).

Prints p50/p95/max per call and writes them to ``var/bench/pages.json``; the budget is 150 ms
at p95 per call.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from _demo_data import backfill_demo, demo_scale, pending_folds
from _page_calls import OBJECTIVES
from _page_timing import BUDGET_MS, measure
from _stack import (  # puts the repo on sys.path
    PRODUCTION_SETTINGS,
    ROOT,
    BenchStack,
    bench_config,
    interrupt_on_sigterm,
    running_redis,
    write_json,
)

from latencyboard.storage import tables

JSON_PATH = ROOT / "var" / "bench" / "pages.json"


def derive(team_id: int) -> dict[str, float]:
    """What the workers would have written by now, timed phase by phase."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from latencyboard.pipelines.models import Pipeline
    from latencyboard.rollups.compaction import compact_rollups
    from latencyboard.rollups.stage_share_services import compute_stage_shares
    from latencyboard.sla.services import create_objective
    from latencyboard.teams.models import Role, Team
    from latencyboard.teams.services import add_member

    seconds: dict[str, float] = {}
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    started = time.perf_counter()
    for _ in pending_folds():
        pass
    compact_rollups(timezone.now())
    seconds["fold_and_compact"] = time.perf_counter() - started

    started = time.perf_counter()
    while compute_stage_shares(timezone.now(), seconds=300).behind:
        pass
    seconds["stage_shares"] = time.perf_counter() - started

    team = Team.objects.get(pk=team_id)
    admin = get_user_model().objects.create_user("bench-admin")
    add_member(team, admin, Role.ADMIN)
    started = time.perf_counter()
    for pipeline in Pipeline.objects.filter(team=team):
        create_objective(
            team=team,
            pipeline=pipeline,
            stage=None,
            name=f"99% under {OBJECTIVES[pipeline.service_name]:g} ms",
            threshold_ms=OBJECTIVES[pipeline.service_name],
            target_percent=Decimal("99"),
            window="rolling_28d",
            created_by=admin,
        )
    seconds["sla_objectives"] = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--days", type=int, default=90, help="days of history")
    parser.add_argument("--spans", type=int, default=20_000_000, help="spans in all")
    parser.add_argument("--json", default=str(JSON_PATH), help="where to write figures")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    args = parser.parse_args()
    interrupt_on_sigterm()
    figures: dict[str, Any] = {"config": bench_config(days=args.days, spans=args.spans)}
    try:
        with BenchStack(keep=args.keep) as stack, running_redis(stack) as redis_url:
            stack.env["REDIS_URL"] = redis_url
            os.environ.update(stack.env)
            # As deployed (DEBUG off), for us and collectstatic; backfill_demo keeps stack.env.
            os.environ.update({**PRODUCTION_SETTINGS, "STATIC_ROOT": str(stack.root / "static")})
            # Pages name their scripts through the static files manifest, as deployed.
            subprocess.run(
                [sys.executable, "manage.py", "collectstatic", "--no-input"],
                cwd=ROOT,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            print(f"bench: backfilling {args.spans:,} spans over {args.days} days", flush=True)
            figures["backfill_seconds"] = backfill_demo(
                stack, args.days, demo_scale(args.spans, args.days)
            )
            import django

            django.setup()
            print("bench: folding, stage shares, version scan, SLA objectives", flush=True)
            figures["derive_seconds"] = derive(stack.team_id)
            print(
                "  " + ", ".join(f"{k} {v:.0f} s" for k, v in figures["derive_seconds"].items()),
                flush=True,
            )
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute(f"SELECT count(*) FROM {tables.SPAN}")  # noqa: S608
                (figures["spans_stored"],) = cursor.fetchone()
            print(f"bench: {figures['spans_stored']:,} spans stored; timing calls", flush=True)
            figures["calls"] = measure(args.requests, stack.team_id)
            connection.close()
    except KeyboardInterrupt:
        print("bench: interrupted, everything stopped", file=sys.stderr)
        return 130
    over = [name for name, f in figures["calls"].items() if f["p95_ms"] > BUDGET_MS]
    print(f"calls over {BUDGET_MS:.0f} ms at p95: {', '.join(over) or 'none'}")
    write_json(Path(os.path.abspath(args.json)), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

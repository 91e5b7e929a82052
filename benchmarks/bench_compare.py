"""Compare from sketches, and what cohort rollups cost: fold throughput and storage.

Run: ``python benchmarks/bench_compare.py [--days 28] [--scale 0.0123] [--requests 20]``
(``--scale 0.0123`` over 90 days is the ~20 M-span dataset of ``bench_percentiles.py``; the
default, 28 days at that scale, is about 6 M spans and loads and folds in a few minutes).

Self-contained, against a throwaway PostgreSQL (``_stack.BenchStack``) and Redis:

1. **Load.** ``backfill_demo`` writes ``--days`` of the three demo pipelines' traffic as
   pending batches.
2. **Fold twice, in the same run.** Every batch is folded without cohort rollups (the
   cohort folds left empty), the rollups, SLA counters and batch marks are reset,
   and every batch is folded again with them; then compaction, timed, and compaction again
   with nothing new (its cost follows new work, not the rows stored). Throughputs in
   spans/s and their ratio. ``--profile PATH`` writes a cProfile of the cohort fold there
   and one of the compare requests next to it (``PATH.compare.prof``).
3. **Storage.** Bytes (heap, TOAST and indexes; indexes also apart) and rows of the rollup
   and the cohort rollup tables, per day of history; "without cohorts" leaves out what rollup
   rows hold for them (``Rollup.cohorts``).
4. **Compare API.** ``GET /api/compare/`` through Django's test Client (production settings,
   a team viewer) on the busiest pipeline: two windows of 1 h, 24 h, 7 d and 28 d (the
   latest against the one before), and ``model.version`` v7 against v8 over the last 7 d;
   3 warm-ups then ``--requests`` timed each, p50/p95/max in ms.

Prints the figures and writes them to ``var/bench/compare.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _demo_data import backfill_demo, pending_folds
from _stack import (  # puts the repo on sys.path
    PRODUCTION_SETTINGS,
    ROOT,
    BenchStack,
    bench_config,
    interrupt_on_sigterm,
    running_redis,
    write_json,
)

JSON_PATH = ROOT / "var" / "bench" / "compare.json"
WARMUP = 3
WINDOWS = {"1h": dt.timedelta(hours=1), "24h": dt.timedelta(days=1)}
WINDOWS.update({"7d": dt.timedelta(days=7), "28d": dt.timedelta(days=28)})
_TRUNCATE = "TRUNCATE rollups_rollup, rollups_cohortrollup, sla_slaminute"
_UNMARK = "UPDATE spans_ingestbatch SET rolled_up_at = NULL WHERE id > %s"


def reset_rollups(after_batch: int) -> None:
    """No rollup, cohort rollup or SLA counter, and the batches after ``after_batch`` to
    fold again."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(_TRUNCATE)
        cursor.execute(_UNMARK, [after_batch])
        cursor.execute("VACUUM ANALYZE rollups_rollup, sla_slaminute, spans_ingestbatch")


def fold_without_and_with_cohorts(after_batch: int) -> dict[str, Any]:
    """Fold every pending batch without cohort rollups, reset, fold the batches after
    ``after_batch`` again with cohort rollups; both throughputs, their ratio, and the spans
    per rollup row the fold wrote (how much of its work is rows rather than spans)."""
    from django.db import connection

    from latencyboard.rollups import cohort_services, cohorts

    with_cohorts = cohort_services.cohort_minutes
    cohort_services.cohort_minutes = lambda *args, **kwargs: cohorts.CohortMinutes.none()
    print("bench: folding without cohorts", file=sys.stderr)
    without = fold_all()
    cohort_services.cohort_minutes = with_cohorts
    reset_rollups(after_batch)
    print("bench: folding with cohorts", file=sys.stderr)
    with_ = fold_all()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM rollups_rollup")
        (rows,) = cursor.fetchone()
    return {
        "without_cohorts": without,
        "with_cohorts": with_,
        "ratio": with_["spans_per_s"] / without["spans_per_s"],
        "spans_per_rollup_row": with_["spans"] / rows,
    }


def fold_all() -> dict[str, float]:
    spans, started = 0, time.perf_counter()
    for result, _ in pending_folds():
        spans += result.spans
    seconds = time.perf_counter() - started
    return {"spans": spans, "seconds": seconds, "spans_per_s": spans / seconds}


def fold_phase(profile: Path | None) -> dict[str, Any]:
    from django.db import connection
    from django.utils import timezone

    from latencyboard.rollups.compaction import compact_rollups

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    figures = fold_without_and_with_cohorts(0)
    if profiler and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    started = time.perf_counter()
    compact_rollups(timezone.now())
    compact_seconds = time.perf_counter() - started
    # Again with nothing new: what a run costs when there is no work (bounded by new work,
    # not by the rows stored).
    started = time.perf_counter()
    compact_rollups(timezone.now())
    idle_compact_seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return {
        **figures,
        "compact_seconds": compact_seconds,
        "idle_compact_seconds": idle_compact_seconds,
    }


def busy_fold_phase(team_id: int, minutes: int, scale: float, seed: int) -> dict[str, Any]:
    """Fold throughput where it matters, under heavy traffic: ``minutes`` of the demo at
    ``scale`` (each minute one batch, as a fold of a busy worker holds about a minute's
    spans), folded without and then with cohorts. Runs last: it resets the rollups."""
    from django.db import connection
    from django.utils import timezone

    from latencyboard.demo.backfill import backfill_demo as write_demo
    from latencyboard.teams.models import Team

    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(max(id), 0) FROM spans_ingestbatch")
        (before,) = cursor.fetchone()
    team = Team.objects.get(pk=team_id)
    end = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(hours=1)
    print(f"bench: writing {minutes} busy minutes at scale {scale}", file=sys.stderr)
    for minute in range(minutes):
        start = end - dt.timedelta(minutes=minutes - minute)
        write_demo(
            team,
            days=1,
            start=start,
            end=start + dt.timedelta(minutes=1),
            now=end,
            scale=scale,
            seed=seed + minute,
        )
    reset_rollups(before)
    return fold_without_and_with_cohorts(before)


def storage_phase(days: int) -> dict[str, Any]:
    from django.db import connection

    sizes = {}
    with connection.cursor() as cursor:
        for table in ("rollups_rollup", "rollups_cohortrollup"):
            count = f"SELECT count(*) FROM {table}"  # noqa: S608 - constant names
            cursor.execute(
                f"SELECT pg_total_relation_size(%s), pg_indexes_size(%s), ({count})",
                [table, table],
            )
            size, indexes, rows = cursor.fetchone()
            sizes[table] = {
                "bytes": size,
                "index_bytes": indexes,
                "rows": rows,
                "bytes_per_day": size / days,
            }
        # What rollup rows hold for cohorts (the values minutes stand for, Rollup.cohorts).
        cursor.execute("SELECT coalesce(sum(pg_column_size(cohorts)), 0) FROM rollups_rollup")
        (in_rollups,) = cursor.fetchone()
    rollups = sizes["rollups_rollup"]["bytes_per_day"]
    cohorts = sizes["rollups_cohortrollup"]["bytes_per_day"]
    return {
        **sizes,
        "cohort_bytes_in_rollups": in_rollups,
        "per_day_without": rollups - in_rollups / days,
        "per_day_with": rollups + cohorts,
    }


def timed(client: Any, params: dict[str, str], requests: int) -> dict[str, Any]:
    for _ in range(WARMUP):
        response = client.get("/api/compare/", params)
        assert response.status_code == 200, response.content[:500]
    timings = []
    for _ in range(requests):
        begin = time.perf_counter()
        response = client.get("/api/compare/", params)
        timings.append((time.perf_counter() - begin) * 1e3)
    body = response.json()
    return {
        "p50": float(np.percentile(timings, 50)),
        "p95": float(np.percentile(timings, 95)),
        "max": max(timings),
        "spans": [body["a"]["spans"], body["b"]["spans"]],
        "headline": body["headline"],
    }


def compare_phase(team_id: int, requests: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db.models import Count
    from django.test import Client
    from django.utils import timezone

    from latencyboard.spans.models import Span
    from latencyboard.teams.models import Role, Team
    from latencyboard.teams.services import add_member

    user = get_user_model().objects.create_user("bench")
    add_member(Team.objects.get(pk=team_id), user, Role.VIEWER)
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    busiest = (
        Span.objects.filter(team_id=team_id, is_root=True)
        .values("pipeline_id")
        .annotate(n=Count("*"))
        .order_by("-n")
        .first()
    )
    assert busiest is not None
    pipeline = str(busiest["pipeline_id"])
    now = timezone.now().replace(second=0, microsecond=0)
    figures: dict[str, Any] = {}
    for label, width in WINDOWS.items():
        params = {
            "pipeline": pipeline,
            "a_start": (now - 2 * width).isoformat(),
            "a_end": (now - width).isoformat(),
            "b_start": (now - width).isoformat(),
            "b_end": now.isoformat(),
        }
        figures[f"windows_{label}"] = timed(client, params, requests)
    params = {
        "pipeline": pipeline,
        "start": (now - WINDOWS["7d"]).isoformat(),
        "end": now.isoformat(),
        "attr": "model.version",
        "a": "v7",
        "b": "v8",
    }
    figures["versions_7d"] = timed(client, params, requests)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=28, help="days of history to load")
    parser.add_argument("--scale", type=float, default=0.0123, help="backfill_demo scale")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--requests", type=int, default=20, help="timed requests per question")
    parser.add_argument("--json", type=Path, default=JSON_PATH, help="where to write figures")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the cohort fold here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    parser.add_argument(
        "--busy-minutes", type=int, default=12, help="minutes of busy traffic to fold"
    )
    parser.add_argument(
        "--busy-scale", type=float, default=20.0, help="backfill_demo scale of the busy minutes"
    )
    args = parser.parse_args()
    interrupt_on_sigterm()
    figures: dict[str, Any] = {
        "config": bench_config(days=args.days, scale=args.scale, seed=args.seed)
    }
    try:
        with BenchStack(keep=args.keep) as stack, running_redis(stack) as redis_url:
            stack.env.update({**PRODUCTION_SETTINGS, "REDIS_URL": redis_url})
            os.environ.update({**stack.env, "STATIC_ROOT": str(stack.root / "static")})
            import django

            django.setup()
            from django.core.management import call_command

            call_command("collectstatic", "--no-input", verbosity=0)
            from django.db import connection

            print(f"bench: loading {args.days} days at scale {args.scale}", file=sys.stderr)
            started = time.perf_counter()
            backfill_demo(stack, args.days, str(args.scale), args.seed)
            figures["load_seconds"] = time.perf_counter() - started
            figures["fold"] = fold_phase(args.profile)
            figures["storage"] = storage_phase(args.days)
            print("bench: timing the compare API", file=sys.stderr)
            profiler = cProfile.Profile() if args.profile else None
            if profiler:
                profiler.enable()
            figures["compare_ms"] = compare_phase(stack.team_id, args.requests)
            if profiler and args.profile:
                profiler.disable()
                profiler.dump_stats(args.profile.with_suffix(".compare.prof"))
            figures["busy_fold"] = busy_fold_phase(
                stack.team_id, args.busy_minutes, args.busy_scale, args.seed
            )
            connection.close()
    except KeyboardInterrupt:
        print("bench: interrupted, everything stopped", file=sys.stderr)
        return 130
    report(figures)
    write_json(args.json, figures)
    return 0


def report(figures: dict[str, Any]) -> None:
    fold = figures["fold"]
    print(
        f"fold ({fold['spans_per_rollup_row']:,.1f} spans per rollup row): "
        f"{fold['without_cohorts']['spans']:,} spans; "
        f"{fold['without_cohorts']['spans_per_s']:,.0f} spans/s without cohorts, "
        f"{fold['with_cohorts']['spans_per_s']:,.0f} with ({fold['ratio']:.0%})"
    )
    busy = figures["busy_fold"]
    print(
        f"busy fold ({busy['spans_per_rollup_row']:,.0f} spans per rollup row): "
        f"{busy['without_cohorts']['spans']:,} spans; "
        f"{busy['without_cohorts']['spans_per_s']:,.0f} spans/s without cohorts, "
        f"{busy['with_cohorts']['spans_per_s']:,.0f} with ({busy['ratio']:.0%})"
    )
    print(
        f"compaction: {fold['compact_seconds']:.1f} s after the fold, "
        f"{fold['idle_compact_seconds']:.2f} s again with nothing new"
    )
    storage = figures["storage"]
    print(
        f"rollup storage per day: {storage['per_day_without'] / 1e6:.2f} MB without cohorts, "
        f"{storage['per_day_with'] / 1e6:.2f} MB with"
    )
    for table in ("rollups_rollup", "rollups_cohortrollup"):
        size = storage[table]
        print(
            f"  {table}: {size['rows']:,} rows, {size['bytes'] / 1e6:.1f} MB of which "
            f"{size['index_bytes'] / 1e6:.1f} MB indexes"
        )
    for label, timing in figures["compare_ms"].items():
        print(
            f"compare {label}: p50 {timing['p50']:.1f} ms, p95 {timing['p95']:.1f} ms, "
            f"max {timing['max']:.1f} ms, spans {timing['spans'][0]:,} / {timing['spans'][1]:,}"
        )


if __name__ == "__main__":
    sys.exit(main())

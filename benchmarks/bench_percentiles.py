"""Percentiles end to end: load raw spans, fold them, and compare the API with exact SQL.

Run: ``python benchmarks/bench_percentiles.py [--days 90] [--scale 0.0123] [--seed 1]``
(defaults: ~20 M spans over 90 days; ``--days 10`` for a quick run that still fills the
7-day window).

Self-contained, in one process against a throwaway PostgreSQL 16 (``_stack.BenchStack``, fsync
on) and Redis (folds announce on the live channel, as in production):

1. **Load.** ``manage.py backfill_demo`` writes ``--days`` of the three demo pipelines'
   traffic (6 stages + root per request) straight into the span table as pending batches.
2. **Fold.** One worker: ``fold_pending_batches`` until nothing is pending, then
   ``compact_rollups`` (minute rows to hours and days, retention). Then VACUUM ANALYZE, as
   autovacuum would have done by the time anyone looks at a dashboard.
3. **API.** ``GET /api/pipelines/{id}/percentiles/?window=7d&step=1h&stages=end-to-end,<6 stages>
   &q=0.5,0.95,0.99,0.999`` through Django's test Client (production settings, a logged-in
   team viewer), 3 warm-ups then ``--requests`` timed, on the pipeline with the most spans
   in the window.
4. **Exact.** The same answer from the raw spans with ``percentile_cont`` per (stage, hour)
   plus the root spans for end to end, over the API's own (hour-aligned) window, timed
   ``--exact-runs`` times.
5. **Accuracy.** For every (series, hour) of every pipeline: span counts must match, and each
   API quantile is compared with the exact order statistic under two conventions: the sketch's
   own (0-based rank ``floor(q*(n-1))``, numpy ``method="lower"``; the 1 % bound holds for
   this one) and PostgreSQL's ``percentile_disc`` (rank ``ceil(q*n)``, i.e. numpy
   ``"inverted_cdf"``; it can pick the next order statistic up, so errors against it may
   exceed 1 % where neighbouring samples are far apart). ``percentile_cont`` (interpolated)
   is shown for information.

Prints the figures and writes them to ``var/bench/percentiles.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import statistics
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

from latencyboard.storage import tables

JSON_PATH = ROOT / "var" / "bench" / "percentiles.json"
QUANTILES = (0.5, 0.95, 0.99, 0.999)
WARMUP = 3
WINDOW = dt.timedelta(days=7)

# One statement: per (stage, hour) for every span, plus per hour for the root spans (end to
# end). The bounds are the API's window, so both answer exactly the same buckets.
_SERIES = f"""
    SELECT stage_id AS stage, start_time, duration_ns FROM {tables.SPAN}
    WHERE pipeline_id = %(pipeline)s AND start_time >= %(start)s AND start_time < %(end)s
    UNION ALL
    SELECT NULL, start_time, duration_ns FROM {tables.SPAN}
    WHERE pipeline_id = %(pipeline)s AND start_time >= %(start)s AND start_time < %(end)s
      AND is_root
"""  # noqa: S608 - a constant table name
EXACT_CONT = f"""
SELECT stage, extract(epoch FROM date_trunc('hour', start_time))::int8, count(*),
       percentile_cont(%(q)s::float8[]) WITHIN GROUP (ORDER BY duration_ns)
FROM ({_SERIES}) s GROUP BY 1, 2
"""  # noqa: S608 - constant text, parameters bound
EXACT_DISC = f"""
SELECT stage, extract(epoch FROM date_trunc('hour', start_time))::int8, count(*),
       percentile_disc(%(q)s::float8[]) WITHIN GROUP (ORDER BY duration_ns),
       array_agg(duration_ns ORDER BY duration_ns)
FROM ({_SERIES}) s GROUP BY 1, 2
"""  # noqa: S608 - constant text, parameters bound

Key = tuple[int | None, int]  # stage (None: end to end), hour (Unix seconds)


def production_env(stack: BenchStack, redis_url: str) -> None:
    """Settings as deployed (DEBUG off: no query log), for us and for manage.py."""
    stack.env.update({**PRODUCTION_SETTINGS, "REDIS_URL": redis_url})
    os.environ.update(stack.env)


def load(stack: BenchStack, days: int, scale: float, seed: int) -> dict[str, Any]:
    from django.db import connection

    seconds = backfill_demo(stack, days, str(scale), seed)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), sum(stored_spans) FROM {tables.INGEST_BATCH}")  # noqa: S608
        batches, spans = cursor.fetchone()
    return {"seconds": seconds, "batches": batches, "spans": int(spans)}


def fold() -> dict[str, Any]:
    from django.db import connection
    from django.utils import timezone

    from latencyboard.rollups.compaction import compact_rollups

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    folds = spans = 0
    started = time.perf_counter()
    for result, _ in pending_folds():
        folds, spans = folds + 1, spans + result.spans
        if folds % 20 == 0:
            rate = spans / (time.perf_counter() - started)
            print(f"bench:   {spans:,} spans folded, {rate:,.0f} spans/s", file=sys.stderr)
    fold_seconds = time.perf_counter() - started
    started = time.perf_counter()
    compaction = compact_rollups(timezone.now())
    compact_seconds = time.perf_counter() - started
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return {
        "folds": folds,
        "spans": spans,
        "seconds": fold_seconds,
        "spans_per_s": spans / fold_seconds,
        "compact_seconds": compact_seconds,
        "compact_hours": compaction.hours,
        "compact_days": compaction.days,
        "vacuum_seconds": time.perf_counter() - started,
    }


def exact_rows(sql: str, pipeline_id: int, start: dt.datetime, end: dt.datetime) -> list[Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        params: dict[str, Any] = {
            "pipeline": pipeline_id,
            "start": start,
            "end": end,
            "q": list(QUANTILES),
        }
        cursor.execute(sql, params)
        return cursor.fetchall()


def api_values(body: dict[str, Any]) -> dict[Key, tuple[int, list[float | None]]]:
    """(count, quantiles in ms) per (stage, hour) of an API answer."""
    from latencyboard.rollups.serializers import quantile_key

    keys = [quantile_key(q) for q in QUANTILES]
    values = {}
    for series in body["series"]:
        for point in series["points"]:
            hour = int(dt.datetime.fromisoformat(point["t"]).timestamp())
            values[series["stage"]["id"], hour] = (point["n"], [point[k] for k in keys])
    return values


def accuracy(body: dict[str, Any], pipeline_id: int) -> dict[str, Any]:
    """Compare one API answer with the exact figures of its window, bucket by bucket."""
    start = dt.datetime.fromisoformat(body["start"])
    end = dt.datetime.fromisoformat(body["end"])
    api = api_values(body)
    exact: dict[Key, tuple[int, dict[str, list[float]]]] = {}
    for stage, hour, count, disc, durations in exact_rows(EXACT_DISC, pipeline_id, start, end):
        ranks = [math.floor(q * (count - 1)) for q in QUANTILES]
        exact[stage, hour] = (
            count,
            {
                "lower": [durations[r] / 1e6 for r in ranks],
                "percentile_disc": [d / 1e6 for d in disc],
            },
        )
    for stage, hour, _, cont in exact_rows(EXACT_CONT, pipeline_id, start, end):
        exact[stage, hour][1]["percentile_cont"] = [c / 1e6 for c in cont]
    count_mismatches = sum(
        1 for key, (n, _) in api.items() if n != (exact[key][0] if key in exact else 0)
    ) + sum(1 for key in exact if key not in api)
    worst: dict[str, Any] = {}
    for convention in ("lower", "percentile_disc", "percentile_cont"):
        rows = []
        for key, (_, references) in exact.items():
            got = [v for v in (api[key][1] if key in api else []) if v is not None]
            if len(got) < len(QUANTILES):  # no spans in the API's answer: counted above
                continue
            rows.append(
                [
                    abs(value - ref) / ref if ref > 0 else 0.0
                    for value, ref in zip(got, references[convention], strict=True)
                ]
            )
        errors = np.asarray(rows)
        worst[convention] = {
            "max": float(errors.max()),
            "median": float(np.median(errors)),
            "per_quantile_max": dict(
                zip(map(str, QUANTILES), errors.max(axis=0).tolist(), strict=True)
            ),
            "buckets_over_1pct": int((errors.max(axis=1) > 0.01 + 1e-9).sum()),
        }
    return {
        "buckets": len(exact),
        "spans": sum(n for n, _ in exact.values()),
        "count_mismatches": count_mismatches,
        "relative_error": worst,
    }


def query_phase(team_id: int, requests: int, exact_runs: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from latencyboard.pipelines.mapping import END_TO_END
    from latencyboard.pipelines.models import Pipeline, Stage
    from latencyboard.teams.models import Role, Team
    from latencyboard.teams.services import add_member

    user = get_user_model().objects.create_user("bench")  # force_login needs no password
    add_member(Team.objects.get(pk=team_id), user, Role.VIEWER)
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)

    since = timezone.now() - WINDOW
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pipeline_id, count(*) FROM {tables.SPAN} WHERE start_time >= %s "  # noqa: S608
            "GROUP BY 1 ORDER BY 2 DESC, 1",
            [since],
        )
        busiest = cursor.fetchall()
    pipelines = {p.pk: p for p in Pipeline.objects.filter(team_id=team_id)}
    q = ",".join(map(str, QUANTILES))

    def path(pipeline_id: int) -> str:
        stages = Stage.objects.filter(pipeline_id=pipeline_id).order_by("pk")
        ids = ",".join([END_TO_END, *(str(s.pk) for s in stages)])
        return f"/api/pipelines/{pipeline_id}/percentiles/?window=7d&step=1h&stages={ids}&q={q}"

    timed_id = busiest[0][0]
    timed_path = path(timed_id)
    for _ in range(WARMUP):
        assert client.get(timed_path).status_code == 200
    timings = []
    for _ in range(requests):
        begin = time.perf_counter()
        response = client.get(timed_path)
        timings.append((time.perf_counter() - begin) * 1e3)
        assert response.status_code == 200, response.content[:500]
    body = response.json()

    start = dt.datetime.fromisoformat(body["start"])
    end = dt.datetime.fromisoformat(body["end"])
    exact_ms = []
    for _ in range(exact_runs):
        begin = time.perf_counter()
        exact_rows(EXACT_CONT, timed_id, start, end)
        exact_ms.append((time.perf_counter() - begin) * 1e3)

    checks = {}
    for pipeline_id in sorted(pipelines):
        answer = body if pipeline_id == timed_id else client.get(path(pipeline_id)).json()
        checks[str(pipelines[pipeline_id])] = accuracy(answer, pipeline_id)
    return {
        "pipeline": str(pipelines[timed_id]),
        "spans_in_window": int(busiest[0][1]),
        "request": timed_path,
        "window": [body["start"], body["end"]],
        "segments": [s["resolution"] for s in body["segments"]],
        "points": sum(len(s["points"]) for s in body["series"]),
        "api_ms": {
            "p50": float(np.percentile(timings, 50)),
            "p95": float(np.percentile(timings, 95)),
            "max": max(timings),
            "all": [round(t, 2) for t in timings],
        },
        "exact_ms": {
            "median": statistics.median(exact_ms),
            "max": max(exact_ms),
            "all": [round(t, 1) for t in exact_ms],
        },
        "accuracy": checks,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=90, help="days of history to load")
    parser.add_argument(
        "--scale", type=float, default=0.0123, help="backfill_demo scale (0.0123: ~20 M / 90 d)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--requests", type=int, default=50, help="timed API requests")
    parser.add_argument("--exact-runs", type=int, default=3, help="timed exact SQL runs")
    parser.add_argument("--json", type=Path, default=JSON_PATH, help="where to write figures")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    args = parser.parse_args()
    interrupt_on_sigterm()
    figures: dict[str, Any] = {
        "config": bench_config(
            days=args.days, scale=args.scale, seed=args.seed, quantiles=QUANTILES
        )
    }
    try:
        with BenchStack(keep=args.keep) as stack, running_redis(stack) as redis_url:
            production_env(stack, redis_url)
            import django

            django.setup()
            from django.db import connection

            print(f"bench: loading {args.days} days at scale {args.scale}", file=sys.stderr)
            figures["load"] = load(stack, args.days, args.scale, args.seed)
            print(
                f"loaded {figures['load']['spans']:,} spans in "
                f"{figures['load']['batches']:,} batches in "
                f"{figures['load']['seconds']:.0f} s",
                flush=True,
            )
            print("bench: folding (one worker)", file=sys.stderr)
            figures["fold"] = fold()
            print("bench: timing the API and the exact SQL", file=sys.stderr)
            figures["query"] = query_phase(stack.team_id, args.requests, args.exact_runs)
            connection.close()
    except KeyboardInterrupt:
        print("bench: interrupted, everything stopped", file=sys.stderr)
        return 130
    report(figures)
    write_json(args.json, figures)
    checks = figures["query"]["accuracy"].values()
    return 0 if all(c["count_mismatches"] == 0 for c in checks) else 1


def report(figures: dict[str, Any]) -> None:
    fold_, query = figures["fold"], figures["query"]
    api, exact = query["api_ms"], query["exact_ms"]
    figures["ratio_exact_median_over_api_p95"] = exact["median"] / api["p95"]
    print(
        f"fold (1 worker): {fold_['spans']:,} spans in {fold_['folds']} folds, "
        f"{fold_['seconds']:.0f} s: {fold_['spans_per_s']:,.0f} spans/s; compaction "
        f"{fold_['compact_seconds']:.1f} s ({fold_['compact_hours']:,} hour, "
        f"{fold_['compact_days']:,} day rows); VACUUM ANALYZE {fold_['vacuum_seconds']:.0f} s"
    )
    print(
        f"query: {query['pipeline']}, 7 d x (end-to-end + 6 stages) x {len(QUANTILES)} "
        "quantiles at 1 h "
        f"= {query['points']} points, {query['spans_in_window']:,} spans in the window, "
        f"rollup segments {query['segments']}"
    )
    print(
        f"API (test Client, {len(api['all'])} requests): p50 {api['p50']:.1f} ms  "
        f"p95 {api['p95']:.1f} ms  max {api['max']:.1f} ms"
    )
    print(
        f"exact percentile_cont over raw spans ({len(exact['all'])} runs): "
        f"median {exact['median']:.0f} ms  max {exact['max']:.0f} ms"
    )
    print(f"ratio exact median / API p95: {figures['ratio_exact_median_over_api_p95']:.1f}x")
    for name, check in query["accuracy"].items():
        errors = check["relative_error"]
        print(
            f"accuracy {name}: {check['buckets']} (series, hour) buckets, {check['spans']:,} "
            f"spans, count mismatches {check['count_mismatches']}; max relative error vs "
            f"lower rank floor(q*(n-1)) {errors['lower']['max']:.2%} "
            f"({errors['lower']['buckets_over_1pct']} buckets > 1 %), vs percentile_disc "
            f"{errors['percentile_disc']['max']:.2%} "
            f"({errors['percentile_disc']['buckets_over_1pct']} buckets > 1 %), vs "
            f"percentile_cont {errors['percentile_cont']['max']:.2%}"
        )


if __name__ == "__main__":
    sys.exit(main())

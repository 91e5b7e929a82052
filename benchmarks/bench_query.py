"""Latency of the dashboard's percentile query through the REST API on a realistic rollup table.

Run: ``python benchmarks/bench_query.py [--requests 50] [--keep]``.

Self-contained: starts a throwaway PostgreSQL 16 (``_stack.BenchStack``), migrates, and writes
the rollups the worker would have left after 90 days of 3 pipelines x 7 series (end-to-end and
6 stages), ~20 M spans in all: hour rows for every compacted hour, day rows for every whole day,
minute rows for the last 2 days (retention), all from the same seeded latencies (log-normal
around a per-stage median, a diurnal load curve and a 2 % slow mode). Then, with production
settings (``DEBUG`` off), it times the dashboard's request

    GET /api/pipelines/{id}/percentiles/?window=7d&step=1h&q=0.5,0.95,0.99,0.999

through Django's test Client (session auth, middleware, DRF, JSON), ``--requests`` times after
a warm-up, rotating over the pipelines, and prints p50/p95/max, the share spent in
``percentile_series``, the SQL statements of one request and the plan of the rollup SELECT.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from _stack import BenchStack, interrupt_on_sigterm  # puts the repo on sys.path

from latencyboard.storage import tables

DAYS = 90
MINUTE_DAYS = 2  # ROLLUP_MINUTE_DAYS
SPANS_PER_SERIES_HOUR = 440  # 3 pipelines x 7 series x 2160 h x 440 ≈ 20 M spans
STAGES = {  # median latency (ms) of each stage
    "queue_wait": 3.0,
    "feature_hydration": 8.0,
    "preprocess": 5.0,
    "model_forward": 40.0,
    "postprocess": 4.0,
    "serialize": 2.0,
}
END_TO_END_MEDIAN = 70.0
PIPELINES = ("fraud-scorer", "recommender", "clinical-alerts")
QUERY = "window=7d&step=1h&q=0.5,0.95,0.99,0.999"
WARMUP = 5
ROWS_COLUMN = f'"{tables.ROLLUP}"."sketch"'  # only the rows SELECT reads it
COLUMNS = (
    "team_id, pipeline_id, stage_id, resolution, bucket_start, "
    "count, error_count, sum_ms, min_ms, max_ms, sketch"
)


def production_settings(database_url: str, var_dir: str) -> None:
    """Environment for an in-process Django as deployed: DEBUG off, so no query log."""
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "latencyboard.settings",
            "DATABASE_URL": database_url,
            "LATENCYBOARD_VAR_DIR": var_dir,
            "DEBUG": "false",
            "SECRET_KEY": "benchmark-only-key-" + "x" * 40,
            "ALLOWED_HOSTS": "localhost",
            "SECURE_SSL_REDIRECT": "false",
            "REDIS_URL": "redis://127.0.0.1:1/0",  # required when DEBUG is off; never used
        }
    )


def series_rows(
    rng: np.random.Generator,
    team_id: int,
    pipeline_id: int,
    stage_id: int | None,
    median: float,
    now: dt.datetime,
) -> Iterator[tuple[Any, ...]]:
    """Hour, day and minute rows of one series, all from one set of latencies.

    Hours before the last compacted one (compaction runs 5 minutes after an hour ends) have
    hour rows, whole days day rows, and the last ``MINUTE_DAYS`` minute rows up to ``now``.
    """
    from latencyboard.sketches.sketch import sketches_by_group

    hour = 3600
    now_s = int(now.timestamp())
    complete = (now_s - 300) // hour * hour  # hours before this one are compacted
    first_hour = (now_s - DAYS * 86400) // 86400 * 86400
    hours = np.arange(first_hour, now_s // hour * hour + hour, hour)
    phase = 2 * np.pi * (hours % 86400) / 86400
    counts = rng.poisson(SPANS_PER_SERIES_HOUR * (1 + 0.6 * np.sin(phase)))
    hour_of = np.repeat(hours, counts)
    seconds = hour_of + rng.integers(0, hour, hour_of.size)
    keep = seconds < now_s
    hour_of, seconds = hour_of[keep], seconds[keep]
    drift = 1 + 0.3 * np.sin(2 * np.pi * (hour_of % 86400) / 86400)
    values = rng.lognormal(np.log(median * drift), 0.5)
    slow = rng.random(values.size) < 0.02
    values[slow] *= 10
    errors = rng.random(values.size) < 0.01

    minutes_from = (now_s - MINUTE_DAYS * 86400) // hour * hour
    complete_days = complete // 86400 * 86400
    levels = (
        ("hour", hour_of, hour_of < complete),
        ("day", hour_of // 86400 * 86400, hour_of < complete_days),
        ("minute", seconds // 60 * 60, seconds >= minutes_from),
    )
    for resolution, bucket_of, chosen in levels:
        buckets = bucket_of[chosen]
        sketches = sketches_by_group(buckets, values[chosen])
        error_counts = dict(
            zip(*np.unique(buckets[errors[chosen]], return_counts=True), strict=True)
        )
        for bucket, sketch in sketches.items():
            yield (
                team_id,
                pipeline_id,
                stage_id,
                resolution,
                dt.datetime.fromtimestamp(bucket, dt.UTC),
                sketch.count,
                int(error_counts.get(bucket, 0)),
                sketch.sum,
                sketch.min,
                sketch.max,
                sketch.to_bytes(),
            )


def fill(team_id: int, now: dt.datetime) -> tuple[list[int], int, int]:
    """Pipelines, stages and rollup rows; returns pipeline ids, rows and spans written.

    Rows are stored in time order across pipelines, as the worker leaves them (it writes the
    rows of every pipeline for each minute, hour and day in turn), so that one pipeline's
    rows are as scattered over the table as in production.
    """
    from django.db import connection

    from latencyboard.pipelines.models import Pipeline, Stage

    rng = np.random.default_rng(2024)
    pipeline_ids: list[int] = []
    rows: list[tuple[Any, ...]] = []
    for name in PIPELINES:
        pipeline = Pipeline.objects.create(team_id=team_id, service_name=name, environment="prod")
        pipeline_ids.append(pipeline.pk)
        series: list[tuple[int | None, float]] = [(None, END_TO_END_MEDIAN)]
        for stage, median in STAGES.items():
            series.append((Stage.objects.create(pipeline=pipeline, name=stage).pk, median))
        for stage_id, median in series:
            rows.extend(series_rows(rng, team_id, pipeline.pk, stage_id, median, now))
    rows.sort(key=lambda row: row[4])
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:
        with cursor.copy(f"COPY {tables.ROLLUP} ({COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"VACUUM ANALYZE {tables.ROLLUP}")
    spans = sum(row[5] for row in rows if row[3] == "hour")
    return pipeline_ids, len(rows), spans


def percentile(timings: list[float], q: float) -> float:
    return float(np.percentile(timings, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    interrupt_on_sigterm()

    with BenchStack(keep=args.keep) as stack:
        production_settings(stack.database_url, str(stack.root / "var"))
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext
        from django.utils import timezone

        from latencyboard.rollups.queries import percentile_series
        from latencyboard.teams.models import Role, Team
        from latencyboard.teams.services import add_member

        now = timezone.now()
        started = time.perf_counter()
        pipeline_ids, rows, spans = fill(stack.team_id, now)
        print(
            f"data: {len(pipeline_ids)} pipelines x {1 + len(STAGES)} series, {DAYS} days, "
            f"{rows:,} rollup rows, {spans / 1e6:.1f} M spans "
            f"(written in {time.perf_counter() - started:.0f} s)"
        )

        user = get_user_model().objects.create_user("bench")  # force_login needs no password
        add_member(Team.objects.get(pk=stack.team_id), user, Role.VIEWER)
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        paths = [f"/api/pipelines/{pk}/percentiles/?{QUERY}" for pk in pipeline_ids]

        for index in range(WARMUP):
            assert client.get(paths[index % len(paths)]).status_code == 200
        timings = []
        for index in range(args.requests):
            begin = time.perf_counter()
            response = client.get(paths[index % len(paths)])
            timings.append((time.perf_counter() - begin) * 1e3)
            assert response.status_code == 200, response.content[:500]
        body = response.json()

        inner = []
        for index in range(args.requests):
            begin = time.perf_counter()
            percentile_series(
                user,
                pipeline_ids[index % len(pipeline_ids)],
                None,
                now - dt.timedelta(days=7),
                now,
                dt.timedelta(hours=1),
                (0.5, 0.95, 0.99, 0.999),
            )
            inner.append((time.perf_counter() - begin) * 1e3)

        with CaptureQueriesContext(connection) as queries:
            client.get(paths[0])
        rollup_sql = next(q["sql"] for q in queries.captured_queries if ROWS_COLUMN in q["sql"])
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + rollup_sql)
            plan = [line for (line,) in cursor.fetchall()]

        points = sum(len(series["points"]) for series in body["series"])
        print(f"request: GET {paths[0]}")
        print(
            f"answer: {len(body['series'])} series x {len(body['series'][0]['points'])} points "
            f"= {points}, segments {[s['resolution'] for s in body['segments']]}, "
            f"{len(response.content) / 1024:.0f} KiB JSON"
        )
        print(
            f"API through test Client, {args.requests} requests: "
            f"p50 {percentile(timings, 50):.1f} ms  p95 {percentile(timings, 95):.1f} ms  "
            f"max {max(timings):.1f} ms  (mean {statistics.fmean(timings):.1f} ms)"
        )
        print(
            f"percentile_series alone: p50 {percentile(inner, 50):.1f} ms  "
            f"p95 {percentile(inner, 95):.1f} ms"
        )
        print(f"SQL statements per request: {len(queries.captured_queries)}")
        for query in queries.captured_queries:
            print(f"  {query['time']} s  {query['sql'][:110]}")
        print("plan of the rollup SELECT:")
        for line in plan:
            print(f"  {line}")


if __name__ == "__main__":
    main()

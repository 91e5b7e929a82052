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
  and 24h (the longest search there is, ``traces.queries.MAX_WINDOW``): unfiltered, of one
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
import datetime as dt
import html
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
from _demo_data import backfill_demo, demo_scale, pending_folds
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
BUDGET_MS = 150.0
WARMUP = 3
QUANTILES = "0.5,0.9,0.95,0.99,0.999"
# (label, seconds, step seconds, percentiles API step): as latencyboard.dashboards.views.WINDOWS.
WINDOWS = (
    ("1h", 3600, 60, "1m"),
    ("6h", 6 * 3600, 300, "5m"),
    ("24h", 86400, 900, "15m"),
    ("7d", 7 * 86400, 3600, "1h"),
    ("28d", 28 * 86400, 6 * 3600, "6h"),
    ("90d", 90 * 86400, 86400, "1d"),
)
# Trace searches: the page offers 15m to 24h, the longest a search may be.
SEARCH_WINDOWS = (("1h", 3600), ("6h", 6 * 3600), ("24h", 86400))
# Exemplars: a chart point's bucket, ending this long before now (inside the data the
# backfill wrote), for the percentile charts' steps of the 1h, 7d and 90d windows.
EXEMPLAR_AGE_S = 30 * 60
EXEMPLAR_STEPS = (("1m", 60), ("1h", 3600), ("1d", 86400))
# Compare, two windows: (label, length, B's end minus A's end), compare.js's presets and 12 h.
COMPARE_WINDOWS = (
    ("hour", 3600, 3600),
    ("12h", 12 * 3600, 12 * 3600),
    ("day", 86400, 86400),
    ("week", 86400, 7 * 86400),
)
# End-to-end objectives, around each demo pipeline's typical p99.
OBJECTIVES = {"fraud-scorer": 60.0, "recommender": 150.0, "clinical-alerts": 250.0}


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


@dataclass(frozen=True)
class Subject:
    """One demo pipeline and what the pages link to in it."""

    pipeline_id: int
    objective_id: int
    forward_stage_id: int
    versions: tuple[str, str]  # baseline, candidate
    threshold_ms: float


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def page_calls(pipeline_id: int, objective_id: int, now: dt.datetime) -> dict[str, str]:
    """Each data call of the pipeline page per window, with the page's parameters."""
    calls = {}
    for label, seconds, step, api_step in WINDOWS:
        end_s = -(-int(now.timestamp()) // step) * step  # the end of the current step
        window = f"start={_iso(end_s - seconds)}&end={_iso(end_s)}"
        base = f"/api/pipelines/{pipeline_id}"
        query = f"{window}&step={api_step}&q={QUANTILES}"
        sla = f"/api/slas/{objective_id}"
        calls[f"percentiles {label}"] = f"{base}/percentiles/?{query}"
        calls[f"stage-breakdown {label}"] = f"{base}/stage-breakdown/?{window}&step={step}"
        calls[f"deployments {label}"] = f"{base}/deployments/?{window}"
        calls[f"sla attainment {label}"] = f"{sla}/attainment/?{window}&step={step}"
        if seconds <= 7 * 86400:
            for key in ("model.version", "cache_hit"):
                calls[f"attributes {key} {label}"] = (
                    f"{base}/attributes/?{window}&key={key}&q={QUANTILES}"
                )
    return calls


def trace_calls(subject: Subject, now: dt.datetime, trace_hex: str) -> dict[str, str]:
    """Trace search as the search form submits it (explicit start and end), exemplars of a
    minute's p99 and one trace's waterfall."""
    end_s = int(now.timestamp())
    calls = {}
    for label, seconds in SEARCH_WINDOWS:
        base = f"pipeline={subject.pipeline_id}&start={_iso(end_s - seconds)}&end={_iso(end_s)}"
        calls[f"traces {label}"] = f"/api/traces/?{base}"
        calls[f"traces stage {label}"] = f"/api/traces/?{base}&stage={subject.forward_stage_id}"
        calls[f"traces min-duration {label}"] = (
            f"/api/traces/?{base}&min_ms={subject.threshold_ms:g}"
        )
        calls[f"traces stage min-duration {label}"] = (
            f"/api/traces/?{base}&stage={subject.forward_stage_id}"
            f"&min_ms={subject.threshold_ms / 4:g}"
        )
        calls[f"traces errors {label}"] = f"/api/traces/?{base}&status=error"
        calls[f"traces attr {label}"] = (
            f"/api/traces/?{base}&attr=model.version:{subject.versions[1]}"
        )
    day = f"start={_iso(end_s - 86400)}&end={_iso(end_s)}"
    calls["traces page"] = "/traces/"
    calls["traces page stage 24h"] = (
        f"/traces/?pipeline={subject.pipeline_id}&stage={subject.forward_stage_id}&{day}"
    )
    for label, seconds in EXEMPLAR_STEPS:
        bucket = (end_s - EXEMPLAR_AGE_S - seconds) // seconds * seconds
        exemplars = f"pipeline={subject.pipeline_id}&minute={_iso(bucket)}&step={label}&near=p99"
        calls[f"exemplars p99 {label}"] = f"/api/traces/exemplars/?{exemplars}"
        calls[f"exemplars p99 stage {label}"] = (
            f"/api/traces/exemplars/?{exemplars}&stage={subject.forward_stage_id}"
        )
        calls[f"exemplars page {label}"] = f"/traces/?{exemplars}&stage={subject.forward_stage_id}"
    calls["waterfall"] = f"/api/traces/{trace_hex}/"
    calls["trace page"] = f"/traces/{trace_hex}/"
    return calls


def compare_calls(subject: Subject, now: dt.datetime) -> dict[str, str]:
    """Compare as ``static/js/compare.js`` asks: B ends at the page's minute."""
    end_s = int(now.timestamp()) // 60 * 60
    calls = {"compare page": "/compare/"}
    for label, length, gap in COMPARE_WINDOWS:
        a_end, b_end = end_s - gap, end_s
        calls[f"compare {label}"] = (
            f"/api/compare/?pipeline={subject.pipeline_id}"
            f"&a_start={_iso(a_end - length)}&a_end={_iso(a_end)}"
            f"&b_start={_iso(b_end - length)}&b_end={_iso(b_end)}"
        )
    baseline, candidate = subject.versions
    for label, seconds in (("24h", 86400), ("7d", 7 * 86400)):
        calls[f"compare model.version {label}"] = (
            f"/api/compare/?pipeline={subject.pipeline_id}&start={_iso(end_s - seconds)}"
            f"&end={_iso(end_s)}&attr=model.version&a={baseline}&b={candidate}"
        )
    return calls


def sla_calls(subject: Subject, series_url: str) -> dict[str, str]:
    return {
        "sla list page": "/slas/",
        "sla page": f"/slas/{subject.objective_id}/",
        "sla list api": "/api/slas/",
        "sla page attainment series": series_url,
    }


def measure(
    requests: int, team_id: int, now: dt.datetime | None = None, only: str = ""
) -> dict[str, dict[str, Any]]:
    """Time every call (those whose name contains ``only``) for windows ending at ``now``."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils import timezone

    from latencyboard.demo.profiles import MODEL_FORWARD, PIPELINES
    from latencyboard.pipelines.models import Pipeline
    from latencyboard.sla.models import Objective
    from latencyboard.teams.models import Role, Team
    from latencyboard.teams.services import add_member

    user = get_user_model().objects.create_user("bench-viewer")
    add_member(Team.objects.get(pk=team_id), user, Role.VIEWER)
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    now = now or timezone.now()
    profiles = {profile.name: profile for profile in PIPELINES}
    per_pipeline = []
    for pipeline in Pipeline.objects.filter(team_id=team_id).order_by("pk"):
        profile = profiles[pipeline.service_name]
        subject = Subject(
            pipeline_id=pipeline.pk,
            objective_id=Objective.objects.get(pipeline=pipeline).pk,
            forward_stage_id=pipeline.stages.get(name=MODEL_FORWARD).pk,
            versions=(profile.model_versions[0].name, profile.model_versions[1].name),
            threshold_ms=OBJECTIVES[pipeline.service_name],
        )
        # What the pages link to: the slowest trace of the last hour, the chart's series.
        hour = f"start={_iso(now.timestamp() - 3600)}&end={_iso(now.timestamp())}"
        found = client.get(f"/api/traces/?pipeline={pipeline.pk}&{hour}&limit=1").json()
        page = client.get(f"/slas/{subject.objective_id}/").content.decode()
        match = re.search(r'data-series-url="([^"]+)"', page)
        assert match is not None, page[:500]
        per_pipeline.append(
            {
                "overview": "/",
                "pipeline page": f"/pipelines/{pipeline.pk}/",
                **page_calls(pipeline.pk, subject.objective_id, now),
                **trace_calls(subject, now, found["traces"][0]["trace_id"]),
                **compare_calls(subject, now),
                **sla_calls(subject, html.unescape(match[1])),
            }
        )
    results = {}
    for name in filter(lambda name: only in name, per_pipeline[0]):
        paths = [calls[name] for calls in per_pipeline]
        for index in range(WARMUP):
            response = client.get(paths[index % len(paths)])
            assert response.status_code == 200, (paths[0], response.content[:500])
        timings = []
        for index in range(requests):
            begin = time.perf_counter()
            response = client.get(paths[index % len(paths)])
            timings.append((time.perf_counter() - begin) * 1e3)
            assert response.status_code == 200, (paths[0], response.content[:500])
        results[name] = {
            "p50_ms": float(np.percentile(timings, 50)),
            "p95_ms": float(np.percentile(timings, 95)),
            "max_ms": max(timings),
            "bytes": len(response.content),
        }
        results[name].update(details(name, response))
        figures = results[name]
        print(
            f"  {name:<36} p50 {figures['p50_ms']:6.1f} ms  p95 {figures['p95_ms']:6.1f} ms  "
            f"max {figures['max_ms']:6.1f} ms  {'OK' if figures['p95_ms'] <= BUDGET_MS else 'OVER'}"
            + (f"  ({figures['note']})" if "note" in figures else ""),
            flush=True,
        )
    return results


def details(name: str, response: Any) -> dict[str, Any]:
    """What the last answer of a call read or found, to tell a fast call from an empty one."""
    if not response["Content-Type"].startswith("application/json"):
        return {}
    body = response.json()
    if name.startswith("attributes"):
        capped = ", capped" if body["capped"] else ""
        return {
            "spans_read": body["spans_read"],
            "capped": body["capped"],
            "note": f"{body['spans_read']:,} spans{capped}",
        }
    if name.startswith("traces"):
        return {"traces": len(body["traces"]), "note": f"{len(body['traces'])} traces"}
    if name.startswith("exemplars"):
        return {"n": body["n"], "note": f"p99 of {body['n']} spans"}
    if name == "waterfall":
        return {"note": f"{body['span_count']} spans"}
    if name.startswith("compare") and "a" in body:
        sides = [body["a"], body["b"]]
        return {
            "sampled_spans": [side["spans"] for side in sides],
            "fractions": [side["fraction"] for side in sides],
            "note": " vs ".join(
                f"{side['spans']:,} of ~{side['estimated_spans']:,}" for side in sides
            ),
        }
    return {}


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

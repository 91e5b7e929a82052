"""Timing the calls of ``_page_calls`` through Django's test Client, as a team viewer."""

from __future__ import annotations

import datetime as dt
import html
import re
import time
from typing import Any

import numpy as np
from _page_calls import (
    OBJECTIVES,
    Subject,
    compare_calls,
    iso,
    page_calls,
    sla_calls,
    trace_calls,
)

BUDGET_MS = 150.0
WARMUP = 3


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
        hour = f"start={iso(now.timestamp() - 3600)}&end={iso(now.timestamp())}"
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
        spans = [body["a"]["spans"], body["b"]["spans"]]
        return {"spans": spans, "note": f"{spans[0]:,} vs {spans[1]:,} spans"}
    return {}

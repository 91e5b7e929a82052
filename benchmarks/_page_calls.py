"""What ``bench_pages.py`` times: each call a dashboard page makes, with its parameters, per
demo pipeline (:class:`Subject`), for windows ending at a given moment."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Subject:
    """One demo pipeline and what the pages link to in it."""

    pipeline_id: int
    objective_id: int
    forward_stage_id: int
    versions: tuple[str, str]  # baseline, candidate
    threshold_ms: float


def iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def page_calls(pipeline_id: int, objective_id: int, now: dt.datetime) -> dict[str, str]:
    """Each data call of the pipeline page per window, with the page's parameters."""
    calls = {}
    for label, seconds, step, api_step in WINDOWS:
        end_s = -(-int(now.timestamp()) // step) * step  # the end of the current step
        window = f"start={iso(end_s - seconds)}&end={iso(end_s)}"
        base = f"/api/pipelines/{pipeline_id}"
        query = f"{window}&step={api_step}&q={QUANTILES}"
        calls[f"percentiles {label}"] = f"{base}/percentiles/?{query}"
        calls[f"stage-breakdown {label}"] = f"{base}/stage-breakdown/?{window}&step={step}"
        calls[f"deployments {label}"] = f"{base}/deployments/?{window}"
        calls[f"sla attainment {label}"] = (
            f"{base}/sla-attainment/?objective={objective_id}&{window}&step={step}"
        )
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
        base = f"pipeline={subject.pipeline_id}&start={iso(end_s - seconds)}&end={iso(end_s)}"
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
    day = f"start={iso(end_s - 86400)}&end={iso(end_s)}"
    calls["traces page"] = "/traces/"
    calls["traces page stage 24h"] = (
        f"/traces/?pipeline={subject.pipeline_id}&stage={subject.forward_stage_id}&{day}"
    )
    for label, seconds in EXEMPLAR_STEPS:
        bucket = (end_s - EXEMPLAR_AGE_S - seconds) // seconds * seconds
        exemplars = f"pipeline={subject.pipeline_id}&minute={iso(bucket)}&step={label}&near=p99"
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
            f"&a_start={iso(a_end - length)}&a_end={iso(a_end)}"
            f"&b_start={iso(b_end - length)}&b_end={iso(b_end)}"
        )
    baseline, candidate = subject.versions
    for label, seconds in (("24h", 86400), ("7d", 7 * 86400)):
        calls[f"compare model.version {label}"] = (
            f"/api/compare/?pipeline={subject.pipeline_id}&start={iso(end_s - seconds)}"
            f"&end={iso(end_s)}&attr=model.version&a={baseline}&b={candidate}"
        )
    return calls


def sla_calls(subject: Subject, series_url: str) -> dict[str, str]:
    return {
        "sla list page": "/slas/",
        "sla page": f"/slas/{subject.objective_id}/",
        "sla list api": "/api/slas/",
        "sla page attainment series": series_url,
    }

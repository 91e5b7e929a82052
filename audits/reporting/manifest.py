"""The JSON manifest of a report: its parameters and every file with its SHA-256 (pure)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from audits.reporting import tables
from audits.reporting.figures import QUANTILE_METHOD, QUANTILES, ReportData
from latencyboard.sketches.buckets import RELATIVE_ERROR


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def render(data: ReportData, files: Mapping[str, bytes]) -> bytes:
    """``manifest.json``: sorted keys, files by name, so equal inputs give equal bytes."""
    manifest = {
        "report": data.report_id,
        "team": data.team,
        "quarter": data.quarter.label,
        "period": {
            "start": tables.moment(data.quarter.start),
            "end": tables.moment(data.quarter.end),
        },
        "pipelines": list(data.pipelines),
        "as_of": tables.moment(data.requested_at),
        "software": {"name": "latencyboard", "version": data.software_version},
        "parameters": {
            "attainment": "exact per-minute counters; good = duration <= threshold",
            "maintenance": "minutes starting in a window declared before as_of are left out",
            "percentiles": list(QUANTILES),
            "quantile_method": QUANTILE_METHOD,
            "sketch_relative_error": RELATIVE_ERROR,
            "percentile_source": "day rollups",
            "alert_times": "whole seconds from started_at to the first transition into "
            "acknowledged / resolved, moments cut to the second",
        },
        "files": [
            {"name": name, "bytes": len(content), "sha256": sha256(content)}
            for name, content in sorted(files.items())
        ],
    }
    return (json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()

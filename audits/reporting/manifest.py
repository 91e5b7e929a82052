"""The JSON manifest of a report: its parameters and every file with its SHA-256 (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from audits import signatures
from audits.reporting import tables
from audits.reporting.figures import ReportData
from audits.reporting.percentile_figures import QUANTILE_METHOD, QUANTILES
from latencyboard.sketches.buckets import RELATIVE_ERROR


def render(data: ReportData, csv_files: Mapping[str, bytes], public_key: str) -> bytes:
    """``manifest.json`` of the report's tables: sorted keys, files by name, so equal inputs
    give equal bytes. The PDF prints this file's SHA-256; ``signature.json`` signs both."""
    quarter_rows = [a for a in data.attainment if a.period.label == data.quarter.label]
    manifest = {
        "report": data.report_id,
        "team": data.team,
        "quarter": data.quarter.label,
        "period": {
            "start": tables.moment(data.quarter.start),
            "end": tables.moment(data.quarter.end),
        },
        "pipelines": list(data.pipelines),
        "requested_at": tables.moment(data.requested_at),
        "as_of": tables.moment(data.as_of),
        "counted_until": tables.moment(data.data_end),
        "provisional": data.provisional,
        "objectives": [
            {
                "objective_id": a.objective_id,
                "objective": a.objective,
                "version": a.version,
                "verdict": tables.verdict(data, a),
                "attainment_percent": tables.percent(a.budget.attainment_percent),
                "minutes": a.minutes,
                "minutes_counted": a.counted_minutes,
                "minutes_with_traffic": a.traffic_minutes,
            }
            for a in quarter_rows
        ],
        "signing": {"algorithm": signatures.ALGORITHM, "public_key": public_key},
        **(
            {}
            if data.audit_log is None
            else {"audit_log": {"seq": data.audit_log.seq, "sha256": data.audit_log.sha256}}
        ),
        "software": {"name": "latencyboard", "version": data.software_version},
        "parameters": {
            "attainment": "exact per-minute counters; good = duration <= threshold",
            "maintenance": "minutes starting in a window declared before as_of are left out",
            "percentiles": list(QUANTILES),
            "quantile_method": QUANTILE_METHOD,
            "sketch_relative_error": RELATIVE_ERROR,
            "percentile_source": "day rollups; minute rollups after the last day rollup",
            "cut_off": "every figure read in one database snapshot taken at as_of; minutes "
            "before as_of cut to the minute",
            "alert_times": "whole seconds from started_at to the first transition into "
            "acknowledged / resolved, moments cut to the second",
        },
        "files": [
            {"name": name, "bytes": len(content), "sha256": signatures.sha256(content)}
            for name, content in sorted(csv_files.items())
        ],
    }
    return (json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()

"""The compare page: a server-rendered form whose chart and table come from the compare API.

The page takes the API's query parameters (``?pipeline=…&attr=model.version&a=v7&b=v8…``), so
a comparison is a link to share; with a complete set it runs on load.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from latencyboard.pipelines.models import Pipeline, cohort_attributes
from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.stats import comparison
from latencyboard.stats.labels import quantile_label
from latencyboard.windows import floor_minute


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    pipelines = list(Pipeline.objects.visible_to(request.user))
    thresholds = comparison.Thresholds()
    config = {
        "api": reverse("api-compare"),
        "now": floor_minute(timezone.now()).isoformat(),
        "attributes": sorted({key for p in pipelines for key in cohort_attributes(p)}),
        "quantiles": [quantile_label(q) for q in comparison.QUANTILES],
    }
    method = {
        "confidence_pct": round(comparison.CONFIDENCE * 100),
        "false_alarm_pct": round(100 - comparison.CONFIDENCE * 100),
        "relative_error_pct": round(RELATIVE_ERROR * 100),
        "min_delta_ms": thresholds.min_delta_ms,
        "min_delta_pct": thresholds.min_delta_pct,
        "min_spans": [(quantile_label(q), comparison.min_spans(q)) for q in comparison.QUANTILES],
        "tail_spans": comparison.MIN_TAIL_SPANS,
        "per_quantile_pct": round(
            100 - (100 - comparison.CONFIDENCE * 100) / len(comparison.QUANTILES), 1
        ),
        "per_side_pct": round(
            100 - (100 - comparison.CONFIDENCE * 100) / len(comparison.QUANTILES) / 2, 2
        ),
    }
    return render(
        request,
        "compare/compare.html",
        {"pipelines": pipelines, "config": config, "method": method},
    )

"""Trace pages: search (and the exemplars behind a chart point), and one trace's waterfall."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.retention.queries import sampled_periods
from latencyboard.rollups.serializers import quantile_key
from latencyboard.traces import exemplar_queries, queries, waterfall_queries
from latencyboard.traces.serializers import (
    ExemplarQuerySerializer,
    TraceSearchQuerySerializer,
)
from latencyboard.traces.waterfall_serializers import trace_waterfall_data
from latencyboard.windows import HOUR, MAX_TRACE_SEARCH_WINDOW

WINDOWS = ("15m", "1h", "6h", "24h")


@login_required
@require_GET
def trace_search(request: HttpRequest) -> HttpResponse:
    """The search form and its results; with ``minute`` (a chart point's link, e.g.
    ``?pipeline=3&minute=…&step=15m&near=p99``) the traces nearest that minute's (or that
    bucket's) quantile instead."""
    context: dict[str, Any] = {
        "pipelines": queries.pipelines_of(request.user),
        "params": request.GET,
        "windows": WINDOWS,
        "max_window_hours": MAX_TRACE_SEARCH_WINDOW // HOUR,
    }
    exemplar_mode = "minute" in request.GET
    query = (
        ExemplarQuerySerializer(data=request.GET)
        if exemplar_mode
        else TraceSearchQuerySerializer(data=request.GET, context={"now": timezone.now()})
    )
    errors: list[str] = []
    if not query.is_valid():
        errors = [
            f"{field}: {' '.join(map(str, problems))}" for field, problems in query.errors.items()
        ]
    else:
        try:
            if exemplar_mode:
                exemplars = exemplar_queries.trace_exemplars(request.user, **query.validated_data)
                context["exemplars"] = exemplars
                context["percentile"] = quantile_key(exemplars.quantile)
                context["period"] = _period(exemplars.width)
                context["sampled"] = sampled_periods(exemplars.minute, exemplars.minute_end)
            else:
                search = queries.search_traces(
                    request.user, queries.TraceFilters(**query.validated_data)
                )
                context["search"] = search
                context["sampled"] = sampled_periods(search.filters.start, search.filters.end)
        except (Pipeline.DoesNotExist, Stage.DoesNotExist):
            raise Http404("No such pipeline or stage in your teams.") from None
        except queries.InvalidTraceQuery as exc:
            errors = [f"{exc.field}: {exc.message}"]
    context["errors"] = errors
    return render(request, "traces/search.html", context, status=400 if errors else 200)


def _period(width: dt.timedelta) -> str:
    """A chart bucket's length in words: minute, 15 minutes, hour, 6 hours, day."""
    seconds = int(width.total_seconds())
    for unit, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        count, rest = divmod(seconds, length)
        if count and not rest:
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds} seconds"


@login_required
@require_GET
def trace_detail(request: HttpRequest, trace_id: uuid.UUID) -> HttpResponse:
    """The waterfall and flame view of one trace of the user's teams."""
    try:
        result = waterfall_queries.trace_waterfall(request.user, trace_id)
    except waterfall_queries.TraceNotFound:
        raise Http404("No such trace in your teams.") from None
    data = trace_waterfall_data(result)
    return render(
        request,
        "traces/detail.html",
        {"trace": data, "root": data["spans"][data["critical_path"][0]]},
    )

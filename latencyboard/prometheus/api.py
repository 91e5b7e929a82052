"""The Prometheus HTTP query API (``/prometheus/api/v1/``), read-only, over the rollups.

Grafana's Prometheus data source (and any Prometheus client) points at ``/prometheus`` with an
API token as a Bearer header. GET and POST (form) both read, so a read-only token may POST
here. Errors answer Prometheus' shape, ``{"status": "error", "errorType", "error"}``, with
400 for a query this API does not answer (see :mod:`latencyboard.prometheus.promql`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from latencyboard import bounds
from latencyboard.fairness.heavy_reads import HeavyRead
from latencyboard.prometheus import errors, evaluation, promql
from latencyboard.prometheus import series as catalogue
from latencyboard.renderers import OrjsonRenderer
from latencyboard.rollups.queries import InvalidPercentileQuery

MAX_MATCHERS = 10
"""Most ``match[]`` selectors one series or label request may give."""
BUILD_INFO = {
    "version": "2.53.0",
    "revision": "latencyboard",
    "branch": "",
    "buildUser": "",
    "buildDate": "",
    "goVersion": "",
}


class BadData(Exception):
    """A parameter the API cannot read; answered as Prometheus' ``bad_data`` with a 400."""


def _error(status: int, message: str) -> Response:
    return Response(errors.error_body(status, message), status=status)


def _success(data: Any) -> Response:
    return Response({"status": "success", "data": data})


@extend_schema(exclude=True)  # Prometheus' own API, documented by Prometheus
class PrometheusView(APIView):
    """Reads parameters from the query string and a POSTed form alike, and answers errors in
    Prometheus' shape."""

    renderer_classes = [OrjsonRenderer]
    permission_classes = [IsAuthenticated]  # every method reads: a read-only token may POST

    def get(self, request: Request, **kwargs: Any) -> Response:
        return self.read(request, **kwargs)

    def post(self, request: Request, **kwargs: Any) -> Response:
        return self.read(request, **kwargs)

    def read(self, request: Request, **kwargs: Any) -> Response:
        try:
            return self.answer(request, **kwargs)
        except (BadData, promql.Unsupported, InvalidPercentileQuery) as exc:
            return _error(400, str(exc))

    def answer(self, request: Request, **kwargs: Any) -> Response:
        raise NotImplementedError

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        if isinstance(exc, exceptions.APIException):
            response.data = errors.error_body(response.status_code, str(exc.detail))
        return response

    def param(self, request: Request, name: str) -> str | None:
        values = self.params(request, name)
        return values[-1] if values else None

    def params(self, request: Request, name: str) -> list[str]:
        given = list(request.query_params.getlist(name))
        if hasattr(request.data, "getlist"):
            given += request.data.getlist(name)
        return given

    def moment(
        self, request: Request, name: str, default: dt.datetime | None = None
    ) -> dt.datetime:
        text = self.param(request, name)
        if text is None:
            if default is None:
                raise BadData(f'missing parameter "{name}"')
            return default
        try:
            return bounds.MomentField().run_validation(text)
        except serializers.ValidationError as exc:
            raise BadData(f'invalid parameter "{name}": {_first(exc)}') from None

    def selectors(self, request: Request) -> list[promql.Selector]:
        texts = self.params(request, "match[]")
        if len(texts) > MAX_MATCHERS:
            raise BadData(f"At most {MAX_MATCHERS} match[] selectors.")
        return [promql.parse_selector(text) for text in texts]

    def matched(self, request: Request) -> list[catalogue.Series] | None:
        """The series the ``match[]`` selectors name, None without any."""
        selectors = self.selectors(request)
        if not selectors:
            return None
        found: dict[tuple[tuple[str, str], ...], catalogue.Series] = {}
        for selector in selectors:
            listed = catalogue.select(
                request.user,
                selector,
                catalogue.MAX_LISTED_PIPELINES,
                catalogue.MAX_LISTED_SERIES,
            )
            for entry in listed:
                found.setdefault(tuple(sorted(entry.labels.items())), entry)
        return list(found.values())


def _first(exc: serializers.ValidationError) -> str:
    detail = exc.detail
    return str(detail[0] if isinstance(detail, list) else detail)


def _labels(entry: catalogue.Series) -> dict[str, str]:
    """Labels as Prometheus shows them: an empty label is no label."""
    return {name: value for name, value in entry.labels.items() if value}


def _number(value: float) -> str:
    """A sample value as Prometheus writes it."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _stages_per_pipeline(chosen: list[catalogue.Series]) -> int:
    stages: dict[int, set[int | None]] = {}
    for entry in chosen:
        stages.setdefault(entry.pipeline_id, set()).add(entry.stage_id)
    return max((len(found) for found in stages.values()), default=1)


class QueryView(HeavyRead, PrometheusView):
    """``/api/v1/query``: an instant vector (or a scalar) at ``time`` (default now)."""

    def answer(self, request: Request, **kwargs: Any) -> Response:
        now = timezone.now()
        time = self.moment(request, "time", now)
        query = promql.parse(self.param(request, "query") or "")
        stamp = time.timestamp()
        if isinstance(query, promql.Scalar):
            return _success({"resultType": "scalar", "result": [stamp, _number(query.value)]})
        chosen = catalogue.select(request.user, query)
        samples = evaluation.values(
            request.user, chosen, evaluation.instant_grid(time, now), now, stamp
        )
        result = [
            {"metric": _labels(entry), "value": [found[-1][0], _number(found[-1][1])]}
            for entry, found in zip(chosen, samples, strict=True)
            if found
        ]
        return _success({"resultType": "vector", "result": result})


class QueryRangeView(HeavyRead, PrometheusView):
    """``/api/v1/query_range``: a range vector from ``start`` to ``end`` every ``step``.

    The query is parsed, its series chosen and its grid planned before the request waits for a
    heavy-read slot, so a range it refuses (too long, a bad step) is answered at once."""

    _plan: tuple[list[catalogue.Series], evaluation.Grid, dt.datetime]

    def before_slot(self, request: Request) -> None:
        try:
            self._plan = self._planned(request)
        except (BadData, promql.Unsupported, InvalidPercentileQuery) as exc:
            raise exceptions.ParseError(str(exc)) from None

    def _planned(
        self, request: Request
    ) -> tuple[list[catalogue.Series], evaluation.Grid, dt.datetime]:
        now = timezone.now()
        start, end = self.moment(request, "start"), self.moment(request, "end")
        if end < start:
            raise BadData('invalid parameter "end": end timestamp must not be before start time')
        step = self._step(request)
        query = promql.parse(self.param(request, "query") or "")
        if isinstance(query, promql.Scalar):
            raise BadData("A range query needs a series selector.")
        chosen = catalogue.select(request.user, query)
        grid = evaluation.range_grid(start, end, step, _stages_per_pipeline(chosen), now)
        return chosen, grid, now

    def answer(self, request: Request, **kwargs: Any) -> Response:
        chosen, grid, now = self._plan
        samples = evaluation.values(request.user, chosen, grid, now)
        result = [
            {"metric": _labels(entry), "values": [[t, _number(v)] for t, v in found]}
            for entry, found in zip(chosen, samples, strict=True)
            if found
        ]
        return _success({"resultType": "matrix", "result": result})

    def _step(self, request: Request) -> dt.timedelta:
        text = self.param(request, "step")
        if text is None:
            raise BadData('missing parameter "step"')
        try:
            return bounds.DurationTextField().run_validation(text)
        except serializers.ValidationError as exc:
            raise BadData(f'invalid parameter "step": {_first(exc)}') from None


class LabelsView(PrometheusView):
    """``/api/v1/labels``: the label names (of the ``match[]`` series, when given)."""

    def answer(self, request: Request, **kwargs: Any) -> Response:
        chosen = self.matched(request)
        if chosen is None:
            return _success(list(catalogue.LABELS))
        return _success(sorted({name for entry in chosen for name in _labels(entry)}))


class LabelValuesView(PrometheusView):
    """``/api/v1/label/<name>/values``: the values of a label among the user's series."""

    def answer(self, request: Request, **kwargs: Any) -> Response:
        name = kwargs["label_name"]
        chosen = self.matched(request)
        if chosen is None:
            return _success(catalogue.label_values(request.user, name))
        return _success(sorted({entry.labels[name] for entry in chosen if entry.labels.get(name)}))


class SeriesView(PrometheusView):
    """``/api/v1/series``: the label sets of the ``match[]`` series."""

    def answer(self, request: Request, **kwargs: Any) -> Response:
        chosen = self.matched(request)
        if chosen is None:
            raise BadData("no match[] parameter provided")
        return _success([_labels(entry) for entry in chosen])


class MetadataView(PrometheusView):
    """``/api/v1/metadata``: the type and help of each metric, for editors' hints."""

    def answer(self, request: Request, **kwargs: Any) -> Response:
        return _success(
            {
                name: [{"type": "gauge", "help": text, "unit": ""}]
                for name, text in catalogue.METRICS.items()
            }
        )


class BuildInfoView(PrometheusView):
    """``/api/v1/status/buildinfo``: what Grafana reads to know the server's dialect."""

    def answer(self, request: Request, **kwargs: Any) -> Response:
        return _success(BUILD_INFO)

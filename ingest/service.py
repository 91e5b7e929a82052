"""The export operation shared by OTLP/HTTP (both listeners) and OTLP/gRPC.

Order of checks: media type, token, size, decoding, rate limit, storage. Every failure maps
to the status the OTLP specification gives it, and nothing a client sends can cause a 500.
A ``200`` is only returned once the spans are committed.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import psycopg
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest import bodies, decoding, otlp_json, responses
from ingest import metrics as m
from ingest.auth import TokenDirectory, TokenGrant, token_from_headers
from ingest.ratelimit import SpanRateLimiter
from ingest.writer import DatabaseUnavailable, SpanWriter
from latencyboard.rollups.waking import FoldWaker

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 2
# gRPC status codes (grpc.StatusCode values), kept numeric so this module needs no grpc import.
GRPC_OK, GRPC_INVALID_ARGUMENT, GRPC_RESOURCE_EXHAUSTED = 0, 3, 8
GRPC_UNAVAILABLE, GRPC_UNAUTHENTICATED = 14, 16


@dataclass(frozen=True)
class Outcome:
    """What to answer: an HTTP status and, for gRPC, the equivalent code."""

    http_status: int
    grpc_code: int
    message: str = ""
    rejected_spans: int = 0
    retry_after: int | None = None
    stored: int = 0

    @property
    def ok(self) -> bool:
        return self.http_status == 200


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


def _failure(http_status: int, grpc_code: int, message: str, **extra: object) -> Outcome:
    return Outcome(http_status=http_status, grpc_code=grpc_code, message=message, **extra)  # type: ignore[arg-type]


class IngestService:
    def __init__(
        self,
        writer: SpanWriter,
        *,
        max_body_bytes: int,
        retention_days: int,
        max_future_seconds: int = 3600,
        rate_limiter: SpanRateLimiter | None = None,
        fold_waker: FoldWaker | None = None,
    ) -> None:
        self.writer = writer
        self.fold_waker = fold_waker or FoldWaker()
        self.tokens = TokenDirectory(writer.pool)
        self.rate_limiter = rate_limiter or SpanRateLimiter()
        self.max_body_bytes = max_body_bytes
        self.limits = decoding.Limits(
            max_future_ns=max_future_seconds * 10**9,
            max_age_ns=retention_days * 86_400 * 10**9,
        )

    def _authenticate(self, token: str | None) -> TokenGrant | Outcome:
        if token is None:
            return _failure(401, GRPC_UNAUTHENTICATED, "missing ingest token")
        try:
            grant = self.tokens.grant_for(token)
        except (psycopg.OperationalError, TimeoutError):
            m.DB_ERRORS.inc()
            return _failure(
                503, GRPC_UNAVAILABLE, "database unavailable", retry_after=RETRY_AFTER_SECONDS
            )
        if grant is None:
            return _failure(401, GRPC_UNAUTHENTICATED, "unknown or revoked ingest token")
        return grant

    def _store(self, grant: TokenGrant, decoded: decoding.DecodedExport, protocol: str) -> Outcome:
        if grant.rate_limit is not None and decoded.spans:
            wait = self.rate_limiter.retry_after(grant.key, grant.rate_limit, len(decoded.spans))
            if wait > 0:
                return _failure(
                    429,
                    GRPC_RESOURCE_EXHAUSTED,
                    "rate limit of this ingest token",
                    retry_after=max(1, round(wait)),
                )
        stored = 0
        if decoded.spans:
            try:
                result = self.writer.write(
                    grant.team_id,
                    decoded.spans,
                    rejected=decoded.rejected_spans,
                    protocol=protocol,
                    received_at=dt.datetime.now(dt.UTC),
                )
            except DatabaseUnavailable as exc:
                m.DB_ERRORS.inc()
                logger.warning("ingest.db_unavailable", extra={"error": str(exc)})
                return _failure(
                    503,
                    GRPC_UNAVAILABLE,
                    "database unavailable, retry later",
                    retry_after=RETRY_AFTER_SECONDS,
                )
            stored = result.stored
            if stored:
                self.fold_waker.wake()
            m.SPANS_STORED.labels(protocol).inc(result.stored)
            m.SPANS_DUPLICATE.labels(protocol).inc(result.duplicates)
        m.SPANS_REJECTED.labels(protocol).inc(decoded.rejected_spans)
        m.BATCH_SPANS.observe(len(decoded.spans) + decoded.rejected_spans)
        return Outcome(
            http_status=200,
            grpc_code=GRPC_OK,
            message=decoded.error_message,
            rejected_spans=decoded.rejected_spans,
            stored=stored,
        )

    def export_http(
        self,
        body: bytes,
        headers: Mapping[str, str],
    ) -> HttpReply:
        """Answer one OTLP/HTTP export; ``headers`` has lower-case names."""
        started = time.perf_counter()
        try:
            fmt = bodies.format_of(headers.get("content-type"))
        except bodies.UnsupportedMediaType as exc:
            return self._reply("json", _failure(415, GRPC_INVALID_ARGUMENT, str(exc)), started)
        outcome = self._export_http(fmt, body, headers)
        return self._reply(fmt, outcome, started)

    def too_large_reply(self, headers: Mapping[str, str]) -> HttpReply:
        """The 413 for a body whose bytes on the wire already pass the cap."""
        try:
            fmt = bodies.format_of(headers.get("content-type"))
        except bodies.UnsupportedMediaType:
            fmt = "json"
        message = f"body is larger than {self.max_body_bytes} bytes"
        return self._reply(
            fmt, _failure(413, GRPC_RESOURCE_EXHAUSTED, message), time.perf_counter()
        )

    def _export_http(self, fmt: bodies.Format, body: bytes, headers: Mapping[str, str]) -> Outcome:
        grant = self._authenticate(token_from_headers(headers))
        if isinstance(grant, Outcome):
            return grant
        try:
            raw = bodies.decompress(body, headers.get("content-encoding"), self.max_body_bytes)
        except bodies.BodyTooLarge as exc:
            return _failure(413, GRPC_RESOURCE_EXHAUSTED, str(exc))
        except bodies.UnsupportedMediaType as exc:
            return _failure(415, GRPC_INVALID_ARGUMENT, str(exc))
        except bodies.MalformedBody as exc:
            return _failure(400, GRPC_INVALID_ARGUMENT, str(exc))
        now_ns = time.time_ns()
        try:
            if fmt == "protobuf":
                decoded = decoding.decode_protobuf(raw, now_ns=now_ns, limits=self.limits)
            else:
                decoded = otlp_json.decode_json(raw, now_ns=now_ns, limits=self.limits)
        except decoding.DecodeError as exc:
            return _failure(400, GRPC_INVALID_ARGUMENT, str(exc))
        return self._store(grant, decoded, f"http/{fmt}")

    def export_grpc(
        self, request: ExportTraceServiceRequest, metadata: Mapping[str, str]
    ) -> Outcome:
        """Answer one OTLP/gRPC export; ``metadata`` has lower-case keys."""
        started = time.perf_counter()
        outcome = self._export_grpc(request, metadata)
        m.REQUESTS.labels("grpc", str(outcome.http_status)).inc()
        m.REQUEST_SECONDS.labels("grpc").observe(time.perf_counter() - started)
        return outcome

    def _export_grpc(
        self, request: ExportTraceServiceRequest, metadata: Mapping[str, str]
    ) -> Outcome:
        grant = self._authenticate(token_from_headers(metadata))
        if isinstance(grant, Outcome):
            return grant
        try:
            decoded = decoding.decode_request(request, now_ns=time.time_ns(), limits=self.limits)
        except decoding.DecodeError as exc:
            return _failure(400, GRPC_INVALID_ARGUMENT, str(exc))
        return self._store(grant, decoded, "grpc")

    def _reply(self, fmt: bodies.Format, outcome: Outcome, started: float) -> HttpReply:
        protocol = f"http/{fmt}"
        m.REQUESTS.labels(protocol, str(outcome.http_status)).inc()
        m.REQUEST_SECONDS.labels(protocol).observe(time.perf_counter() - started)
        headers = {}
        if outcome.retry_after is not None:
            headers["retry-after"] = str(outcome.retry_after)
        if outcome.ok:
            body = responses.export_response(fmt, outcome.rejected_spans, outcome.message)
        else:
            body = responses.status_response(fmt, outcome.grpc_code, outcome.message)
        return HttpReply(outcome.http_status, body, responses.CONTENT_TYPES[fmt], headers)

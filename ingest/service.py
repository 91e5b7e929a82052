"""The export operation shared by OTLP/HTTP (both listeners) and OTLP/gRPC.

Order of checks: media type, token and declared size (from the headers, before any body is
read), size, decoding, rate limit, storage. Every failure maps
to the status the OTLP specification gives it, and nothing a client sends can cause a 500.
A ``200`` is only returned once the spans are committed.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import psycopg
from django.conf import settings

from ingest import bodies, decoding, otlp_json, protobuf, responses
from ingest import metrics as m
from ingest.auth import TokenDirectory, TokenGrant, token_from_headers
from ingest.ratelimit import SpanRateLimiter
from ingest.writer import DatabaseUnavailable, SpanWriter
from latencyboard.fairness.ingest_capacity import (
    CapacityShares,
    CapacityTaken,
    Claim,
    ShareTaken,
    share_of,
)
from latencyboard.rollups.waking import FoldWaker
from latencyboard.windows import DAY, SECOND, duration_ns

logger = logging.getLogger(__name__)

SHARE_TAKEN_GRPC = (
    "this team holds its share of the ingest host's gRPC handlers while another team waits, "
    "retry later"
)
# gRPC status codes (grpc.StatusCode values), kept numeric so this module needs no grpc import.
GRPC_OK, GRPC_INVALID_ARGUMENT, GRPC_DEADLINE_EXCEEDED, GRPC_RESOURCE_EXHAUSTED = 0, 3, 4, 8
GRPC_UNAVAILABLE, GRPC_UNAUTHENTICATED = 14, 16


class MessageTimeout(Exception):
    """An OTLP/gRPC Export's message did not arrive within its deadline."""


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


@dataclass(frozen=True, slots=True)
class Admission:
    """An OTLP/HTTP export whose headers passed :meth:`IngestService.admit_http`."""

    fmt: bodies.Format
    grant: TokenGrant
    started: float  # perf_counter() when the request arrived
    max_bytes: int  # the body cap of its format, compressed on the wire and inflated


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
        grpc_threads: int = 8,
    ) -> None:
        self.writer = writer
        self.fold_waker = fold_waker or FoldWaker()
        self.tokens = TokenDirectory(writer.pool)
        self.rate_limiter = rate_limiter or SpanRateLimiter()
        self.max_body_bytes = max_body_bytes
        # Parsed JSON takes about twelve times its size in Python objects, built before any
        # cap can apply, so JSON bodies get a cap of their own.
        self.max_json_body_bytes = min(max_body_bytes, settings.INGEST_MAX_JSON_BODY_BYTES)
        self.body_timeout_seconds = settings.INGEST_BODY_TIMEOUT_SECONDS
        self.max_inflight_bytes = settings.INGEST_MAX_INFLIGHT_BYTES
        self.min_body_bytes_per_second = settings.INGEST_MIN_BODY_BYTES_PER_SECOND
        self.team_share_percent = settings.INGEST_TEAM_SHARE_PERCENT
        self.room_wait_seconds = settings.INGEST_ROOM_WAIT_SECONDS
        self.retry_after_seconds = settings.INGEST_RETRY_AFTER_SECONDS
        self.grpc_message_timeout_seconds = settings.INGEST_GRPC_MESSAGE_TIMEOUT_SECONDS
        # gRPC calls hold one of ``grpc_threads`` handler slots from their start; the server
        # runs more threads than slots (grpc_server), so another team's call is seen waiting.
        self.grpc_calls = CapacityShares(
            grpc_threads, share_of(grpc_threads, self.team_share_percent)
        )
        self.limits = decoding.Limits(
            max_attributes=settings.INGEST_ATTRIBUTE_COUNT_LIMIT,
            max_value_length=settings.INGEST_ATTRIBUTE_VALUE_LENGTH_LIMIT,
            max_items=settings.INGEST_ATTRIBUTE_ITEMS_LIMIT,
            max_depth=settings.INGEST_ATTRIBUTE_DEPTH_LIMIT,
            max_attribute_bytes=settings.INGEST_SPAN_ATTRIBUTES_SIZE_LIMIT,
            max_events=settings.INGEST_SPAN_EVENT_COUNT_LIMIT,
            max_event_attributes=settings.INGEST_EVENT_ATTRIBUTE_COUNT_LIMIT,
            max_future_ns=duration_ns(max_future_seconds * SECOND),
            max_age_ns=duration_ns(retention_days * DAY),
        )

    def _authenticate(self, token: str | None) -> TokenGrant | Outcome:
        if token is None:
            return _failure(401, GRPC_UNAUTHENTICATED, "missing ingest token")
        try:
            grant = self.tokens.grant_for(token)
        except (psycopg.OperationalError, TimeoutError):
            m.DB_ERRORS.inc()
            return _failure(
                503, GRPC_UNAVAILABLE, "database unavailable", retry_after=self.retry_after_seconds
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
        stored = refused = 0
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
                    retry_after=self.retry_after_seconds,
                )
            stored, refused = result.stored, result.refused
            if stored:
                self.fold_waker.wake()
            m.SPANS_STORED.labels(protocol).inc(result.stored)
            m.ATTRIBUTES_DROPPED.labels(protocol).inc(
                sum(span.dropped_attributes for span in decoded.spans)
            )
            m.SPANS_DUPLICATE.labels(protocol).inc(result.duplicates)
            m.EVENTS_DROPPED.labels(protocol).inc(result.dropped_events)
            m.EVENT_ATTRIBUTES_DROPPED.labels(protocol).inc(result.dropped_event_attributes)
        m.SPANS_REJECTED.labels(protocol).inc(decoded.rejected_spans + refused)
        m.BATCH_SPANS.observe(len(decoded.spans) + decoded.rejected_spans)
        messages = [decoded.error_message] if decoded.error_message else []
        if refused:
            messages.append(
                f"{refused} spans refused: this team has reached its cap of "
                f"{self.writer.directory.max_pipelines} pipelines, so spans of a new "
                "service.name (or deployment.environment.name) are not stored"
            )
        return Outcome(
            http_status=200,
            grpc_code=GRPC_OK,
            message="; ".join(messages),
            rejected_spans=decoded.rejected_spans + refused,
            stored=stored,
        )

    def admit_http(self, headers: Mapping[str, str]) -> Admission | HttpReply:
        """What the headers of an OTLP/HTTP export decide, before its body is read: the media
        type (415), the token (401, or 503 while the database is down) and a declared
        ``Content-Length`` past the cap (413). ``headers`` has lower-case names.

        An anonymous client thus never makes the listener hold its body.
        """
        started = time.perf_counter()
        try:
            fmt = bodies.format_of(headers.get("content-type"))
        except bodies.UnsupportedMediaType as exc:
            return self._reply("json", _failure(415, GRPC_INVALID_ARGUMENT, str(exc)), started)
        grant = self._authenticate(token_from_headers(headers))
        if isinstance(grant, Outcome):
            return self._reply(fmt, grant, started)
        cap = self.max_json_body_bytes if fmt == "json" else self.max_body_bytes
        admission = Admission(fmt, grant, started, cap)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            return self.too_large_reply(admission)
        return admission

    def export_http(
        self, admission: Admission, body: bytes, headers: Mapping[str, str]
    ) -> HttpReply:
        """Answer one admitted OTLP/HTTP export once its body has arrived."""
        outcome = self._export_http(admission, body, headers)
        return self._reply(admission.fmt, outcome, admission.started)

    def too_large_reply(self, admission: Admission) -> HttpReply:
        """The 413 for a body whose bytes on the wire pass the cap."""
        message = f"body is larger than {admission.max_bytes} bytes"
        outcome = _failure(413, GRPC_RESOURCE_EXHAUSTED, message)
        return self._reply(admission.fmt, outcome, admission.started)

    def timeout_reply(self, admission: Admission, message: str) -> HttpReply:
        """The 408 for a body that did not arrive in time (``message`` says which bound)."""
        outcome = _failure(408, GRPC_DEADLINE_EXCEEDED, message)
        return self._reply(admission.fmt, outcome, admission.started)

    def busy_reply(self, admission: Admission, *, team_share: bool = False) -> HttpReply:
        """The 503 for a body that would pass the process's bytes in flight, or the 429 for
        one that would pass its team's share of them."""
        if team_share:
            status, code = 429, GRPC_RESOURCE_EXHAUSTED
            message = "this team's share of the ingest host's request bytes is taken"
        else:
            status, code, message = 503, GRPC_UNAVAILABLE, "too many request bytes in flight"
        outcome = _failure(
            status, code, f"{message}, retry later", retry_after=self.retry_after_seconds
        )
        return self._reply(admission.fmt, outcome, admission.started)

    def _export_http(
        self, admission: Admission, body: bytes, headers: Mapping[str, str]
    ) -> Outcome:
        try:
            raw = bodies.decompress(body, headers.get("content-encoding"), admission.max_bytes)
        except bodies.BodyTooLarge as exc:
            return _failure(413, GRPC_RESOURCE_EXHAUSTED, str(exc))
        except bodies.UnsupportedMediaType as exc:
            return _failure(415, GRPC_INVALID_ARGUMENT, str(exc))
        except bodies.MalformedBody as exc:
            return _failure(400, GRPC_INVALID_ARGUMENT, str(exc))
        now_ns = time.time_ns()
        try:
            if admission.fmt == "protobuf":
                decoded = protobuf.decode_protobuf(raw, now_ns=now_ns, limits=self.limits)
            else:
                decoded = otlp_json.decode_json(raw, now_ns=now_ns, limits=self.limits)
        except decoding.DecodeError as exc:
            return _failure(400, GRPC_INVALID_ARGUMENT, str(exc))
        return self._store(admission.grant, decoded, f"http/{admission.fmt}")

    def export_grpc(
        self,
        metadata: Mapping[str, str],
        read_message: Callable[[], bytes | None],
        cancel: Callable[[], None],
    ) -> Outcome:
        """Answer one OTLP/gRPC export; ``metadata`` has lower-case keys.

        ``read_message`` returns the request message's bytes (None when the client sent
        none) or raises :class:`MessageTimeout`; it is called only once the token is accepted
        and the call holds a handler slot, so an unauthenticated client's message is never
        read. While the message has not arrived, ``cancel`` may be called to give the slot
        back to a team waiting for one (this call's team then holds more than its share).
        """
        started = time.perf_counter()
        outcome = self._export_grpc(metadata, read_message, cancel)
        m.REQUESTS.labels("grpc", str(outcome.http_status)).inc()
        m.REQUEST_SECONDS.labels("grpc").observe(time.perf_counter() - started)
        return outcome

    def _export_grpc(
        self,
        metadata: Mapping[str, str],
        read_message: Callable[[], bytes | None],
        cancel: Callable[[], None],
    ) -> Outcome:
        grant = self._authenticate(token_from_headers(metadata))
        if isinstance(grant, Outcome):
            return grant
        try:
            claim = self.grpc_calls.take(grant.team_id, 1, wait_s=self.room_wait_seconds)
        except ShareTaken:
            return _failure(
                429, GRPC_RESOURCE_EXHAUSTED, SHARE_TAKEN_GRPC, retry_after=self.retry_after_seconds
            )
        except CapacityTaken:
            message = "every gRPC handler of this ingest host is taken, retry later"
            return _failure(503, GRPC_UNAVAILABLE, message, retry_after=self.retry_after_seconds)
        try:
            return self._export_message(grant, claim, read_message, cancel)
        finally:
            self.grpc_calls.release(claim)

    def _export_message(
        self,
        grant: TokenGrant,
        claim: Claim,
        read_message: Callable[[], bytes | None],
        cancel: Callable[[], None],
    ) -> Outcome:
        reclaimed = threading.Event()

        def reclaim() -> None:
            reclaimed.set()
            cancel()

        claim.reclaim = reclaim
        try:
            body = read_message()
        except MessageTimeout:
            seconds = self.grpc_message_timeout_seconds
            message = f"no ExportTraceServiceRequest message within {seconds} seconds"
            return _failure(408, GRPC_DEADLINE_EXCEEDED, message)
        finally:
            self.grpc_calls.settle(claim)
        if reclaimed.is_set():
            return _failure(
                429, GRPC_RESOURCE_EXHAUSTED, SHARE_TAKEN_GRPC, retry_after=self.retry_after_seconds
            )
        if body is None:
            return _failure(400, GRPC_INVALID_ARGUMENT, "no ExportTraceServiceRequest message")
        try:
            decoded = protobuf.decode_protobuf(body, now_ns=time.time_ns(), limits=self.limits)
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

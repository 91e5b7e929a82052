"""An OTLP/gRPC client that retries as the OpenTelemetry Collector's ``otlp`` exporter does.

The Collector (``exporter/otlpexporter``, ``shouldRetry``) retries CANCELLED,
DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE and DATA_LOSS, and RESOURCE_EXHAUSTED
only when the status carries ``google.rpc.RetryInfo``; it waits the RetryInfo's delay when
there is one, else its backoff. Any other code, or RESOURCE_EXHAUSTED without RetryInfo,
drops the batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc
from google.rpc import error_details_pb2, status_pb2

RETRYABLE = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
BACKOFF_S = 0.5  # the Collector starts at 5 s; shorter here, the rule is the same
ATTEMPTS = 30


@dataclass(frozen=True)
class Outcome:
    attempts: int
    dropped_with: grpc.StatusCode | None  # None: the batch was accepted


def retry_delay(error: grpc.Call) -> float | None:
    """The RetryInfo delay in the call's status details, in seconds, or None."""
    for key, value in error.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                return info.retry_delay.ToTimedelta().total_seconds()
    return None


def export_as_the_collector(
    export: Callable[..., object], body: bytes, metadata: list[tuple[str, str]]
) -> Outcome:
    """Send ``body`` over ``export`` (a stream-unary callable) until accepted or dropped."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            export(_one(body), metadata=metadata, timeout=30)
        except grpc.RpcError as error:
            code, delay = error.code(), retry_delay(error)
            retryable = code in RETRYABLE or (
                code == grpc.StatusCode.RESOURCE_EXHAUSTED and delay is not None
            )
            if not retryable:
                return Outcome(attempt, code)
            # the Collector's pause before it retries: what RetryInfo asks, else its backoff
            time.sleep(BACKOFF_S if delay is None else delay)
            continue
        return Outcome(attempt, None)
    return Outcome(ATTEMPTS, grpc.StatusCode.UNAVAILABLE)


def _one(body: bytes) -> Iterator[bytes]:
    yield body

"""The OTLP/gRPC listener (default port 4317): ``TraceService/Export``.

The unary method is served by a request-streaming handler without a deserializer: on the
wire a unary call is a stream of one message, and the handler gets a lazy iterator of raw
message bytes. So the token in the metadata is checked before the message is even read (an
anonymous client cannot make the server take in 64 MiB), and a malformed message is decoded
by the service, which answers INVALID_ARGUMENT like OTLP/HTTP's 400 and counts it. gRPC's
own deserialization answered INTERNAL ("Exception deserializing request!") before the token
was checked, outside the metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ingest.service import IngestService, MessageTimeout, Outcome

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"


class TraceService:
    def __init__(self, service: IngestService) -> None:
        self.service = service

    def export(
        self, messages: Iterator[bytes], context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        metadata = {key.lower(): value for key, value in context.invocation_metadata()}
        timeout_s = self.service.grpc_message_timeout_seconds

        def read_message() -> bytes | None:
            # A client that opens the call and sends nothing would hold this thread until it
            # gave up: past the deadline the call is cancelled, which ends the wait.
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                context.cancel()

            timer = threading.Timer(timeout_s, expire)
            timer.daemon = True
            timer.start()
            try:
                message = next(messages, None)
            except grpc.RpcError:
                message = None
            finally:
                timer.cancel()
            if expired.is_set():
                raise MessageTimeout
            return message

        outcome = self.service.export_grpc(metadata, read_message, context.cancel)
        if not outcome.ok:
            context.abort_with_status(_refusal(outcome))
        response = trace_service_pb2.ExportTraceServiceResponse()
        if outcome.rejected_spans or outcome.message:
            response.partial_success.rejected_spans = outcome.rejected_spans
            response.partial_success.error_message = outcome.message
        return response


def _refusal(outcome: Outcome) -> grpc.Status:
    """The call's status; one told to come back carries ``google.rpc.RetryInfo`` (the OTLP
    specification's throttling signal: the Collector retries ``RESOURCE_EXHAUSTED`` only
    with it) and the ``retry-after`` metadata of earlier versions."""
    status = status_pb2.Status(code=outcome.grpc_code, message=outcome.message)
    if outcome.retry_after is None:
        return rpc_status.to_status(status)
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromSeconds(outcome.retry_after)
    status.details.add().Pack(retry)
    refusal = rpc_status.to_status(status)
    return _Status(
        refusal.code,
        refusal.details,
        (*refusal.trailing_metadata, ("retry-after", str(outcome.retry_after))),
    )


class _Status(NamedTuple):
    """A ``grpc.Status`` (an interface of three attributes) with metadata of our own."""

    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


def make_server(
    service: IngestService, host: str, port: int, workers: int = 8, *, reuse_port: bool = False
) -> grpc.Server:
    """The servicer on ``host:port``; ``reuse_port`` lets several processes share the port.

    ``workers`` calls hold a handler slot at once (``IngestService.grpc_calls``); a team's
    share more threads run, so that a call of a team that finds every slot taken is seen
    waiting (and others are held to their shares) instead of queueing unseen behind them."""
    threads = workers + service.grpc_calls.share
    server = grpc.server(
        ThreadPoolExecutor(max_workers=threads, thread_name_prefix="otlp-grpc"),
        options=[
            ("grpc.max_receive_message_length", service.max_body_bytes),
            ("grpc.so_reuseport", int(reuse_port)),
        ],
    )
    export = grpc.stream_unary_rpc_method_handler(
        TraceService(service).export,
        request_deserializer=None,  # raw bytes: see the module docstring
        response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE_NAME, {"Export": export}),)
    )
    server.add_insecure_port(f"{host}:{port}")
    return server

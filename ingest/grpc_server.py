"""The OTLP/gRPC listener (default port 4317): ``TraceService/Export``.

The method is registered without a request deserializer, so the servicer receives the raw
message bytes: gRPC's own deserialization would answer a malformed message with INTERNAL
("Exception deserializing request!") before the token is checked, and outside the metrics.
The service authenticates first, then decodes, and answers INVALID_ARGUMENT like OTLP/HTTP's
400.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ingest.service import IngestService

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"


class TraceService:
    def __init__(self, service: IngestService) -> None:
        self.service = service

    def export(
        self, body: bytes, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        metadata = {key.lower(): value for key, value in context.invocation_metadata()}
        outcome = self.service.export_grpc(body, metadata)
        if not outcome.ok:
            if outcome.retry_after is not None:
                context.set_trailing_metadata((("retry-after", str(outcome.retry_after)),))
            context.abort(grpc.StatusCode(_code(outcome.grpc_code)), outcome.message)
        response = trace_service_pb2.ExportTraceServiceResponse()
        if outcome.rejected_spans or outcome.message:
            response.partial_success.rejected_spans = outcome.rejected_spans
            response.partial_success.error_message = outcome.message
        return response


def _code(number: int) -> tuple[int, str]:
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code.value
    raise ValueError(number)


def make_server(
    service: IngestService, host: str, port: int, workers: int = 8, *, reuse_port: bool = False
) -> grpc.Server:
    """The servicer on ``host:port``; ``reuse_port`` lets several processes share the port."""
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otlp-grpc"),
        options=[
            ("grpc.max_receive_message_length", service.max_body_bytes),
            ("grpc.so_reuseport", int(reuse_port)),
        ],
    )
    export = grpc.unary_unary_rpc_method_handler(
        TraceService(service).export,
        request_deserializer=None,  # raw bytes: see the module docstring
        response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE_NAME, {"Export": export}),)
    )
    server.add_insecure_port(f"{host}:{port}")
    return server

"""Structure-aware fuzzing of OTLP ingest within a fixed budget (see otlp_strategies.py).

Through the pure decoders: only ``DecodeError`` ever escapes, and every span they keep can be
encoded as a COPY row (where a lone surrogate used to fail a whole batch). Through the live
OTLP/HTTP and OTLP/gRPC listeners: a whole export is accepted, a damaged one accepted or
refused as invalid (never a 5xx or INTERNAL), the spans stored are exactly those acknowledged
(sent minus partial_success rejections), and a retry stores nothing twice.

The budget is fixed and the examples derandomized, so CI stays fast and repeatable; each test
records how many cases it ran (``record_property``, and printed with ``pytest -s``): at least
its budget, Hypothesis adds a few of its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

from ingest.decoding import DecodedExport, DecodeError
from ingest.otlp_json import decode_json
from ingest.protobuf import decode_protobuf
from latencyboard.spans.models import Span
from latencyboard.storage import span_templates, spans_copy
from tests.factories import make_team_with_token
from tests.ingest.otlp import post
from tests.ingest.otlp_strategies import (
    Tree,
    mutated_bytes,
    mutated_document,
    to_json,
    to_json_document,
    to_protobuf,
    trees,
)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
CONTENT_TYPES = {"protobuf": "application/x-protobuf", "json": "application/json"}
# What a fuzzed export may be answered: a whole one is stored, a damaged one may be refused.
ANSWERS = {"none": {200}, "bytes": {200, 400}, "structure": {200, 400}}
GRPC_REFUSALS = {"none": set(), "bytes": {grpc.StatusCode.INVALID_ARGUMENT}}


def _budget(examples: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _encode(tree: Tree, fmt: str, mutation: str, data: st.DataObject) -> bytes:
    """The request as ``fmt``, damaged by ``mutation`` (none, bytes, or a JSON value)."""
    if fmt == "protobuf":
        body = to_protobuf(tree)
    else:
        document = to_json_document(tree)
        if mutation == "structure":
            document = data.draw(mutated_document(document))
        body = to_json(document)
    return data.draw(mutated_bytes(body)) if mutation == "bytes" else body


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _spans_sent(body: bytes, fmt: str) -> int:
    """Spans in a body the server accepted (so it has the request's structure, though a span
    may be damaged inside: the server rejects that span alone, where protobuf's own parser
    refuses the whole body, so spans are counted by their fields)."""
    if fmt == "protobuf":
        return sum(
            len(_fields(scope, 2))
            for resource in _fields(body, 1)
            for scope in _fields(resource, 2)
        )
    # null reads as absent, as in the decoder.
    document = json.loads(body)
    return sum(
        len((scope or {}).get("spans") or [])
        for resource in _get(document, "resourceSpans", "resource_spans") or []
        for scope in _get(resource or {}, "scopeSpans", "scope_spans") or []
    )


def _fields(message: bytes, number: int) -> list[bytes]:
    """The length-delimited fields ``number`` of a protobuf ``message``, skipping the rest."""
    found, at = [], 0
    while at < len(message):
        key, at = _varint(message, at)
        wire_type = key & 7
        if wire_type == 0:
            _, at = _varint(message, at)
        elif wire_type in (1, 5):
            at += 8 if wire_type == 1 else 4
        elif wire_type == 2:
            size, at = _varint(message, at)
            if key >> 3 == number:
                found.append(message[at : at + size])
            at += size
        else:
            raise ValueError(f"wire type {wire_type} where the server read the request")
    return found


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _rejected(body: bytes, fmt: str) -> int:
    if fmt == "protobuf":
        return ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans
    return int(json.loads(body).get("partialSuccess", {}).get("rejectedSpans", 0))


def _assert_storable(export: DecodedExport) -> None:
    """What the writer does with each kept span must work: text columns and the COPY row."""
    for span in export.spans:
        for text in (span.name, span.status_message, span.service_name, span.environment):
            assert "\x00" not in text
            text.encode()
        if span.stage is not None:
            span.stage.encode()
        resource = span_templates.Resource.of(span.resource)
        template = span_templates.Template.of(resource.id, span.name, span.attributes)
        spans_copy.encode_span(
            1, 1, 1, template.id, span.trace_id, span.span_id, span.parent_span_id, span.kind,
            span.status_code, span.status_message, span.start_ns, span.end_ns - span.start_ns,
            span.parent_span_id is None, span.attributes,
        )  # fmt: skip


def test_decoders_raise_nothing_but_decode_error(record_property):
    cases = []

    @_budget(400)
    @given(
        trees,
        st.sampled_from(["protobuf", "json"]),
        st.sampled_from(["none", "bytes", "structure"]),
        st.data(),
    )
    def run(tree: Tree, fmt: str, mutation: str, data: st.DataObject) -> None:
        cases.append(fmt)
        body = _encode(tree, fmt, mutation, data)
        decode = decode_protobuf if fmt == "protobuf" else decode_json
        try:
            export = decode(body, now_ns=time.time_ns())
        except DecodeError:
            # Only a damaged body may be refused whole.
            assert mutation != "none"
            return
        _assert_storable(export)
        if mutation == "none":
            assert len(export.spans) + export.rejected_spans == tree.span_count()

    run()
    record_property("fuzz_cases", len(cases))
    print(f"decoders: {len(cases)} cases")
    assert len(cases) >= 400


def _fuzz_otlp_http(
    send: Callable[[bytes, dict[str, str]], tuple[int, bytes]], examples: int
) -> int:
    """Export fuzzed requests with ``send`` (body, headers) -> (status, body); the cases run.

    A whole export stored, a damaged one stored or refused with a 400 (never a 5xx); on 200
    exactly the acknowledged spans are stored, and a retry stores none.
    """
    tenant = make_team_with_token()
    cases = []

    def stored() -> int:
        return Span.objects.filter(team_id=tenant.team.id).count()

    @_budget(examples)
    @given(
        trees,
        st.sampled_from(["protobuf", "json"]),
        st.sampled_from(["none", "none", "bytes", "structure"]),
        st.data(),
    )
    def run(tree: Tree, fmt: str, mutation: str, data: st.DataObject) -> None:
        cases.append(fmt)
        body = _encode(tree, fmt, mutation, data)
        headers = {"content-type": CONTENT_TYPES[fmt], "authorization": f"Bearer {tenant.token}"}
        before = stored()
        status, answer = send(body, headers)
        assert status in ANSWERS[mutation], answer
        if status != 200:
            assert stored() == before
            return
        rejected = _rejected(answer, fmt)
        assert stored() - before == _spans_sent(body, fmt) - rejected
        status, answer = send(body, headers)
        assert (status, _rejected(answer, fmt)) == (200, rejected)
        assert stored() - before == _spans_sent(body, fmt) - rejected

    run()
    return len(cases)


@pytest.mark.django_db(transaction=True)
def test_live_http_listener_never_fails_and_stores_what_it_acknowledges(
    ingest_server, record_property
):
    def send(body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        reply = post(ingest_server.traces_url, body, headers)
        return reply.status, reply.body

    cases = _fuzz_otlp_http(send, 120)

    record_property("fuzz_cases", cases)
    print(f"live HTTP listener: {cases} cases")
    assert cases >= 120


@pytest.mark.django_db(transaction=True)
def test_web_app_route_never_fails_and_stores_what_it_acknowledges(client, record_property):
    def send(body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        others = {key: value for key, value in headers.items() if key != "content-type"}
        # CONTENT_TYPE as well: Django's test client drops the header of an empty body, which
        # an exporter would send.
        kind = headers["content-type"]
        response = client.post(
            "/v1/traces", body, content_type=kind, headers=others, CONTENT_TYPE=kind
        )
        return response.status_code, response.content

    cases = _fuzz_otlp_http(send, 60)

    record_property("fuzz_cases", cases)
    print(f"web app /v1/traces: {cases} cases")
    assert cases >= 60


@pytest.mark.django_db(transaction=True)
def test_live_grpc_listener_never_fails_and_stores_what_it_acknowledges(
    ingest_server, record_property
):
    tenant = make_team_with_token()
    metadata = [("authorization", f"Bearer {tenant.token}")]
    cases = []

    def stored() -> int:
        return Span.objects.filter(team_id=tenant.team.id).count()

    with grpc.insecure_channel(f"127.0.0.1:{ingest_server.grpc_port}") as channel:
        export = channel.unary_unary(EXPORT)

        @_budget(80)
        @given(trees, st.sampled_from(["none", "none", "bytes"]), st.data())
        def run(tree: Tree, mutation: str, data: st.DataObject) -> None:
            cases.append(mutation)
            body = _encode(tree, "protobuf", mutation, data)
            before = stored()
            call = export.future(body, metadata=metadata, timeout=30)
            if call.exception() is not None:
                assert call.code() in GRPC_REFUSALS[mutation], call.details()
                assert stored() == before
                return
            rejected = _rejected(call.result(), "protobuf")
            assert stored() - before == _spans_sent(body, "protobuf") - rejected
            assert _rejected(export(body, metadata=metadata, timeout=30), "protobuf") == rejected
            assert stored() - before == _spans_sent(body, "protobuf") - rejected

        run()
    record_property("fuzz_cases", len(cases))
    print(f"live gRPC: {len(cases)} cases")
    assert len(cases) >= 80

"""Hypothesis strategies for OTLP trace export requests, encoded as protobuf and OTLP/JSON.

A request is drawn as a small tree of plain values (:class:`Tree`), then encoded: ids of right
and wrong lengths, extreme and inverted times, nested arrays and key-value lists, huge ints,
NaN and infinities, NUL, lone surrogates (JSON only: protobuf strings cannot hold them), enum
numbers out of range. Mutations then damage the encoded bytes or the JSON structure.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

UINT64_MAX = 2**64 - 1
SECOND = 10**9
WEIRD_TEXT = ["", "\x00", "a\x00b", "\ud800", "bad\udfff", "\U0001f600", "\u202e", "é" * 300]

text = st.one_of(st.text(max_size=12), st.sampled_from(WEIRD_TEXT))
scalar = st.one_of(
    st.tuples(st.just("s"), text),
    st.tuples(st.just("i"), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just("d"), st.floats(allow_nan=True, allow_infinity=True)),
    st.tuples(st.just("b"), st.booleans()),
    st.tuples(st.just("x"), st.binary(max_size=12)),
    st.tuples(st.just("n"), st.none()),
)
any_value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.tuples(st.just("a"), st.lists(inner, max_size=4)),
        st.tuples(st.just("k"), st.lists(st.tuples(text, inner), max_size=4)),
    ),
    max_leaves=10,
)
attributes = st.lists(st.tuples(text, any_value), max_size=5)


@st.composite
def _id(draw: st.DrawFn, size: int) -> bytes:
    """Mostly a fresh random id of the right size (so examples never collide), sometimes all
    zero, empty, or of a wrong length."""
    kind = draw(st.sampled_from(["fresh"] * 6 + ["zero", "empty", "short", "long"]))
    if kind == "zero":
        return bytes(size)
    if kind == "empty":
        return b""
    if kind == "short":
        return os.urandom(draw(st.integers(1, size - 1)))
    if kind == "long":
        return os.urandom(size + draw(st.integers(1, 8)))
    # Drawn from os.urandom at draw time rather than from Hypothesis: examples of the live
    # tests must not store over each other's spans.
    return os.urandom(size)


# Offsets from "now" in nanoseconds: recent, far past, far future, and the extremes.
_offset = st.one_of(
    st.integers(-3600 * SECOND, 0),
    st.sampled_from([-(10**20), -(10**18), 10**15, 10**20]),
)
_duration = st.one_of(st.integers(0, 10 * SECOND), st.integers(-SECOND, -1), st.just(UINT64_MAX))


@dataclass(frozen=True)
class SpanTree:
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    name: str
    kind: int
    start: int  # clamped to uint64
    end: int
    status_code: int
    status_message: str
    attributes: list[tuple[str, Any]]
    dropped: int


@dataclass(frozen=True)
class Tree:
    resources: list[tuple[list[tuple[str, Any]], list[SpanTree]]]

    def span_count(self) -> int:
        return sum(len(spans) for _, spans in self.resources)


@st.composite
def span_trees(draw: st.DrawFn) -> SpanTree:
    now = time.time_ns()
    start = draw(st.one_of(_offset.map(lambda o: now + o), st.sampled_from([0, UINT64_MAX])))
    end = start + draw(_duration)
    clamp = lambda value: min(max(value, 0), UINT64_MAX)  # noqa: E731
    return SpanTree(
        trace_id=draw(_id(16)),
        span_id=draw(_id(8)),
        parent_span_id=draw(st.one_of(st.just(b""), _id(8))),
        name=draw(text),
        kind=draw(st.integers(-1, 9)),
        start=clamp(start),
        end=clamp(end),
        status_code=draw(st.integers(-1, 5)),
        status_message=draw(text),
        attributes=draw(attributes),
        dropped=draw(st.integers(0, 2**32 - 1)),
    )


trees = st.builds(
    Tree,
    st.lists(st.tuples(attributes, st.lists(span_trees(), max_size=4)), min_size=1, max_size=2),
)


# --- protobuf ----------------------------------------------------------------------------------


def _pb_text(value: str) -> str:
    # A lone surrogate cannot be encoded in a protobuf string at all.
    return value.encode("utf-8", "replace").decode("utf-8")


def _pb_any(value: tuple[str, Any]) -> AnyValue:
    kind, raw = value
    if kind == "s":
        return AnyValue(string_value=_pb_text(raw))
    if kind == "i":
        return AnyValue(int_value=raw)
    if kind == "d":
        return AnyValue(double_value=raw)
    if kind == "b":
        return AnyValue(bool_value=raw)
    if kind == "x":
        return AnyValue(bytes_value=raw)
    if kind == "a":
        return AnyValue(array_value=ArrayValue(values=[_pb_any(item) for item in raw]))
    if kind == "k":
        return AnyValue(kvlist_value=KeyValueList(values=_pb_attributes(raw)))
    return AnyValue()


def _pb_attributes(pairs: list[tuple[str, Any]]) -> list[KeyValue]:
    return [KeyValue(key=_pb_text(key), value=_pb_any(value)) for key, value in pairs]


def to_protobuf(tree: Tree) -> bytes:
    request = ExportTraceServiceRequest()
    for resource_attributes, spans in tree.resources:
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(_pb_attributes(resource_attributes))
        scope_spans = resource_spans.scope_spans.add()
        for span in spans:
            pb_span = scope_spans.spans.add(
                trace_id=span.trace_id,
                span_id=span.span_id,
                parent_span_id=span.parent_span_id,
                name=_pb_text(span.name),
                kind=span.kind,
                start_time_unix_nano=span.start,
                end_time_unix_nano=span.end,
                attributes=_pb_attributes(span.attributes),
                dropped_attributes_count=span.dropped,
            )
            pb_span.status.code = span.status_code
            pb_span.status.message = _pb_text(span.status_message)
    return request.SerializeToString()


# --- OTLP/JSON ---------------------------------------------------------------------------------


def _json_any(value: tuple[str, Any]) -> dict[str, Any]:
    kind, raw = value
    if kind == "s":
        return {"stringValue": raw}
    if kind == "i":
        return {"intValue": str(raw)}
    if kind == "d":
        return {"doubleValue": raw if raw == raw and abs(raw) != float("inf") else str(raw)}
    if kind == "b":
        return {"boolValue": raw}
    if kind == "x":
        return {"bytesValue": base64.b64encode(raw).decode()}
    if kind == "a":
        return {"arrayValue": {"values": [_json_any(item) for item in raw]}}
    if kind == "k":
        return {"kvlistValue": {"values": _json_attributes(raw)}}
    return {}


def _json_attributes(pairs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _json_any(value)} for key, value in pairs]


def to_json_document(tree: Tree) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _json_attributes(resource_attributes)},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": span.trace_id.hex(),
                                "spanId": span.span_id.hex(),
                                "parentSpanId": span.parent_span_id.hex(),
                                "name": span.name,
                                "kind": span.kind,
                                "startTimeUnixNano": str(span.start),
                                "endTimeUnixNano": str(span.end),
                                "status": {
                                    "code": span.status_code,
                                    "message": span.status_message,
                                },
                                "attributes": _json_attributes(span.attributes),
                                "droppedAttributesCount": span.dropped,
                            }
                            for span in spans
                        ]
                    }
                ],
            }
            for resource_attributes, spans in tree.resources
        ]
    }


def to_json(document: Any) -> bytes:
    # ensure_ascii spells a lone surrogate as the escape "\ud800", as a careless encoder would.
    return json.dumps(document).encode("ascii")


# --- mutations ---------------------------------------------------------------------------------

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), text)
json_junk = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=5,
)


@st.composite
def mutated_document(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one value somewhere inside replaced by arbitrary JSON."""
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        children = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in children:
            paths.append((node, key))
            if isinstance(child, (dict, list)):
                walk(child)

    walk(document)
    if paths:
        parent, key = draw(st.sampled_from(paths))
        parent[key] = draw(json_junk)
    return document


@st.composite
def mutated_bytes(draw: st.DrawFn, body: bytes) -> bytes:
    """``body`` truncated, or with a few bytes flipped, inserted or deleted."""
    data = bytearray(body)
    for _ in range(draw(st.integers(1, 4))):
        operation = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if operation == "flip" and data:
            data[position] ^= draw(st.integers(1, 255))
        elif operation == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=4))
        elif operation == "delete" and data:
            del data[position]
        elif operation == "truncate":
            del data[position:]
    return bytes(data)

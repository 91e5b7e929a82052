"""OTLP attribute values (``AnyValue``) as JSON-serialisable Python values, capped (pure).

The protobuf conversion and its byte-budget measure live here; the JSON front end
(:mod:`ingest.otlp_json`) has its own walkers over parsed JSON and shares the scalar rules.
"""

import base64
import math

from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ingest.limits import Limits

__all__ = ["COMPOUND", "bytes_value", "float_value", "pb_member", "pb_size", "pb_value"]


def float_value(number: float) -> object:
    # NaN and the infinities are not JSON (PostgreSQL jsonb rejects them); use the
    # strings the proto3 JSON mapping uses for them.
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def bytes_value(raw: bytes, max_len: int) -> str:
    # Truncate the bytes, not the base64 text, so the result stays valid base64.
    return base64.b64encode(raw[: max_len // 4 * 3]).decode("ascii")


COMPOUND = frozenset(("array_value", "kvlist_value"))


def pb_value(value: AnyValue, limits: Limits, depth: int) -> object:
    """Convert an OTLP ``AnyValue`` message to a JSON-serialisable, capped Python value."""
    # Most values are strings, and a non-empty string_value can only mean the string
    # member of the oneof is set: that spares the WhichOneof call for them.
    text = value.string_value
    if text:
        max_len = limits.max_value_length
        return text if len(text) <= max_len else text[:max_len]
    return pb_member(value, value.WhichOneof("value"), limits, depth)


def pb_member(value: AnyValue, kind: str | None, limits: Limits, depth: int) -> object:
    if kind == "string_value":
        return value.string_value[: limits.max_value_length]
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return float_value(value.double_value)
    if kind in COMPOUND:
        if depth >= limits.max_depth:
            return None
        # Slicing a repeated field wraps only the elements kept.
        if kind == "array_value":
            items = value.array_value.values[: limits.max_items]
            return [pb_value(item, limits, depth + 1) for item in items]
        pairs = value.kvlist_value.values[: limits.max_items]
        return {kv.key: pb_value(kv.value, limits, depth + 1) for kv in pairs}
    if kind == "bytes_value":
        return bytes_value(value.bytes_value, limits.max_value_length)
    return None  # an empty AnyValue is OTLP's null


def pb_size(value: AnyValue, max_len: int, budget: int) -> int:
    """The byte-budget cost of an ``AnyValue`` (see :mod:`ingest.limits`), counted only until
    past ``budget``: a huge array costs a length read, not a Python object per element."""
    total = 0
    stack = [value]
    while stack and total <= budget:
        value = stack.pop()
        text = value.string_value
        if text:
            total += min(len(text), max_len)
            continue
        kind = value.WhichOneof("value")
        if kind == "array_value":
            items = value.array_value.values
            total += len(items)
            if total <= budget:
                stack.extend(items)
        elif kind == "kvlist_value":
            pairs = value.kvlist_value.values
            total += len(pairs)
            if total <= budget:
                for kv in pairs:
                    total += len(kv.key)
                    stack.append(kv.value)
        elif kind == "bytes_value":
            total += min(len(value.bytes_value) * 4 // 3, max_len)
        else:
            total += 8
    return total

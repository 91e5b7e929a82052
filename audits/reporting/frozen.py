"""A report's figures as they stood at its ``as_of``, kept as JSON beside its files (pure).

``verify_report`` renders the files again from them: late data never changes a finished
report. Decoding follows the dataclasses' type hints, so the JSON names no class to build.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import types
import typing
from decimal import Decimal
from typing import Any

from audits.reporting.figures import ReportData


def _plain(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def dumps(data: ReportData) -> bytes:
    """``data`` as JSON; floats keep their exact value (Python prints the shortest repr)."""
    return json.dumps(_plain(data), sort_keys=True, separators=(",", ":")).encode()


def _typed(kind: Any, value: Any) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):
        if value is None:
            return None
        return _typed(next(a for a in args if a is not type(None)), value)
    if origin is tuple:
        item = args[0]
        return tuple(_typed(item, v) for v in value)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        # A field added later keeps its default in figures frozen before it.
        return kind(
            **{
                f.name: _typed(hints[f.name], value[f.name])
                for f in dataclasses.fields(kind)
                if f.name in value
            }
        )
    if kind is dt.datetime:
        return dt.datetime.fromisoformat(value)
    if kind is Decimal:
        return Decimal(value)
    if kind is float:
        return float(value)
    return value


def loads(content: bytes) -> ReportData:
    """The figures :func:`dumps` wrote."""
    result: ReportData = _typed(ReportData, json.loads(content))
    return result

"""Renderers and content negotiation of the JSON APIs whose answers can be large: the
pipeline charts (``latencyboard.dashboards.api``) and the Prometheus queries."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import orjson
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer

_LINE_SEPARATORS = (("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


class OrjsonRenderer(JSONRenderer):
    """DRF's compact JSON, written by orjson: a week of hourly points of 7 stages (~250 KiB)
    in a tenth of the time of ``json.dumps``.

    Same bytes as :class:`JSONRenderer` but for floats below 1e-4, which orjson writes in
    their shortest round-trip form too, just spelt differently (``1e-7`` for ``1e-07``),
    and NaN, which it writes as null where DRF refuses it. Indented output (``; indent=``,
    the browsable API) is left to :class:`JSONRenderer`.
    """

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None or self.get_indent(accepted_media_type or "", renderer_context or {}):
            return super().render(data, accepted_media_type, renderer_context)
        body = orjson.dumps(data, default=self.encoder_class().default)
        # As JSONRenderer: U+2028 and U+2029 escaped, so that the output is valid JavaScript.
        # Their common first byte is looked for first (memchr), as it is seldom there.
        if b"\xe2" in body:
            for character, escaped in _LINE_SEPARATORS:
                body = body.replace(character, escaped)
        return body


class ShapeNegotiation(DefaultContentNegotiation):
    """Content negotiation by the Accept header alone: ``format`` names the answer's shape
    (``format=long``) on these views, not a renderer as DRF reads it by default."""

    settings = SimpleNamespace(URL_FORMAT_OVERRIDE=None)  # type: ignore[assignment]

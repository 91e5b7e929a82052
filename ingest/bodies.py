"""Request bodies: content types and bounded decompression (pure)."""

from __future__ import annotations

import zlib
from typing import Literal

Format = Literal["protobuf", "json"]


class UnsupportedMediaType(ValueError):
    pass


class BodyTooLarge(ValueError):
    pass


class MalformedBody(ValueError):
    pass


def format_of(content_type: str | None) -> Format:
    """``protobuf`` or ``json`` from a Content-Type header; anything else is a 415."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type == "application/x-protobuf":
        return "protobuf"
    if media_type == "application/json":
        return "json"
    raise UnsupportedMediaType(
        f"unsupported content type {content_type!r}: use application/x-protobuf or application/json"
    )


def decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """Inflate ``body`` per ``Content-Encoding``, never producing more than ``max_bytes``.

    Inflation stops as soon as the output passes the cap, so a gzip bomb costs at most
    ``max_bytes`` of memory and the time to produce it.
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        if len(body) > max_bytes:
            raise BodyTooLarge(f"body is larger than {max_bytes} bytes")
        return body
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        # RFC 9110's "deflate" is zlib-wrapped, but some clients send raw deflate.
        wbits = zlib.MAX_WBITS if body[:1] and (body[0] & 0x0F) == 8 else -zlib.MAX_WBITS
    else:
        raise UnsupportedMediaType(
            f"unsupported content encoding {content_encoding!r}: use gzip, deflate or none"
        )
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise MalformedBody(f"body is not valid {encoding}: {exc}") from None
    if len(out) > max_bytes:
        raise BodyTooLarge(f"body inflates to more than {max_bytes} bytes")
    if not inflater.eof:
        raise MalformedBody(f"{encoding} body is truncated")
    return out

"""Prometheus' error shape, by HTTP status (pure: no Django).

Prometheus answers ``{"status": "error", "errorType": …, "error": …}``: ``bad_data`` with 400
for a query or parameter it cannot read, ``execution`` with 422 for one it cannot evaluate,
``unavailable`` or ``timeout`` with 503, ``not_found`` with 404, ``internal`` with 500.
"""

from __future__ import annotations

from typing import Any, Final

PREFIX: Final = "/prometheus/"
_KINDS: Final = {
    401: "unauthorized",
    403: "unauthorized",
    404: "not_found",
    422: "execution",
    429: "unavailable",
    503: "unavailable",
}


def error_type(status: int) -> str:
    """The ``errorType`` Prometheus gives an error answered with ``status``."""
    return _KINDS.get(status, "internal" if status >= 500 else "bad_data")


def error_body(status: int, message: str) -> dict[str, Any]:
    """The body of an error answered with ``status``."""
    return {"status": "error", "errorType": error_type(status), "error": message}

"""Typed readers for settings taken from the environment.

Each reader also accepts ``NAME_FILE`` (a path whose contents are the value), so secrets can be
mounted as files by Docker or Kubernetes instead of living in the process environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str, environ: Mapping[str, str]) -> str | None:
    path = environ.get(f"{name}_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from exc
    return environ.get(name)


def env_str(name: str, default: str = "", environ: Mapping[str, str] = os.environ) -> str:
    value = _raw(name, environ)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool, environ: Mapping[str, str] = os.environ) -> bool:
    value = _raw(name, environ)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true/false)")


def env_int(
    name: str,
    default: int,
    environ: Mapping[str, str] = os.environ,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    value = _raw(name, environ)
    if value is None or value == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above the maximum {maximum}")
    return number


def env_list(name: str, default: str = "", environ: Mapping[str, str] = os.environ) -> list[str]:
    """A comma-separated list; blanks are dropped."""
    return [item.strip() for item in env_str(name, default, environ).split(",") if item.strip()]

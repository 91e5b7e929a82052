"""Serve the full Plotly.js bundle from the installed ``plotly`` package: no CDN.

Only the trace page needs it (its icicle); the other pages load the basic bundle vendored in
``static/vendor/``, at the same plotly.js version (a test checks).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage
from django.core.files.storage import FileSystemStorage

STATIC_PATH = "vendor/plotly.min.js"
_SOURCE = Path(plotly.__file__).parent / "package_data"


class PlotlyFinder(BaseFinder):
    """Finds ``vendor/plotly.min.js`` and nothing else of the package's data."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.storage = FileSystemStorage(location=str(_SOURCE))
        self.storage.prefix = "vendor"  # type: ignore[attr-defined]

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        return []

    def find(  # type: ignore[override]
        self, path: str, find_all: bool = False, **kwargs: Any
    ) -> str | list[str]:
        if path != STATIC_PATH:
            return [] if find_all else ""
        found = str(_SOURCE / "plotly.min.js")
        return [found] if find_all else found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield "plotly.min.js", self.storage

"""Collected static files: hashed names, gzip and brotli, each file compressed only once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from whitenoise.compress import Compressor
from whitenoise.storage import CompressedManifestStaticFilesStorage


class CollectedStaticStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's manifest storage, for `make run` as for production, and cheap
    enough to collect on every start.

    Brotli at its best level takes about two seconds per megabyte here, and Plotly alone is
    five. A hashed name fixes the file's content, so a ``.gz`` next to it (the compressor
    writes it last) from an earlier run is still right; source maps are fetched only by
    developer tools, so they are left uncompressed.
    """

    def url(self, name: str | None, force: bool = False) -> str:
        # Django gives unhashed names under DEBUG, for its own static view; with DEBUG on and
        # STATIC_COLLECTED, these collected files exist only under hashed names.
        return super().url(name, force=True)

    def compress_files(self, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
        pending = [path for path in paths if not self.exists(f"{path}.gz")]
        return super().compress_files(pending)

    def create_compressor(self, **kwargs: Any) -> Compressor:
        skipped = kwargs.pop("extensions", None) or Compressor.SKIP_COMPRESS_EXTENSIONS
        return Compressor(extensions=[*skipped, "map"], **kwargs)

"""Secrets a local start generates and keeps in files only their owner reads (no Django here).

Each is created mode 0600 from the start (never written first and narrowed after), so no other
user of the host can open it even for a moment.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def private_dir(path: Path) -> Path:
    """``path``, created if missing, that only its owner may list or enter (mode 0700)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def write_secret(path: Path, value: str) -> None:
    """Keep ``value`` in ``path``, mode 0600 (also when the file was there, wider, before)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")


def secret(path: Path, nbytes: int = 24) -> str:
    """The secret kept in ``path``, generated (``nbytes`` random bytes, URL-safe) on first use.

    Processes that ask for it at once all get the one linked into place first: it is written
    whole under a name of its own before it appears under ``path``.
    """
    if not path.exists():
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        write_secret(draft, secrets.token_urlsafe(nbytes))
        try:
            with contextlib.suppress(FileExistsError):
                os.link(draft, path)
        finally:
            draft.unlink()
    return path.read_text().strip()

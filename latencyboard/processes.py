"""Helpers for the child processes we start (no Django here)."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn``: the kernel sends SIGTERM to the child when its parent dies (even by -9)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

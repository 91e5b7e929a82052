"""Helpers for the child processes we start (no Django here)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn``: the kernel sends SIGTERM to the child when its parent dies (even by -9)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def release_freed_memory() -> bool:
    """Hand the pages the C heap holds free back to the kernel (glibc's ``malloc_trim``).

    glibc keeps freed memory for reuse and returns only the top of the heap: after a task
    that briefly held a few hundred MB (numpy arrays, a large query result), a long-lived
    worker would otherwise stay that size, each task's peak raising it for good. Whether
    anything was released; False where the C library has no ``malloc_trim`` (musl, macOS).
    """
    trim = getattr(_libc(), "malloc_trim", None)
    return bool(trim(0)) if trim is not None else False


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"))

"""Helpers for the child processes we start (no Django here)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import signal
import sys

_PR_SET_PDEATHSIG = 1
GIL_SWITCH_SECONDS = 0.0005


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


def hand_back_the_gil_soon() -> None:
    """Make a thread running Python hand the GIL to a waiting one after 0.5 ms, not 5 ms.

    A server's thread whose database answer has come back waits for the GIL while another
    thread computes. At CPython's default 5 ms switch interval a request of many round trips
    waits up to that long after each: one long computation (another team's 30-day read, a
    large export's decoding) slowed a 20-query page ~5x in the web's fairness benchmark. The
    price is more switches while threads compute side by side.
    """
    sys.setswitchinterval(GIL_SWITCH_SECONDS)


def keep_loaded_objects_out_of_the_collector() -> None:
    """Move what a server has loaded by now (Django, its apps, the URLconf: 150,000-odd
    objects that live as long as the process) out of the cyclic garbage collector's sight.

    A full collection walks every tracked object: 100-150 ms for a web process, with every
    thread of it stopped meanwhile. Another team's large reads allocate enough to trigger one
    every few seconds, and each stalled the pages of every team served by that process. Freed
    garbage is collected first, so none is kept for good.
    """
    gc.collect()
    gc.freeze()

"""Per-token span rate limits: token buckets that the ingest processes of one host share.

The buckets live in a small table of fixed-size slots in memory that every worker of
``python -m ingest --processes N`` maps from one file (the supervisor creates it), so N workers
enforce one limit rather than N. Without a file (a single process) the table is anonymous
memory. Nothing here touches Redis or PostgreSQL: a take is a hash, a lock and a few struct
reads, and ingest keeps limiting when both are down.

A slot holds 16 bytes of the key's hash, the bucket's level (spans) and when it was last
updated (``time.monotonic``, one clock for every process of a host). A key's slot is looked for
among ``PROBES`` slots from its hash. A bucket left alone for ``burst_seconds`` has refilled to
at least its capacity, the same as a new one, so its slot is free to reuse; when none of the
probed slots is free, that key gets a bucket of this process alone (the per-process limit of
old), and that is logged once per process.

Across hosts nothing is shared: each host enforces a token's limit on its own, so ``hosts``
divides the limit for deployments that spread one token over several ingest hosts.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import mmap
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)

SLOTS = 4096
PROBES = 8
_HEADER = struct.Struct("<8sI4x")
_MAGIC = b"LBRATE01"
_SLOT = struct.Struct("<16sdd")
_EMPTY = bytes(16)


def table_size(slots: int = SLOTS) -> int:
    return _HEADER.size + slots * _SLOT.size


def create_table(directory: str | None = None, slots: int = SLOTS) -> str:
    """A new, empty bucket table file for the workers of one supervisor; returns its path.

    Raises ``OSError`` when it cannot be written.
    """
    fd, path = tempfile.mkstemp(prefix="latencyboard-ingest-rate-limits-", dir=directory)
    try:
        os.write(fd, _HEADER.pack(_MAGIC, slots))
        os.ftruncate(fd, table_size(slots))
    except OSError:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return path


class _Table:
    """The slots, in a shared file mapping or in anonymous memory, and the lock guarding them."""

    def __init__(self, path: str | None) -> None:
        # fcntl locks exclude other processes only; threads of this one take this lock first.
        self._thread_lock = threading.Lock()
        self._fd: int | None = None
        if path is None:
            self.slots = SLOTS
            self._map = mmap.mmap(-1, table_size())
            return
        fd = os.open(path, os.O_RDWR)
        try:
            magic, slots = _HEADER.unpack(os.pread(fd, _HEADER.size, 0))
            if magic != _MAGIC or os.fstat(fd).st_size != table_size(slots):
                raise OSError(f"{path} is not a rate limit table")
            self._map = mmap.mmap(fd, table_size(slots))
        except (OSError, struct.error):
            os.close(fd)
            raise
        self._fd, self.slots = fd, slots

    @property
    def shared(self) -> bool:
        return self._fd is not None

    @contextmanager
    def locked(self) -> Iterator[mmap.mmap]:
        with self._thread_lock:
            if self._fd is None:
                yield self._map
                return
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield self._map
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)


@dataclass
class _Bucket:
    level: float
    updated: float


class SpanRateLimiter:
    """Allows ``rate`` spans per second per key, with bursts up to ``burst_seconds`` worth.

    ``table_path`` names a table from ``create_table`` to share with the other processes of
    this host; without it (or when it cannot be opened, which is logged) limits are this
    process's own. ``hosts`` divides every rate: set it to the number of ingest hosts one
    token's traffic is spread over, so that together they allow about the token's limit.
    """

    def __init__(
        self,
        burst_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        table_path: str | None = None,
        hosts: int = 1,
    ) -> None:
        self._burst_seconds = burst_seconds
        self._clock = clock
        self._hosts = hosts
        self._table = _open_table(table_path)
        self._own: dict[str, _Bucket] = {}
        self._full_logged = False

    @property
    def shared(self) -> bool:
        """Whether the buckets are shared with other processes."""
        return self._table.shared

    def retry_after(self, key: str, rate: float, spans: int) -> float:
        """0 when ``spans`` may pass now (and takes them), else seconds until they could."""
        rate = rate / self._hosts
        capacity = max(rate * self._burst_seconds, float(spans))
        key_hash = hashlib.blake2b(key.encode(), digest_size=16).digest()
        first = int.from_bytes(key_hash[:8], "little") % self._table.slots
        with self._table.locked() as table:
            # Read the clock under the lock: a process that waited must not see another's
            # later update as being in its future.
            now = self._clock()
            offset = self._slot_for(table, key_hash, first, now)
            if offset is None:
                bucket = self._own_bucket(key, capacity, now)
                return _take(bucket, rate, capacity, spans, now)
            slot_hash, level, updated = _SLOT.unpack_from(table, offset)
            if slot_hash != key_hash:
                level, updated = capacity, now
            bucket = _Bucket(level=level, updated=updated)
            wait = _take(bucket, rate, capacity, spans, now)
            _SLOT.pack_into(table, offset, key_hash, bucket.level, bucket.updated)
            return wait

    def _slot_for(self, table: mmap.mmap, key_hash: bytes, first: int, now: float) -> int | None:
        """The offset of the key's slot, else of a free one to claim, else None."""
        free = None
        for probe in range(PROBES):
            offset = _HEADER.size + (first + probe) % self._table.slots * _SLOT.size
            slot_hash, _level, updated = _SLOT.unpack_from(table, offset)
            if slot_hash == key_hash:
                return offset
            idle = slot_hash == _EMPTY or now - updated >= self._burst_seconds
            if free is None and idle:
                free = offset
        return free

    def _own_bucket(self, key: str, capacity: float, now: float) -> _Bucket:
        if not self._full_logged:
            self._full_logged = True
            logger.warning(
                "ingest.rate_limit_table_full",
                extra={"slots": self._table.slots, "probes": PROBES, "fallback": "per-process"},
            )
        return self._own.setdefault(key, _Bucket(level=capacity, updated=now))


def _take(bucket: _Bucket, rate: float, capacity: float, spans: int, now: float) -> float:
    bucket.level = min(capacity, bucket.level + (now - bucket.updated) * rate)
    bucket.updated = now
    if bucket.level >= spans:
        bucket.level -= spans
        return 0.0
    return (spans - bucket.level) / rate


def _open_table(path: str | None) -> _Table:
    if path is None:
        return _Table(None)
    try:
        return _Table(path)
    except OSError as exc:
        logger.warning(
            "ingest.rate_limit_table_unavailable",
            extra={"path": path, "error": str(exc), "fallback": "per-process"},
        )
        return _Table(None)

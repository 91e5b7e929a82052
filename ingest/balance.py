"""Keep-alive connections spread evenly over the worker processes of one host (pure).

``python -m ingest --processes N`` workers share the ports with ``SO_REUSEPORT``, which hands
each new connection to a worker by a hash of its addresses. Exporters keep a few connections
open for a long time, so those few often land on one worker, whose GIL then caps the host's
ingest at one core while the others idle: in the ingest benchmark, four connections over two
workers left the machine a quarter idle in one run of three. Each worker counts its open
OTLP/HTTP connections in a shared file of counters, one per worker; a worker holding more than
its share (all of them over the workers, rounded up) answers with ``Connection: close``, and the
client's next connection is hashed again, to a worker picked afresh.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import tempfile

__all__ = ["ConnectionCounts", "create_counts"]

_COUNT = struct.Struct("<i")


def create_counts(workers: int, directory: str | None = None) -> str:
    """A new file of ``workers`` zeroed counters for the workers of one supervisor; its path.

    Raises ``OSError`` when it cannot be written."""
    fd, path = tempfile.mkstemp(prefix="latencyboard-ingest-connections-", dir=directory)
    try:
        os.ftruncate(fd, workers * _COUNT.size)
    except OSError:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    return path


class ConnectionCounts:
    """This worker's open connections, beside the other workers' (``path`` None: a process
    alone, which never sheds a connection).

    Each worker writes its own counter only, from its event loop's thread, so no lock is
    needed; a read of the others may be a moment old, which only delays a shedding."""

    def __init__(self, path: str | None = None, index: int = 0) -> None:
        self.index = index
        self._map: mmap.mmap | None = None
        self.workers = 1
        if path is not None:
            with open(path, "r+b") as file:
                size = os.fstat(file.fileno()).st_size
                self._map = mmap.mmap(file.fileno(), size)
            self.workers = size // _COUNT.size
            if not 0 <= index < self.workers:
                raise ValueError(f"worker {index} of {self.workers}")
        self.mine = 0

    def opened(self) -> None:
        self._set(self.mine + 1)

    def closed(self) -> None:
        self._set(self.mine - 1)

    def over_share(self) -> bool:
        """Whether this worker holds more connections than its share of them all."""
        if self._map is None:
            return False
        total = sum(count for (count,) in _COUNT.iter_unpack(self._map))
        return self.mine > math.ceil(total / self.workers)

    def _set(self, count: int) -> None:
        self.mine = count
        if self._map is not None:
            _COUNT.pack_into(self._map, self.index * _COUNT.size, count)

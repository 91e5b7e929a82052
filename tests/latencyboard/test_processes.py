"""What the worker processes do for themselves: handing freed memory back."""

from __future__ import annotations

import subprocess

from tests.support import PYTHON

# A process that allocates 256 MiB in blocks below glibc's mmap threshold (so they come from
# the heap), frees all but the last (which pins the heap's top: glibc trims only past it) and
# prints its resident MiB before and after releasing.
_FRAGMENTED_HEAP = """
import os
from latencyboard.processes import release_freed_memory

def resident_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

blocks = [b"x" * (64 * 1024) for _ in range(4096)]
last = blocks[-1]
del blocks
before = resident_mib()
released = release_freed_memory()
print(released, round(before), round(resident_mib()))
"""


def test_freed_heap_memory_goes_back_to_the_kernel():
    # given a process holding 256 MiB it has freed, below the top of its heap
    # when it releases freed memory
    result = subprocess.run(
        [PYTHON, "-c", _FRAGMENTED_HEAP], capture_output=True, text=True, check=True
    )

    # then its resident size falls by (about) those 256 MiB
    released, before, after = result.stdout.split()
    assert released == "True"
    assert int(before) - int(after) >= 240, result.stdout

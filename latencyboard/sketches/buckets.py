"""Which bucket of a :class:`~latencyboard.sketches.sketch.Sketch` a latency lands in, and what
value each bucket reports.

A value ``x >= MIN_VALUE`` lands in bucket ``key = ceil(log_gamma(x))`` with
``gamma = (1 + ALPHA) / (1 - ALPHA)``, i.e. bucket ``k`` covers ``(gamma**(k-1), gamma**k]``.
A bucket is reported as ``2 * gamma**k / (gamma + 1)``, which is within ``ALPHA`` relative
error of every value the bucket can hold. Values below ``MIN_VALUE`` (1 ns) are counted in a
separate zero bucket reported as ``0.0``.

The key mapping (``ALPHA``, ``MIN_VALUE`` and the ``ceil(log(x) / log(gamma))`` float
computation) is part of the binary format (:mod:`latencyboard.sketches.format`): changing any of
them requires a new format version.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "ALPHA",
    "GAMMA",
    "MAX_KEY",
    "MIN_KEY",
    "MIN_VALUE",
    "RELATIVE_ERROR",
    "CountArray",
    "FloatArray",
    "IntArray",
    "KeyArray",
    "bucket_estimates",
    "bucket_keys",
]

ALPHA: Final = 0.01
"""Relative accuracy the bucket width is derived from."""

GAMMA: Final = (1.0 + ALPHA) / (1.0 - ALPHA)
"""Ratio between consecutive bucket boundaries."""

RELATIVE_ERROR: Final = ALPHA
"""Bound on ``|estimate - exact| / exact`` for every quantile of values >= ``MIN_VALUE``
(up to float rounding in the key computation, ~1e-15); report it next to each figure."""

MIN_VALUE: Final = 1e-6
"""Values (ms) below this go to the zero bucket and are reported as 0.0 (abs. error < 1 ns)."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
KeyArray = npt.NDArray[np.signedinteger[Any]]  # bucket keys: int32 once decoded, else int64
CountArray = npt.NDArray[np.signedinteger[Any]]  # bucket counts: int32 or int64

_LN_GAMMA: Final = math.log(GAMMA)
_ESTIMATE_SCALE: Final = 2.0 / (GAMMA + 1.0)


def bucket_keys(values: FloatArray) -> IntArray:
    """Bucket keys ``ceil(log_gamma(x))`` of values that are all ``>= MIN_VALUE``."""
    logs = np.log(values)
    logs /= _LN_GAMMA
    np.ceil(logs, out=logs)
    return logs.astype(np.int64)


# Every bucket key lies between these two: the keys of MIN_VALUE and of the largest float.
MIN_KEY: Final = int(bucket_keys(np.array([MIN_VALUE]))[0])
MAX_KEY: Final = int(bucket_keys(np.array([sys.float_info.max]))[0])


# The value reported for every possible bucket key, computed once: a table lookup is faster
# than np.power, and every code path (one sketch or many groups at once) reads the very same
# float for a key, whatever vector width or loop numpy picks for the arrays at hand. The
# topmost keys (values near the float64 maximum) overflow to inf; callers clamp to max.
with np.errstate(over="ignore"):
    _ESTIMATE_TABLE: Final[FloatArray] = (
        np.power(GAMMA, np.arange(MIN_KEY, MAX_KEY + 1, dtype=np.float64)) * _ESTIMATE_SCALE
    )


def bucket_estimates(keys: KeyArray) -> FloatArray:
    """The value reported for each bucket key: ``2 * gamma**k / (gamma + 1)``."""
    # Keys of valid sketches always lie in [MIN_KEY, MAX_KEY]; clip only guards the lookup.
    result: FloatArray = np.take(_ESTIMATE_TABLE, keys - MIN_KEY, mode="clip")
    return result

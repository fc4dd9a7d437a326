"""Arrow columns built straight from buffers, for the write path.

``pyarrow.array`` and ``pyarrow.repeat`` import pandas (when installed) on
first use, a third of a second or more that a producer call, a command line
or a benchmark's first send pays for nothing; ``Array.from_buffers`` does not,
and skips the per-value conversion too. Each function here makes exactly the
array its ``pyarrow.array`` counterpart would.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_INT32_MAX = 2**31 - 1

_ARROW_INTS = {np.dtype(np.int32): pa.int32(), np.dtype(np.int64): pa.int64()}


def from_numpy(values: np.ndarray) -> pa.Array:
    """An int32 or int64 numpy array as an Arrow array without nulls (no copy when contiguous)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(
        _ARROW_INTS[values.dtype], len(values), [None, pa.py_buffer(values)]
    )


def binary(payloads: Sequence[bytes]) -> pa.Array | None:
    """``payloads`` (bytes, checked by the caller) as a binary array; None past 2 GiB in all.

    A binary array's offsets are int32: more bytes than that need a larger type
    the segment schema does not have.
    """
    count = len(payloads)
    ends = np.cumsum(np.fromiter(map(len, payloads), np.int64, count))
    if count and int(ends[-1]) > _INT32_MAX:
        return None
    offsets = np.zeros(count + 1, np.int32)
    offsets[1:] = ends
    data = b"".join(payloads)
    return pa.Array.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def repeated_string(text: str, count: int) -> pa.Array:
    """``count`` copies of ``text`` (valid UTF-8, checked by the caller) as a string array."""
    encoded = text.encode("utf-8")
    offsets = np.arange(count + 1, dtype=np.int64) * len(encoded)
    if count and int(offsets[-1]) > _INT32_MAX:
        return pa.array([text] * count, pa.string())
    return pa.Array.from_buffers(
        pa.string(),
        count,
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(encoded * count)],
    )


def empty_maps(count: int, type: pa.MapType) -> pa.Array:
    """``count`` empty maps of ``type`` (string keys and values)."""
    nothing = pa.Array.from_buffers(
        pa.string(), 0, [None, pa.py_buffer(np.zeros(1, np.int32)), pa.py_buffer(b"")]
    )
    offsets = from_numpy(np.zeros(count + 1, np.int32))
    return pa.MapArray.from_arrays(offsets, nothing, nothing, type=type)

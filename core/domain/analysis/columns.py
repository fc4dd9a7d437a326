"""Arrow columns as numpy arrays, for the vectorised predicates, filters and cursor checks.

Message rows follow the ledger store's row schema (``key``, ``properties``,
``publish_time``, ``deliver_at``, ``payload``, ...), given as a ``pyarrow.Table``
or ``RecordBatch``.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Rows: TypeAlias = pa.Table | pa.RecordBatch
"""Message rows: a table or a record batch."""


def bool_mask(result: pa.ChunkedArray | pa.Array) -> np.ndarray:
    filled = pc.fill_null(result, False)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.bool_)


def null_mask(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), dtype=np.bool_)


def int_column(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    filled = pc.fill_null(column, 0) if column.null_count else column
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)

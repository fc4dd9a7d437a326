"""The ledger store's Arrow-to-numpy conversion against a plain Python model.

``_numpy`` reads integer columns from the Arrow buffers (pyarrow's own
``to_numpy`` imports pandas): chunks, slices (a non-zero offset into the
buffers) and nulls are where such code goes wrong.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.store.ledger import MESSAGE_SCHEMA, _numpy

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)


def chunks_of(values: st.SearchStrategy[int]) -> st.SearchStrategy[list[tuple[list, int, int]]]:
    """Chunks as (values with None for null, slice start, slice length)."""
    chunk = st.lists(st.none() | values, max_size=40).flatmap(
        lambda items: st.tuples(
            st.just(items),
            st.integers(0, len(items)),
            st.integers(0, len(items)),
        )
    )
    return st.lists(chunk, max_size=5)


def column(chunks: list[tuple[list, int, int]], kind: pa.DataType) -> tuple[pa.Table, list]:
    arrays, expected = [], []
    for items, start, length in chunks:
        arrays.append(pa.array(items, kind).slice(start, length))
        expected.extend(items[start : start + length])
    return pa.table({"c": pa.chunked_array(arrays, kind)}), expected


@settings(max_examples=200, deadline=None)
@given(chunks_of(INT64), st.integers(-5, 5))
def test_int64_columns(chunks: list[tuple[list, int, int]], null: int) -> None:
    table, expected = column(chunks, pa.int64())
    got = _numpy(table, "c", np.int64, null=null)
    assert got.dtype == np.int64
    assert got.tolist() == [null if v is None else v for v in expected]


@settings(max_examples=200, deadline=None)
@given(chunks_of(INT32))
def test_int32_columns_widen(chunks: list[tuple[list, int, int]]) -> None:
    table, expected = column(chunks, pa.int32())
    got = _numpy(table, "c", np.int64, null=-1)
    assert got.dtype == np.int64
    assert got.tolist() == [-1 if v is None else v for v in expected]


def test_reading_does_not_import_pandas(tmp_path: Path) -> None:
    path = tmp_path / "segment.parquet"
    rows = {name: [] for name in MESSAGE_SCHEMA.names}
    pq.write_table(pa.table(rows, schema=MESSAGE_SCHEMA), path)
    code = (
        "import sys, numpy as np\n"
        "import pyarrow.fs as pafs\n"
        "from cursorops.core.store.ledger import _numpy, _read_segments\n"
        "local = pafs.LocalFileSystem()\n"
        f"table = _read_segments(local, [{str(path)!r}] * 2, ['ledger_id', 'deliver_at'])\n"
        "assert table.num_rows == 0, table\n"
        "assert _numpy(table, 'deliver_at', np.int64, null=-1).size == 0\n"
        "assert 'pyarrow.parquet' in sys.modules\n"
        "assert 'pandas' not in sys.modules and 'pyarrow.dataset' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

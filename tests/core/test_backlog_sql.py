"""Users' SQL over the backlog: one SELECT over ``backlog`` and nothing else.

Every statement that would read or write a file, reach the network, load an extension or
change the configuration is refused with an InvalidQueryError that says why, and leaves
nothing behind (the ``_refused`` habit of tests/core/test_admin_rules.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from cursorops.core.domain.analysis.backlog_rows import BACKLOG_SCHEMA
from cursorops.core.domain.errors import InvalidInputError, InvalidQueryError
from cursorops.core.services.broker import backlog_sql


@pytest.fixture
def relation() -> pa.Table:
    rows = [
        {
            "topic_partition": "persistent://acme/ops/t",
            "partition": -1,
            "ledger_id": 1,
            "entry_id": n,
            "batch_index": -1,
            "batch_size": 0,
            "message_id": f"(1,{n},-1,-1)",
            "triplet": f"1:{n}",
            "message_id_base64": "CAEQAA==",
            "key": f"k{n % 2}",
            "publish_time": 1_700_000_000_000 + n,
            "producer_name": "p",
            "sequence_id": n,
            "size": 3,
            "chunks": 0,
            "encrypted": False,
            "redelivery_count": 0,
            "state": "available",
            "payload": b"abc",
        }
        for n in range(5)
    ]
    return pa.Table.from_pylist(rows, schema=BACKLOG_SCHEMA)


def _refused(relation: pa.Table, sql: str, says: str, tmp_path: Path) -> None:
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(InvalidQueryError, match=says):
        backlog_sql.run(relation, sql)
    assert sorted(os.listdir(tmp_path)) == before
    assert not Path("/tmp/x").exists() and not Path("/tmp/x.db").exists()


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"),
        ("SELECT * FROM '/etc/passwd'", "Table with name /etc/passwd does not exist"),
        ("SELECT * FROM glob('/etc/*')", "disabled by configuration"),
        ("ATTACH '/tmp/x.db'", "only a SELECT over backlog is allowed, not ATTACH"),
        ("ATTACH ':memory:' AS m", "not ATTACH"),
        ("COPY backlog TO '/tmp/x'", "not COPY"),
        ("INSTALL httpfs", "not LOAD"),
        ("LOAD httpfs", "not LOAD"),
        ("SET enable_external_access=true", "not SET"),
        ("PRAGMA enable_external_access=true", "not SET"),
        ("PRAGMA database_list", "not PRAGMA"),
        ("CREATE TABLE t AS SELECT 1", "not CREATE"),
        ("SELECT 1; SELECT 2", "one SELECT statement is allowed, got 2"),
        ("SELEKT 1", "Parser Error"),
        ("SELECT nothing FROM backlog", "Query failed: Binder Error"),
        ("", "no SQL given"),
    ],
)
def test_anything_but_one_select_over_the_backlog_is_refused(
    relation: pa.Table, sql: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(relation, sql, says, tmp_path)


def test_a_refusal_is_bad_input() -> None:
    assert issubclass(InvalidQueryError, InvalidInputError)


def test_a_query_reads_the_backlog_up_to_its_limit(relation: pa.Table) -> None:
    answer = backlog_sql.run(
        relation, "SELECT key, count(*) AS n FROM backlog GROUP BY 1 ORDER BY 2 DESC, 1"
    )
    assert answer.table.to_pylist() == [{"key": "k0", "n": 3}, {"key": "k1", "n": 2}]
    assert not answer.truncated
    capped = backlog_sql.run(relation, "FROM backlog SELECT entry_id ORDER BY 1", limit=2)
    assert capped.table.column("entry_id").to_pylist() == [0, 1] and capped.truncated
    exact = backlog_sql.run(relation, "SELECT entry_id FROM backlog", limit=5)
    assert exact.table.num_rows == 5 and not exact.truncated


@pytest.mark.parametrize("limit", [0, -1, backlog_sql.MAX_ROW_LIMIT + 1, True])
def test_a_limit_out_of_range_is_refused(relation: pa.Table, limit: int) -> None:
    with pytest.raises(InvalidQueryError, match="Invalid limit"):
        backlog_sql.run(relation, "SELECT 1", limit=limit)


def test_a_query_that_runs_too_long_is_stopped(relation: pa.Table) -> None:
    endless = "SELECT count(*) FROM range(100000000000) a, range(100000000000) b"
    with pytest.raises(InvalidQueryError, match="still running after 0.5 s"):
        backlog_sql.run(relation, endless, timeout_s=0.5)

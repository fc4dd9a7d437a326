"""A user's SQL over the backlog relation, on an embedded DuckDB that reads nothing else.

The relation (:data:`cursorops.core.domain.analysis.backlog_rows.BACKLOG_SCHEMA`) is the
view ``backlog`` of a fresh in-memory database per query, opened so that SQL cannot
leave it:

- ``enable_external_access = false``: no file or URL is read or written (``read_csv``,
  ``read_parquet``, a quoted path, ``COPY ... TO``, ``ATTACH`` of a file, ``EXPORT``),
  and no extension is installed or loaded;
- ``python_enable_replacements = false``: a table name is never looked up among the
  caller's Python variables, only ``backlog`` is there;
- ``lock_configuration = true``: no ``SET`` or ``PRAGMA`` takes any of this back;
- and before anything runs, the text must be exactly one ``SELECT`` statement (``WITH``,
  ``FROM``-first and ``SUMMARIZE`` are SELECTs too): ``ATTACH ':memory:'``, ``CREATE``,
  ``SET``, ``INSTALL`` and their kind are refused by name, whatever DuckDB would allow.

Every refusal and every failure is an :class:`InvalidQueryError` (HTTP 400, exit code 2),
with DuckDB's own message. A query answers at most ``limit`` rows (``truncated`` says
whether there were more), runs on one thread and stops after :data:`QUERY_TIMEOUT_S`.
DuckDB is imported here only, on the first query.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from cursorops.core.domain.errors import InvalidQueryError

if TYPE_CHECKING:
    import duckdb

VIEW = "backlog"
"""The name the relation has in a query."""
DEFAULT_ROW_LIMIT = 1_000
"""Rows a query answers unless the caller asks for another limit."""
MAX_ROW_LIMIT = 100_000
"""The most rows one answer carries; more is a job for a Spark scan, not a REST answer."""
QUERY_TIMEOUT_S = 30.0
"""A query still running after this is interrupted (and answered as a failure)."""
_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "python_enable_replacements": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "threads": 1,
    "memory_limit": "512MB",
    "lock_configuration": True,
}


@dataclass(frozen=True)
class QueryAnswer:
    """The rows a query answered (at most its limit), and whether there were more."""

    table: pa.Table
    truncated: bool


def _connection() -> duckdb.DuckDBPyConnection:
    import duckdb

    return duckdb.connect(":memory:", config=_CONFIG)


def checked(sql: str, connection: duckdb.DuckDBPyConnection | None = None) -> str:
    """``sql`` when it is exactly one SELECT statement; else :class:`InvalidQueryError`.

    Parsing only: nothing runs.
    """
    import duckdb

    if not isinstance(sql, str) or not sql.strip():
        raise InvalidQueryError("Invalid query: no SQL given")
    con = connection if connection is not None else _connection()
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise InvalidQueryError(f"Invalid query: {exc}") from exc
    finally:
        if connection is None:
            con.close()
    if len(statements) != 1:
        raise InvalidQueryError(
            f"Invalid query: one SELECT statement is allowed, got {len(statements)} statements"
        )
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise InvalidQueryError(
            f"Query refused: only a SELECT over {VIEW} is allowed, not {kind.name} "
            "(the backlog is read-only, and nothing outside it can be read or written)"
        )
    return sql


def check_limit(limit: int) -> int:
    """``limit`` when it is from 1 to :data:`MAX_ROW_LIMIT`; else :class:`InvalidQueryError`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ROW_LIMIT:
        raise InvalidQueryError(f"Invalid limit {limit!r}: must be from 1 to {MAX_ROW_LIMIT:,}")
    return limit


def run(
    relation: pa.Table,
    sql: str,
    limit: int = DEFAULT_ROW_LIMIT,
    *,
    timeout_s: float = QUERY_TIMEOUT_S,
) -> QueryAnswer:
    """The first ``limit`` rows ``sql`` answers over ``relation`` as the view ``backlog``.

    Refused or failed: :class:`InvalidQueryError`, with nothing written anywhere. Cost:
    DuckDB's, on one thread, reading the Arrow table in place (no copy of the relation).
    """
    import duckdb

    check_limit(limit)
    con = _connection()
    timer = threading.Timer(timeout_s, con.interrupt)
    try:
        checked(sql, con)
        con.register(VIEW, relation)
        timer.start()
        reader = con.sql(sql).to_arrow_reader(batch_size=min(limit + 1, 65_536))
        batches: list[pa.RecordBatch] = []
        rows = 0
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            if rows > limit:
                break
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except duckdb.InterruptException as exc:
        raise InvalidQueryError(
            f"Query stopped: still running after {timeout_s:g} s ({exc})"
        ) from exc
    except duckdb.Error as exc:
        raise InvalidQueryError(f"Query failed: {exc}") from exc
    finally:
        timer.cancel()
        con.close()
    return QueryAnswer(table.slice(0, limit), rows > limit)


__all__ = [
    "DEFAULT_ROW_LIMIT",
    "MAX_ROW_LIMIT",
    "QUERY_TIMEOUT_S",
    "VIEW",
    "QueryAnswer",
    "check_limit",
    "checked",
    "run",
]

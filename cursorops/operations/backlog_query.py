"""The backlog as a table: a user's SQL over a subscription's unacknowledged messages, one
row each (:mod:`cursorops.core.domain.analysis.backlog_rows`), on an embedded DuckDB that
reads nothing else. The query moves nothing.

The route answers the rows as arrays under ``columns``, with the snapshot they were read
at; bytes (a payload, an ordering key) travel as base64, as every payload in this API does.
The command prints them as a table (text, ``-o table``), as CSV (``-o csv``) or as a JSON
list of objects, column to value (``-o json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cursorops.operations.declaration import (
    SUBSCRIPTION,
    SUBSCRIPTION_PATH,
    TOPIC,
    Call,
    Param,
    operation,
)

DEFAULT_ROW_LIMIT = 1_000
"""Rows a query answers unless ``--limit`` says otherwise (as :mod:`cursorops.core.services.
broker.backlog_sql` caps it; kept here so the CLI does not import the core)."""
MAX_SQL_CHARACTERS = 100_000
"""The longest query text the route takes."""
BYTES = "base64"
"""How a bytes value (payload, ordering key) is written in JSON, CSV and the table."""


def _json_value(value: Any) -> Any:
    """One value of a query's answer as JSON: bytes as base64, times as ISO-8601, decimals
    and other exact numbers as text, a map as an object, NaN and infinities as text."""
    import base64
    import datetime
    import decimal
    import math

    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta | decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {str(k): _json_value(v) for k, v in value}  # an Arrow map's pairs
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return str(value)


def _rows(answer: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    return [c["name"] for c in answer["columns"]], list(answer["rows"])


def _objects(answer: Mapping[str, Any], _: Mapping[str, Any]) -> list[dict[str, Any]]:
    names, rows = _rows(answer)
    return [dict(zip(names, row, strict=True)) for row in rows]


def _cell(value: Any) -> str:
    import json

    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _csv_lines(answer: Mapping[str, Any], _: Mapping[str, Any]) -> list[str]:
    import csv
    import io

    names, rows = _rows(answer)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    for row in rows:
        writer.writerow([_cell(v) for v in row])
    return out.getvalue().splitlines()


def _table_lines(answer: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    names, rows = _rows(answer)
    cells = [names, *([_cell(v) if v is not None else "null" for v in row] for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(names))]
    lines = [
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    snapshot = answer["snapshot"]
    count = len(rows)
    more = f", more than --limit {answer['limit']}" if answer["truncated"] else ""
    lines.append(
        f"({count} row{'' if count == 1 else 's'}{more}; snapshot {snapshot['id']}; "
        f"bytes as {BYTES}"
        + ("" if answer["contentShown"] else "; key, ordering_key, properties, payload masked")
        + ")"
    )
    return lines


@operation(
    "backlog",
    "query",
    method="POST",
    path=SUBSCRIPTION_PATH + "/backlogQuery",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "sql",
            where="body",
            help="one SELECT over the view backlog, e.g. "
            '"SELECT key, count(*) FROM backlog GROUP BY 1 ORDER BY 2 DESC"',
            limit=MAX_SQL_CHARACTERS,
        ),
        Param(
            "limit",
            where="body",
            kind=int,
            flags=("--limit",),
            default=DEFAULT_ROW_LIMIT,
            metavar="ROWS",
            help=f"answer at most ROWS rows (default {DEFAULT_ROW_LIMIT:,}, at most 100,000)",
        ),
    ),
    help="SQL over a subscription's backlog, one row per unacknowledged message "
    "(-o table, csv or json)",
    render=_table_lines,
    document=_objects,
    formats={"table": _table_lines, "csv": _csv_lines},
    closed_body=True,
)
def query_backlog(
    call: Call, topic: str, subscription: str, sql: str, limit: int
) -> dict[str, object]:
    """Run one SELECT over the subscription's backlog (the view ``backlog``: one row per
    unacknowledged message, its position, ids, metadata, state and content) on an embedded
    DuckDB that can read no file and no URL. Readable with GET_STATS; key, ordering key,
    properties and payload are null unless the caller may peek. The answer names the
    snapshot its rows were read at; bytes are base64."""
    answer = call.broker.backlog.query(call.role, topic, subscription, sql, limit)
    table = answer.table
    columns = [{"name": f.name, "type": str(f.type)} for f in table.schema]
    values = [[_json_value(v) for v in column.to_pylist()] for column in table.columns]
    rows = [list(row) for row in zip(*values, strict=True)] if values else []
    return {
        "topic": topic,
        "subscription": subscription,
        "snapshot": answer.snapshot.to_json(),
        "contentShown": answer.content,
        "bytes": BYTES,
        "columns": columns,
        "rows": rows,
        "limit": answer.limit,
        "truncated": answer.truncated,
    }

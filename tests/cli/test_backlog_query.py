"""``cursorops backlog query``: SQL over the backlog through the REST app, printed as a table,
as CSV or as JSON objects; content masked for a role that may not peek; every refusal an
``error:`` line and exit code 2, with nothing written. Every call is a new process on a
real home."""

from __future__ import annotations

import base64
import csv
import io
from pathlib import Path

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from tests.cli.test_cli import cursorops, ok, ok_json

pytestmark = pytest.mark.e2e

TOPIC = "persistent://acme/cards/payments"
PAYLOADS = (b"secret-payload", b"\xff\x00binary")
QUERY = "SELECT triplet, key, properties, payload, state FROM backlog ORDER BY triplet"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Three messages on ``billing``: two keyed ``card-4111`` with a property, one binary;
    ``writer`` may produce only, ``reader`` may consume (hence peek)."""
    root = tmp_path / "home"
    with Broker(Config.from_home(root)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/cards")
        broker.admin.grant_permission("admin", "acme/cards", "writer", ["produce"])
        broker.admin.grant_permission("admin", "acme/cards", "reader", ["consume"])
        broker.admin.create_topic("admin", TOPIC, 0)
        broker.admin.create_subscription(
            "admin", TOPIC, "billing", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce(
            "admin",
            TOPIC,
            [OutgoingMessage(PAYLOADS[0], key="card-4111", properties={"pii": "yes"})] * 2
            + [OutgoingMessage(PAYLOADS[1])],
        )
    return root


def test_json_prints_the_rows_as_objects_with_bytes_as_base64(home: Path) -> None:
    rows = ok_json(home, "backlog", "query", TOPIC, "-s", "billing", QUERY, role="reader")
    assert rows == [
        {
            "triplet": "1:0",
            "key": "card-4111",
            "properties": {"pii": "yes"},
            "payload": base64.b64encode(PAYLOADS[0]).decode(),
            "state": "available",
        },
        {
            "triplet": "1:1",
            "key": "card-4111",
            "properties": {"pii": "yes"},
            "payload": base64.b64encode(PAYLOADS[0]).decode(),
            "state": "available",
        },
        {
            "triplet": "1:2",
            "key": None,
            "properties": {},
            "payload": base64.b64encode(PAYLOADS[1]).decode(),
            "state": "available",
        },
    ]


def test_csv_prints_a_header_and_one_line_per_row(home: Path) -> None:
    run = ok(home, "backlog", "query", TOPIC, "-s", "billing", QUERY, "-o", "csv")
    table = list(csv.reader(io.StringIO(run.stdout)))
    assert table[0] == ["triplet", "key", "properties", "payload", "state"]
    assert table[1] == [
        "1:0",
        "card-4111",
        '{"pii":"yes"}',
        base64.b64encode(PAYLOADS[0]).decode(),
        "available",
    ]
    assert table[3][:3] == ["1:2", "", "{}"] and len(table) == 4


@pytest.mark.parametrize("output", ["table", "text"])
def test_table_prints_aligned_columns_and_names_the_snapshot(home: Path, output: str) -> None:
    sql = "SELECT key, count(*) AS n FROM backlog GROUP BY 1 ORDER BY 2 DESC"
    run = ok(home, "-o", output, "backlog", "query", TOPIC, "-s", "billing", sql)
    lines = run.stdout.splitlines()
    assert lines[:4] == ["key        n", "---------  -", "card-4111  2", "null       1"]
    assert lines[4].startswith("(2 rows; snapshot ") and "bytes as base64" in lines[4]


def test_the_limit_cuts_the_rows_and_says_so(home: Path) -> None:
    run = ok(home, "backlog", "query", TOPIC, "-s", "billing", QUERY, "--limit", "1")
    assert run.stdout.splitlines()[-1].startswith("(1 row, more than --limit 1; snapshot ")
    rows = ok_json(home, "backlog", "query", TOPIC, "-s", "billing", QUERY, "--limit", "2")
    assert [r["triplet"] for r in rows] == ["1:0", "1:1"]


@pytest.mark.parametrize("output", ["text", "json", "csv", "table"])
def test_a_produce_only_role_reads_no_content(home: Path, output: str) -> None:
    run = cursorops(
        home, "-o", output, "backlog", "query", TOPIC, "-s", "billing", QUERY, role="writer"
    )
    assert run.code == 0, run.stderr
    for secret in ("card-4111", "pii", base64.b64encode(PAYLOADS[0]).decode()):
        assert secret not in run.stdout
    if output == "json":
        assert [r["key"] for r in run.json()] == [None, None, None]
        assert [r["payload"] for r in run.json()] == [None, None, None]
    if output in ("text", "table"):
        assert "key, ordering_key, properties, payload masked" in run.stdout


def test_a_role_without_any_grant_is_refused(home: Path) -> None:
    run = cursorops(home, "backlog", "query", TOPIC, "-s", "billing", QUERY, role="nobody")
    assert run.code == 5 and "not authorized" in run.stderr


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "ATTACH '{tmp}/x.db'",
        "COPY backlog TO '{tmp}/x.csv'",
        "INSTALL httpfs",
        "SET enable_external_access=true",
    ],
)
def test_sql_that_reaches_outside_the_backlog_is_refused(
    home: Path, tmp_path: Path, sql: str
) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    run = cursorops(home, "backlog", "query", TOPIC, "-s", "billing", sql.format(tmp=tmp_path))
    assert run.code == 2, run.stderr
    assert run.stderr.startswith("error: Query") and run.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_csv_and_table_are_for_commands_that_answer_rows(home: Path) -> None:
    run = cursorops(home, "-o", "csv", "topics", "stats", TOPIC)
    assert run.code == 2 and "-o csv is for a command that answers rows" in run.stderr

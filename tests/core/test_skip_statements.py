"""How many metadata statements a skip costs: each is a round trip a REST client waits for."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest.mock import patch

import pytest
from sqlalchemy import Connection, event

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating.skip import FOLD_AFTER_DELTAS
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.cursor_door import CursorTransaction
from cursorops.core.store.engine import WRITE_OPTION

TOPIC = "persistent://acme/ops/skips"


@contextmanager
def statements(broker: Broker) -> Iterator[list[str]]:
    """Every statement the broker's metadata engine sends while the block runs: through
    SQLAlchemy, and on the cursor door's own DBAPI connection."""
    seen: list[str] = []
    engine = broker.metadata.engine
    run = CursorTransaction._run

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        seen.append(" ".join(statement.split()))

    def door_run(
        txn: CursorTransaction, sql: str, parameters: object, *, many: bool = False
    ) -> object:
        seen.append(" ".join(sql.split()))
        return run(txn, sql, parameters, many=many)

    event.listen(engine, "before_cursor_execute", record)
    try:
        with patch.object(CursorTransaction, "_run", door_run):
            yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


@pytest.fixture
def produced(broker: Broker) -> list[MessageId]:
    broker.admin.create_topic("admin", TOPIC, partitions=4)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    return broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(40)])


@pytest.mark.parametrize("role", ["admin", "acme-admin", "reader"])
def test_a_two_id_skip_on_four_partitions_costs_at_most_13_statements(
    broker: Broker, produced: list[MessageId], role: str
) -> None:
    """The path every front door takes (CLI, REST, DAG apply): as a superuser, a tenant
    admin and a role with a ``consume`` grant."""
    broker.admin.grant_permission("admin", "acme/ops", "reader", ["consume"])
    ids = produced[:2]
    assert len({m.partition for m in ids}) == 2
    with statements(broker) as seen:
        outcome = skips.skip_messages(broker.gated, role, TOPIC, "s", ids, via="rest")
    assert outcome.skipped == ids
    # 68 before the ledger lists were read in one statement and the plan was not validated
    # twice in one call; 28 before authorization was one statement, the look-ups one read
    # transaction and the cursors read once, under their locks. BEGIN counts on SQLite,
    # where the driver sends it as a statement.
    # 14 (16 on SQLite) before the authorization and the topic were read in one statement,
    # the cursors locked and their journals read in two, and (PostgreSQL) the deltas written
    # in one. SQLite, one writer at a time, appends each delta with two statements. 14 on
    # SQLite before the authorization joined the validation's read transaction.
    sqlite = broker.metadata.engine.dialect.name == "sqlite"
    assert len(seen) <= (10 + 3 if sqlite else 8), "\n".join(seen)
    ledger_reads = [s for s in seen if "FROM ledgers" in s or "JOIN ledgers" in s]
    assert len([s for s in ledger_reads if "segments" not in s]) == 1
    assert len([s for s in seen if s.startswith("SELECT") and "FROM cursor_deltas" in s]) == 1


@pytest.mark.parametrize("role", ["admin", "reader"])
def test_a_skip_is_one_read_transaction_and_one_write(
    broker: Broker, produced: list[MessageId], role: str
) -> None:
    """The authorization and the look-ups that validate the ids share one read transaction
    (one pooled connection, one commit); the acknowledgements and the audit one write,
    through the cursor door."""
    broker.admin.grant_permission("admin", "acme/ops", "reader", ["consume"])
    commits: list[str] = []
    engine = broker.metadata.engine
    commit = CursorTransaction._commit

    def committed(connection: Connection) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION)
        commits.append("write" if write else "read")

    def door_committed(txn: CursorTransaction) -> None:
        commits.append("cursor door")
        commit(txn)

    event.listen(engine, "commit", committed)
    try:
        with patch.object(CursorTransaction, "_commit", door_committed):
            skips.skip_messages(broker.gated, role, TOPIC, "s", produced[:2], via="rest")
    finally:
        event.remove(engine, "commit", committed)
    assert commits == ["read", "cursor door"]


def test_a_skip_folds_a_long_journal_into_a_snapshot(
    broker: Broker, produced: list[MessageId]
) -> None:
    """Every read of a cursor decodes the deltas after its snapshot: a skip that read
    FOLD_AFTER_DELTAS of them writes a snapshot, and the next reads a short journal."""
    one_partition = [m for m in produced if m.partition == produced[0].partition]
    assert len(one_partition) >= 8
    partition = f"{TOPIC}-partition-{produced[0].partition}"
    for _ in range(FOLD_AFTER_DELTAS):
        broker.metadata.append_cursor_delta(partition, "s", cursor_codec.encode(CursorState()))
    assert len(broker.metadata.load_cursor(partition, "s").deltas) == FOLD_AFTER_DELTAS
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", one_partition[:2])
    record = broker.metadata.load_cursor(partition, "s")
    assert len(record.deltas) == 1
    assert record.snapshot_version == record.version - 1
    outcome = skips.skip_messages(broker.gated, "admin", TOPIC, "s", one_partition[:4])
    assert outcome.already_acknowledged == one_partition[:2]
    assert outcome.skipped == one_partition[2:4]


def test_only_the_touched_partitions_cursors_are_written(
    broker: Broker, produced: list[MessageId]
) -> None:
    ids = produced[:2]
    partitions = [f"{TOPIC}-partition-{p}" for p in range(4)]
    before = {p: broker.metadata.load_cursor(p, "s").version for p in partitions}
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids)
    after = {p: broker.metadata.load_cursor(p, "s").version for p in partitions}
    touched = {f"{TOPIC}-partition-{m.partition}" for m in ids}
    assert len(touched) == 2
    assert {p for p in partitions if after[p] != before[p]} == touched
    assert all(after[p] == before[p] + 1 for p in touched)


def test_apply_reads_the_cursors_only_under_their_locks(
    broker: Broker, produced: list[MessageId]
) -> None:
    ids = produced[:2]
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids)
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:1])
    with statements(broker) as seen:
        outcome = skips.apply_skip(broker.gated, "admin", plan)
    # Read once, in the writing transaction, every touched partition's journal in one
    # statement; the id acknowledged since planning is still reported as such.
    assert len([s for s in seen if s.startswith("SELECT") and "FROM cursor_deltas" in s]) == 1
    assert outcome.acknowledged_meanwhile == ids[:1]
    assert outcome.skipped == ids[1:]


@pytest.mark.parametrize("role", ["admin", "reader"])
def test_a_requested_skip_on_an_ordinary_namespace_costs_at_most_15_statements(
    broker: Broker, produced: list[MessageId], role: str
) -> None:
    """What a REST skip sends where no approval is required: the door's one request
    (``Broker.request``: the topic authorized and its policy read, then the one skip path)."""
    from cursorops.core.services.gating import Applied, Caller, SkipMessages

    broker.admin.grant_permission("admin", "acme/ops", "reader", ["consume"])
    arguments = SkipMessages(topic=TOPIC, subscription="s", ids=tuple(produced[:2]))
    with statements(broker) as seen:
        applied = broker.request("skip-messages", Caller(role, role, "rest"), arguments, _NoRuns())
    assert isinstance(applied, Applied) and applied.changed == 2
    # Measured with the cursor door's own statements counted: 9 on PostgreSQL, 15 on
    # SQLite (where BEGIN counts and each delta is appended with two statements).
    sqlite = broker.metadata.engine.dialect.name == "sqlite"
    assert len(seen) <= (15 if sqlite else 9), "\n".join(seen)
    print(f"{len(seen)} statements as {role} on {broker.metadata.engine.dialect.name}")


class _NoRuns:
    """A door's run starter that no request on an ordinary namespace asks."""

    def authorize(self, workflow: str, requester: str) -> None:
        raise AssertionError("an ordinary namespace starts no workflow")

    def start(self, run: object, digest: str, requester: str) -> object:
        raise AssertionError("an ordinary namespace starts no workflow")

"""The backlog relation against what the subscription's consumers would still receive.

Random topics (two partitions of batches, delayed messages and chunked messages, complete
or not) and random histories (skips of messages and batch indexes, consumers receiving,
acknowledging, negatively acknowledging, closing; a partition's cursor reset to a
message): the relation's rows are exactly the messages a consumer drains afterwards once
every consumer has gone and every delay is due, its ``count(*)`` (in Python and in
DuckDB) is analyze-backlog's exact count, and its states say who holds what and which
messages wait for their time.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import Entry, OutgoingMessage
from cursorops.core.services.reading.dispatch import Consumer, Message

from .conftest import Clock

TOPIC = "persistent://acme/ops/backlog-table"
LEASE_MS = 60_000
DELAY_MS = 5_000
NAMES = ("a", "b")

Key = tuple[int, int, int, int]
"""(partition, ledger, entry, batch index) of one message."""

produced = st.lists(
    st.one_of(
        st.tuples(st.just("batch"), st.integers(1, 4), st.booleans()),
        st.tuples(st.just("delayed"), st.just(1), st.booleans()),
        st.tuples(st.just("chunked"), st.integers(2, 3), st.booleans()),
    ),
    min_size=1,
    max_size=8,
)
history = st.lists(
    st.one_of(
        st.tuples(st.just("skip"), st.sampled_from(NAMES), st.integers(0, 40)),
        st.tuples(st.just("receive"), st.sampled_from(NAMES), st.integers(1, 5)),
        st.tuples(st.just("ack"), st.sampled_from(NAMES), st.integers(1, 3)),
        st.tuples(st.just("nack"), st.sampled_from(NAMES), st.just(0)),
        st.tuples(st.just("close"), st.sampled_from(NAMES), st.just(0)),
        st.tuples(st.just("reset"), st.just(""), st.integers(0, 40)),
    ),
    max_size=14,
)


def _chunk(payload: bytes, uuid: str, chunk: int, chunks: int) -> Entry:
    message = OutgoingMessage(payload, sequence_id=chunk)
    entry = Entry.of_messages([message], False, uuid, 1)
    return dataclasses.replace(entry, chunk=(uuid, chunk, chunks, 3 * chunks))


def _produce(broker: Broker, shapes: list[tuple[str, int, bool]], now: int) -> list[MessageId]:
    """The shapes produced; every message's id (a chunked message's by its last chunk)."""
    ids: list[MessageId] = []
    for n, (kind, size, flag) in enumerate(shapes):
        if kind == "batch":
            messages = [OutgoingMessage(b"m%d.%d" % (n, i), key=f"k{i % 2}") for i in range(size)]
            ids += broker.producing.produce("admin", TOPIC, messages, batch_size=size)
        elif kind == "delayed":
            # Due already (flag) or later: a due one is available, a later one delayed.
            at = now - 1 if flag else now + DELAY_MS
            ids += broker.producing.produce(
                "admin", TOPIC, [OutgoingMessage(b"d%d" % n, deliver_at=at)]
            )
        else:
            # Complete (flag) or its last chunk never sent: then it is no message yet.
            uuid = f"big-{n}"
            sent = size if flag else size - 1
            chunks = [_chunk(b"c%d.%d" % (n, i), uuid, i, size) for i in range(sent)]
            at = broker.producing.append_entries("admin", f"{TOPIC}-partition-0", chunks)
            if flag:
                ids.append(MessageId(at[-1].ledger_id, at[-1].entry_id, 0, -1))
    return ids


def _key(message: Message) -> Key:
    mid = message.message_id
    return (mid.partition, mid.ledger_id, mid.entry_id, mid.batch_index)


def _whole(messages: list[Message]) -> set[Key]:
    """The messages received, a chunked message by its last chunk (as the relation has it)."""
    return {_key(m) for m in messages if m.chunk is None or m.chunk[1] == m.chunk[2] - 1}


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(produced, history)
def test_the_relation_is_what_the_consumers_would_still_receive(
    shapes: list[tuple[str, int, bool]], ops: list[tuple[str, str, int]]
) -> None:
    with tempfile.TemporaryDirectory() as home:
        clock = Clock()
        config = Config.from_home(Path(home), consumer_lease_ms=LEASE_MS)
        with Broker(config, clock=clock) as broker:
            broker.admin.create_tenant("admin", "acme")
            broker.admin.create_namespace("admin", "acme/ops")
            broker.admin.create_topic("admin", TOPIC, 2)
            broker.admin.create_subscription(
                "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
            )
            ids = _produce(broker, shapes, clock())
            dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
            consumers: dict[str, Consumer] = {
                name: dispatcher.subscribe(name, receiver_queue_size=1) for name in NAMES
            }
            held: dict[str, list[Message]] = {name: [] for name in NAMES}
            for action, name, count in ops:
                if action == "skip" and ids:
                    skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[count % len(ids)]])
                elif action == "receive":
                    held[name] += consumers[name].receive_many(count, prefetch=False)
                elif action == "ack" and held[name]:
                    done, held[name] = held[name][:count], held[name][count:]
                    consumers[name].acknowledge(done)
                elif action == "nack" and held[name]:
                    # A chunk's nack gives its whole message back (Dispatcher.release).
                    nacked = held[name].pop(0)
                    consumers[name].negative_acknowledge(nacked)
                    if nacked.chunk is not None:
                        uuid = nacked.chunk[0]
                        held[name] = [
                            m for m in held[name] if m.chunk is None or m.chunk[0] != uuid
                        ]
                elif action == "close":
                    consumers[name].close()
                    held[name] = []
                    consumers[name] = dispatcher.subscribe(name, receiver_queue_size=1)
                elif action == "reset" and ids:
                    # A partition's cursor moved back or on to a message (what was skipped
                    # after it comes back), its consumers gone first, as a seek disconnects.
                    for owner in NAMES:
                        consumers[owner].close()
                        held[owner] = []
                    to = ids[count % len(ids)]
                    reset.reset_cursor(
                        broker.gated,
                        "admin",
                        f"{TOPIC}-partition-{to.partition}",
                        "s",
                        position=to.position,
                    )
                    consumers = {
                        owner: dispatcher.subscribe(owner, receiver_queue_size=1) for owner in NAMES
                    }

            relation = broker.backlog.relation("admin", TOPIC, "s")
            rows = relation.table.to_pylist()
            keys = [(r["partition"], r["ledger_id"], r["entry_id"], r["batch_index"]) for r in rows]
            assert len(keys) == len(set(keys))
            exact = sum(
                a.result.messages for a in broker.analysis.analyze_backlog("admin", TOPIC, "s")
            )
            assert len(rows) == exact
            counted = broker.backlog.query("admin", TOPIC, "s", "SELECT count(*) AS n FROM backlog")
            assert counted.table.to_pylist() == [{"n": exact}]
            # Held: what a consumer was handed and still holds, and what a dispatch gave it
            # past the messages it returned (a chunked message takes one permit for all
            # its chunks); delayed: not due yet.
            still = {_key(m): name for name in NAMES for m in held[name]}
            for row, key in zip(rows, keys, strict=True):
                due = (row["deliver_at"] or 0) <= clock()
                if key in still:
                    assert (row["state"], row["held_by"]) == ("held", still[key]), row
                elif row["state"] == "held":
                    assert row["held_by"] in NAMES, row
                else:
                    assert (row["state"], row["held_by"]) == (
                        "available" if due else "delayed",
                        None,
                    ), row
            # Peeking reads the same messages, with the counts a consumer would receive.
            peeked = broker.reading.peek_messages("admin", TOPIC, "s", 10_000)
            assert _whole(peeked) == set(keys)
            counts = {_key(m): m.redelivery_count for m in peeked}
            assert [r["redelivery_count"] for r in rows] == [counts[k] for k in keys]

            # Everyone gone, every delay due: a consumer drains exactly the relation's rows.
            for consumer in consumers.values():
                consumer.close()
            clock.advance(DELAY_MS + 1)
            drained = broker.reading.consume("admin", TOPIC, "s", 10_000)
            assert _whole(drained) == set(keys)


# -- one snapshot, one answer; content by permission -------------------------------------


def _topic(broker: Broker) -> list[MessageId]:
    broker.admin.grant_permission("admin", "acme/ops", "writer", ["produce"])
    broker.admin.grant_permission("admin", "acme/ops", "reader", ["consume"])
    broker.admin.create_topic("admin", TOPIC, 0)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    messages = [
        OutgoingMessage(b"secret-%d" % i, key="card-4111", properties={"pii": "yes"})
        for i in range(4)
    ]
    return broker.producing.produce("admin", TOPIC, messages, batch_size=2)


def test_two_reads_of_one_state_name_one_snapshot_and_hold_the_same_rows(
    broker: Broker, clock: Clock
) -> None:
    ids = _topic(broker)
    first = broker.backlog.relation("admin", TOPIC, "s")
    clock.advance(60_000)
    again = broker.backlog.relation("admin", TOPIC, "s")
    assert again.snapshot.as_of_ms == first.snapshot.as_of_ms + 60_000
    assert first.snapshot.id == again.snapshot.id
    assert first.table.equals(again.table)
    # An index of the first batch skipped: a new cursor version, a new snapshot, a row less.
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[1]])
    after = broker.backlog.relation("admin", TOPIC, "s")
    assert after.snapshot.id != first.snapshot.id
    assert after.snapshot.marks[0].cursor_version > first.snapshot.marks[0].cursor_version
    assert after.table.column("triplet").to_pylist() == [
        ids[0].triplet(),
        ids[2].triplet(),
        ids[3].triplet(),
    ]
    # The ids read back as the commands take them.
    row = after.table.slice(0, 1).to_pylist()[0]
    assert MessageId.parse(row["message_id"]) == MessageId.parse(ids[0].client_text())
    assert MessageId.from_base64(row["message_id_base64"]).triplet() == ids[0].triplet()


@pytest.mark.parametrize(
    ("role", "content"), [("admin", True), ("reader", True), ("writer", False)]
)
def test_content_columns_are_null_for_a_role_that_may_not_peek(
    broker: Broker, role: str, content: bool
) -> None:
    _topic(broker)
    relation = broker.backlog.relation(role, TOPIC, "s")
    assert relation.content is content
    rows = relation.table.to_pylist()
    assert len(rows) == 4 and {r["state"] for r in rows} == {"available"}
    assert [r["sequence_id"] for r in rows] == [0, 1, 2, 3]
    if content:
        assert {r["key"] for r in rows} == {"card-4111"}
        assert rows[0]["payload"] == b"secret-0" and rows[0]["properties"] == [("pii", "yes")]
    else:
        assert all(
            r[c] is None for r in rows for c in ("key", "ordering_key", "properties", "payload")
        )
        assert rows[0]["size"] == len(b"secret-0")
    # DuckDB sees what the relation holds, and no more.
    answer = broker.backlog.query(
        role,
        TOPIC,
        "s",
        "SELECT key, properties['pii'] AS pii, payload, count(*) AS n FROM backlog GROUP BY ALL",
    )
    expected = (
        {"key": "card-4111", "pii": "yes", "n": 1}
        if content
        else {"key": None, "pii": None, "payload": None, "n": 4}
    )
    got = answer.table.to_pylist()
    assert all(expected.items() <= row.items() for row in got), got
    assert answer.snapshot.topic == TOPIC and answer.content is content


def test_a_delay_come_due_is_a_new_snapshot(broker: Broker, clock: Clock) -> None:
    _topic(broker)
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"later", deliver_at=clock() + DELAY_MS)]
    )
    before = broker.backlog.relation("admin", TOPIC, "s")
    assert before.table.column("state").to_pylist()[-1] == "delayed"
    clock.advance(DELAY_MS)
    due = broker.backlog.relation("admin", TOPIC, "s")
    assert due.table.column("state").to_pylist()[-1] == "available"
    assert due.snapshot.id != before.snapshot.id
    assert due.snapshot.marks == before.snapshot.marks

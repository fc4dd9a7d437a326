"""Skip over the whole message-id space, on a real broker: the named message or nothing.

Every id, from any front door (MessageId, base64, triplet, REST body), either
acknowledges exactly the message it names (the whole entry for batch index
-1) or fails with a one-line CursorOpsError and changes nothing, as a plain
model of the topic's entries says. The edges are 2**32 and its neighbours,
-1 and -2, the int64 and int32 bounds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    CursorOpsError,
    EntryNotFoundError,
    InvalidBatchIndexError,
    InvalidMessageIdError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.skip_payload import parse_payload
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

from .conftest import Clock

TOPIC = "persistent://acme/ops/space"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

Key = tuple[int, int, int]
"""(ledger, entry, batch index) of one message; batch index -1 when not batched."""


class World:
    """The topic's entries as a plain model: which messages exist, where."""

    def __init__(self, ids: list[MessageId]) -> None:
        self.partition_of = {m.ledger_id: m.partition for m in ids}
        self.batch_size = {(m.ledger_id, m.entry_id): m.batch_size for m in ids}

    def named(self, mid: MessageId, *, rest_shape: bool = False) -> set[Key] | None:
        """The messages ``mid`` names, or None when the skip must be refused."""
        batch_index = max(mid.batch_index, -1) if rest_shape else mid.batch_index
        if mid.ledger_id < 0 or mid.entry_id < 0 or mid.partition < -1:
            return None
        size = self.batch_size.get((mid.ledger_id, mid.entry_id))
        if size is None:
            return None
        if mid.partition != -1 and mid.partition != self.partition_of[mid.ledger_id]:
            return None
        if batch_index == -1:
            if size == 0:
                return {(mid.ledger_id, mid.entry_id, -1)}
            return {(mid.ledger_id, mid.entry_id, i) for i in range(size)}
        if batch_index < -1 or size == 0 or batch_index >= size:
            return None
        return {(mid.ledger_id, mid.entry_id, batch_index)}


def unacked(broker: Broker) -> list[Key]:
    """Every unacknowledged message, as peek (which delivers nothing) shows them."""
    return sorted(
        (m.message_id.ledger_id, m.message_id.entry_id, m.message_id.batch_index)
        for m in broker.reading.peek_messages("admin", TOPIC, "s", 10_000)
    )


def backlog(broker: Broker) -> list[tuple[str, int, int, str | None]]:
    return sorted(
        (a.topic_partition, a.result.entries, a.result.messages, a.result.first_message_id)
        for a in broker.analysis.analyze_backlog("admin", TOPIC, "s")
    )


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, World]]:
    """Two partitions of small ledgers (4 entries each): batches of 3, singles, one delayed."""
    home: Path = tmp_path_factory.mktemp("space")
    clock = Clock()
    with Broker(Config.from_home(home, max_entries_per_ledger=4), clock=clock) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC, partitions=2)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        ids = broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"b{i}".encode()) for i in range(30)], batch_size=3
        )
        ids += broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"s{i}".encode()) for i in range(12)]
        )
        ids += broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(b"later", deliver_at=clock() + 3_600_000)]
        )
        yield broker, World(ids)


EDGES = [0, 1, 2, 3, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, INT64_MAX, -1, -2, INT64_MIN]
int64s = st.one_of(st.sampled_from(EDGES), st.integers(-3, 12), st.integers(INT64_MIN, INT64_MAX))
int32s = st.one_of(
    st.sampled_from([-1, -1, -2, -5, 0, 1, 2, 3, INT32_MAX, INT32_MIN]),
    st.integers(INT32_MIN, INT32_MAX),
)
partitions = st.sampled_from([-1, -1, 0, 1, 2, -2, INT32_MAX, INT32_MIN])


@st.composite
def message_ids(draw: st.DrawFn) -> MessageId:
    """Ids near real messages (an edge added to a real entry) and anywhere in the space."""
    ledger = draw(st.one_of(st.integers(0, 14), int64s))
    entry = draw(int64s)
    shift = draw(st.sampled_from([0, 0, 2**32, -(2**32), 2**31, 1, -1]))
    if INT64_MIN <= entry + shift <= INT64_MAX:
        entry += shift
    return MessageId(ledger, entry, draw(partitions), draw(int32s))


def check(broker: Broker, world: World, mid: MessageId, skip: object, *, rest: bool) -> None:
    """Run ``skip()``; hold the result to the model."""
    before, counted = unacked(broker), backlog(broker)
    named = world.named(mid, rest_shape=rest)
    try:
        skip()  # type: ignore[operator]
    except CursorOpsError as exc:
        assert named is None, f"{mid} names {named} but was refused: {exc}"
        assert "\n" not in str(exc) and str(exc)
        assert unacked(broker) == before
        assert backlog(broker) == counted
        return
    assert named is not None, f"{mid} names nothing, yet the skip succeeded"
    after = unacked(broker)
    assert after == [k for k in before if k not in named]


SETTINGS = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.slow
@given(mid=message_ids())
@example(mid=MessageId(1, 2**32, -1, 0))
@example(mid=MessageId(1, 2**32))
@example(mid=MessageId(1, -(2**32) + 1))
@example(mid=MessageId(2, -1))
@example(mid=MessageId(1, INT64_MAX))
@example(mid=MessageId(INT64_MAX, 0))
@example(mid=MessageId(-1, -1))
@example(mid=MessageId(1, 0, -1, -5))
@example(mid=MessageId(1, 0, -1, INT32_MIN))
@example(mid=MessageId(1, 0, -1, INT32_MAX))
@example(mid=MessageId(1, 0, -2, 0))
@SETTINGS
def test_skip_by_message_id_and_base64(space: tuple[Broker, World], mid: MessageId) -> None:
    broker, world = space
    check(
        broker,
        world,
        mid,
        lambda: skips.skip_messages(broker.gated, "admin", TOPIC, "s", [mid]),
        rest=False,
    )
    wire = MessageId.from_base64(mid.to_base64())
    check(
        broker,
        world,
        wire,
        lambda: skips.skip_messages(broker.gated, "admin", TOPIC, "s", [wire]),
        rest=False,
    )


@pytest.mark.slow
@given(mid=message_ids())
@example(mid=MessageId(1, 2**32, -1, 0))
@example(mid=MessageId(3, 0, -1, -7))
@SETTINGS
def test_skip_by_rest_body(space: tuple[Broker, World], mid: MessageId) -> None:
    """The REST ``messageId`` shape: an absent or negative batchIndex is the whole entry."""
    broker, world = space
    body = {
        "type": "messageId",
        "messageIds": [{"ledgerId": mid.ledger_id, "entryId": mid.entry_id}],
    }
    if mid.batch_index != -1:
        body["messageIds"][0]["batchIndex"] = str(mid.batch_index)  # type: ignore[index]

    def skip() -> None:
        skips.skip_messages(broker.gated, "admin", TOPIC, "s", parse_payload(body))

    check(
        broker, world, MessageId(mid.ledger_id, mid.entry_id, -1, mid.batch_index), skip, rest=True
    )
    by_bytes = ["".join(mid.to_base64().split("="))]  # unpadded, as Java's decoder takes it

    def skip_bytes() -> None:
        skips.skip_messages(broker.gated, "admin", TOPIC, "s", parse_payload(by_bytes))

    check(broker, world, mid, skip_bytes, rest=False)


@given(
    text=st.one_of(
        st.builds(
            lambda ledger, e, b: f"{ledger}:{e}" + ("" if b is None else f":{b}"),
            int64s,
            int64s,
            st.none() | int32s,
        ),
        st.text(max_size=30),
    )
)
@example(text="1:4294967296:0")
@example(text="1:9223372036854775807")
@example(text="1:9223372036854775808")
@example(text="1:0:-1")
@SETTINGS
def test_skip_by_triplet(space: tuple[Broker, World], text: str) -> None:
    broker, world = space
    try:
        mid = MessageId.parse_triplet(text)
    except InvalidMessageIdError as exc:
        assert "\n" not in str(exc).replace(text, "")
        return
    check(
        broker,
        world,
        mid,
        lambda: skips.skip_messages(broker.gated, "admin", TOPIC, "s", [mid]),
        rest=False,
    )


# -- the example, at full ledger size ---------------------------------------


@pytest.fixture
def big_ledger(broker: Broker) -> list[MessageId]:
    """Ledger 1 full (50,000 entries, the default rollover), ledger 2 with 3 batches of 2."""
    broker.admin.create_topic("admin", TOPIC, partitions=0)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    ids = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(100_006)], batch_size=2
    )
    assert {m.ledger_id for m in ids} == {1, 2}
    return ids


def test_entry_two_to_the_32_is_refused_and_the_next_ledger_is_delivered(
    broker: Broker, big_ledger: list[MessageId], clock: Clock
) -> None:
    before, counted = unacked(broker), backlog(broker)
    for text in ("1:4294967296:0", "1:4294967296", "1:9223372036854775807", "1:50000"):
        with pytest.raises(EntryNotFoundError, match="ledger 1 holds 50000 entries") as info:
            skips.skip_messages(broker.gated, "admin", TOPIC, "s", [MessageId.parse_triplet(text)])
        assert "\n" not in str(info.value)
    with pytest.raises(InvalidBatchIndexError, match="Invalid batchIndex: -5, batchSize=2"):
        skips.skip_messages(
            broker.gated,
            "admin",
            TOPIC,
            "s",
            [MessageId.from_base64(MessageId(1, 0, -1, -5).to_base64())],
        )
    assert unacked(broker) == before
    assert backlog(broker) == counted
    # Read from the last entry of ledger 1 on: every message of ledger 2 comes after it.
    reset.reset_cursor(broker.gated, "admin", TOPIC, "s", position=Position(1, 49_999))
    remaining = backlog(broker)[0][2]
    received = broker.reading.consume("admin", TOPIC, "s", 100, ack=True)
    keys = [
        (m.message_id.ledger_id, m.message_id.entry_id, m.message_id.batch_index) for m in received
    ]
    assert keys == [(1, 49_999, 0), (1, 49_999, 1)] + [
        (2, e, i) for e in range(3) for i in range(2)
    ]
    assert remaining == len(received) == len(big_ledger) - 99_998

"""Seek on a consumer and on a reader, as Pulsar 4 does it: the broker resets the cursor and
disconnects the consumer, and the official client subscribes again from there."""

from __future__ import annotations

import time
import uuid

import pulsar
import pytest

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.ids.position import Position
from cursorops.wire.commands import CommandType, ServerError
from cursorops.wire.frames import command
from cursorops.wire.proto import Proto
from tests.protocol.harness import Standalone, drain, unique
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow

ROLE = "admin"


def _sent(client: pulsar.Client, topic: str, n: int) -> list[pulsar.MessageId]:
    """``n`` messages m-0 .. m-(n-1), one entry each, with distinct publish times."""
    producer = client.create_producer(topic, batching_enabled=False)
    sent = []
    for i in range(n):
        sent.append(producer.send(f"m-{i}".encode()))
        time.sleep(0.003)
    producer.close()
    return sent


def _texts(messages: list[pulsar.Message]) -> list[str]:
    return [m.data().decode() for m in messages]


def test_seek_to_earliest_after_acknowledging_delivers_everything_again(
    client: pulsar.Client,
) -> None:
    topic = unique("seek")
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    for i in range(20):
        producer.send(f"m-{i}".encode())
    for _ in range(20):
        consumer.acknowledge(consumer.receive(5000))
    consumer.seek(pulsar.MessageId.earliest)
    assert _texts(drain(consumer, 1500)) == [f"m-{i}" for i in range(20)]
    consumer.close()


def test_a_seek_by_time_after_a_seek_by_id_starts_at_that_time(client: pulsar.Client) -> None:
    topic = unique("seek")
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    ids = _sent(client, topic, 10)
    times = []
    assert len(drain(consumer, 800)) == 10
    consumer.seek(ids[7])
    # The client's start id is exclusive for a consumer: m-7 itself is dropped by it.
    assert _texts(drain(consumer, 1000)) == ["m-8", "m-9"]
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    for _ in range(10):
        times.append(reader.read_next(5000).publish_timestamp())
    reader.close()
    consumer.seek(times[3])
    assert _texts(drain(consumer, 1000)) == [f"m-{i}" for i in range(3, 10)]
    consumer.close()


def test_a_reader_seeks_to_latest_and_reads_only_what_comes_after(client: pulsar.Client) -> None:
    topic = unique("seek")
    _sent(client, topic, 5)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(5000).data() == b"m-0"
    reader.seek(pulsar.MessageId.latest)
    assert not reader.has_message_available()
    client.create_producer(topic, batching_enabled=False).send(b"after")
    assert reader.read_next(5000).data() == b"after"
    reader.seek(pulsar.MessageId.earliest)
    assert reader.read_next(5000).data() == b"m-0"
    reader.close()


def test_a_reader_at_latest_inclusive_has_the_last_message_available(
    client: pulsar.Client,
) -> None:
    topic = unique("seek")
    _sent(client, topic, 3)
    reader = client.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
    assert reader.has_message_available()
    assert reader.read_next(5000).data() == b"m-2"
    assert not reader.has_message_available()
    reader.close()
    empty = client.create_reader(
        unique("seek"), pulsar.MessageId.latest, start_message_id_inclusive=True
    )
    assert not empty.has_message_available()
    empty.close()


def test_a_seek_to_a_batch_index_keeps_the_ack_set_exact(
    standalone: Standalone, client: pulsar.Client
) -> None:
    """Seek to index 6 of a batch of 10: the client hands out 7..9 (its start id is
    exclusive); what it acknowledged is never delivered again, the rest always is."""
    topic = unique("seek")
    consumer = client.subscribe(
        topic,
        "s",
        initial_position=pulsar.InitialPosition.Earliest,
        batch_index_ack_enabled=True,
    )
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=10, batching_max_publish_delay_ms=200
    )
    for i in range(10):
        producer.send_async(f"m-{i}".encode(), None)
    producer.flush()
    got = drain(consumer, 1000)
    assert len(got) == 10 and got[0].message_id().batch_index() == 0
    for message in got[:3]:
        consumer.acknowledge(message)
    consumer.seek(got[6].message_id())
    after = drain(consumer, 1000)
    assert _texts(after) == ["m-7", "m-8", "m-9"]
    consumer.acknowledge(after[0])
    consumer.acknowledge(after[2])
    consumer.close()
    mid = got[0].message_id()
    with standalone.broker() as broker:
        state = broker.analysis.cursor_state(ROLE, topic, "s")
    entry = Position(mid.ledger_id(), mid.entry_id())
    assert [i for i in range(10) if state.is_acked(entry, i)] == [7, 9]
    again = client.subscribe(topic, "s")
    assert _texts(drain(again, 1000)) == [f"m-{i}" for i in (0, 1, 2, 3, 4, 5, 6, 8)]
    again.close()


def test_every_consumer_of_the_subscription_reads_from_the_seek(client: pulsar.Client) -> None:
    topic = unique("seek")
    shared = pulsar.ConsumerType.Shared
    a = client.subscribe(topic, "s", consumer_type=shared, consumer_name="a")
    b = client.subscribe(topic, "s", consumer_type=shared, consumer_name="b")
    _sent(client, topic, 10)
    for consumer in (a, b):
        for message in drain(consumer, 800):
            consumer.acknowledge(message)
    a.seek(pulsar.MessageId.earliest)
    again = drain(a, 1000) + drain(b, 500)
    assert sorted(_texts(again)) == sorted(f"m-{i}" for i in range(10))
    a.close()
    b.close()


def test_a_durable_seek_on_an_approval_namespace_is_refused_and_a_reader_seeks_freely(
    standalone: Standalone, client: pulsar.Client
) -> None:
    namespace = f"public/gated-{uuid.uuid4().hex[:6]}"
    with standalone.broker() as broker:
        broker.admin.create_namespace(ROLE, namespace)
        broker.admin.set_namespace_policy(ROLE, namespace, skip_requires_approval=True)
    topic = f"persistent://{namespace}/t"
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    last = _sent(client, topic, 3)[-1]
    for message in drain(consumer, 800):
        consumer.acknowledge(message)
    before = Position(last.ledger_id(), last.entry_id())
    # The client sends acknowledgements grouped: wait until they are in.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with standalone.broker() as broker:
            if broker.analysis.cursor_state(ROLE, topic, "s").mark_delete == before:
                break
        time.sleep(0.05)
    with pytest.raises(pulsar.PulsarException):
        consumer.seek(pulsar.MessageId.earliest)
    with standalone.broker() as broker:
        assert broker.analysis.cursor_state(ROLE, topic, "s").mark_delete == before
    # Still connected, still at its position: nothing comes again.
    assert drain(consumer, 500) == []
    consumer.close()

    reader = client.create_reader(topic, pulsar.MessageId.latest)
    reader.seek(pulsar.MessageId.earliest)
    assert reader.read_next(5000).data() == b"m-0"
    reader.close()


def test_a_seek_with_an_ack_set_keeps_the_indexes_before_it_acknowledged(
    standalone: Standalone,
) -> None:
    """A client that sends the ack set with a batch id (the Java client: a set bit is a
    message still to deliver) seeks into the batch: the others stay acknowledged."""
    topic = unique("seek")
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.producer(topic)
        receipt = raw.send_message(b"", 1, batch=[f"m-{i}".encode() for i in range(10)])
        raw.subscribe(topic, "s", 0)
        at = receipt["message_id"]
        raw.send(
            command(
                CommandType.SEEK,
                consumer_id=1,
                request_id=7,
                message_id={
                    "ledgerId": at["ledgerId"],
                    "entryId": at["entryId"],
                    "ack_set": ack_set.to_words(0b1111000000),
                },
            )
        )
        assert raw.expect(CommandType.CLOSE_CONSUMER)["consumer_id"] == 1
        assert raw.expect(CommandType.SUCCESS)["request_id"] == 7
        with standalone.broker() as broker:
            state = broker.analysis.cursor_state(ROLE, topic, "s")
        entry = Position(at["ledgerId"], at["entryId"])
        assert [i for i in range(10) if not state.is_acked(entry, i)] == [6, 7, 8, 9]
        raw.subscribe(topic, "s", 0)
        raw.send(command(CommandType.FLOW, consumer_id=1, messagePermits=100))
        delivered = raw.expect(CommandType.MESSAGE)
        assert ack_set.unacked_indexes(ack_set.from_words(delivered["ack_set"])) == [6, 7, 8, 9]


def _non_durable_subscribe(standalone: Standalone, topic: str, subscription: str) -> Proto:
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.send(
            command(
                CommandType.SUBSCRIBE,
                topic=topic,
                subscription=subscription,
                subType=0,
                consumer_id=1,
                request_id=9,
                durable=False,
            )
        )
        return _answer(raw)


def _answer(raw: RawClient) -> Proto:
    frame = raw.recv(5.0)
    while frame.type not in (CommandType.SUCCESS, CommandType.ERROR):
        frame = raw.recv(5.0)
    return {"type": frame.type, **frame.body}


def test_a_reader_may_not_take_a_durable_subscription_where_seeks_are_gated(
    standalone: Standalone, client: pulsar.Client
) -> None:
    """Its cursor would move freely (a reader's seek is not gated): refused, as Pulsar
    refuses a non-durable subscription of a durable one's name. Elsewhere a reader takes a
    subscription it finds (one of its own, left by a standalone that restarted)."""
    namespace = f"public/gated-{uuid.uuid4().hex[:6]}"
    with standalone.broker() as broker:
        broker.admin.create_namespace(ROLE, namespace)
        broker.admin.set_namespace_policy(ROLE, namespace, skip_requires_approval=True)
    gated = f"persistent://{namespace}/t"
    client.subscribe(gated, "durable").close()
    error = _non_durable_subscribe(standalone, gated, "durable")
    assert error["type"] is CommandType.ERROR
    assert error["error"] == ServerError.NotAllowedError
    assert "Durable subscription" in error["message"]

    ordinary = unique("seek")
    client.create_producer(ordinary).close()
    with standalone.broker() as broker:
        broker.admin.create_subscription(ROLE, ordinary, "reader-left-over")
    assert _non_durable_subscribe(standalone, ordinary, "reader-left-over")["type"] is (
        CommandType.SUCCESS
    )


def test_a_seek_without_a_target_or_of_no_consumer_is_refused_and_changes_nothing(
    standalone: Standalone,
) -> None:
    topic = unique("seek")
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.producer(topic)
        raw.send_message(b"x", 1)
        raw.subscribe(topic, "s", 0)
        with standalone.broker() as broker:
            before = broker.analysis.cursor_state(ROLE, topic, "s")
        for request_id, fields in ((20, {"consumer_id": 1}), (21, {"consumer_id": 99})):
            raw.send(command(CommandType.SEEK, request_id=request_id, **fields))
            assert raw.expect(CommandType.ERROR)["request_id"] == request_id
        with standalone.broker() as broker:
            assert broker.analysis.cursor_state(ROLE, topic, "s") == before
        raw.send(command(CommandType.PING))
        raw.expect(CommandType.PONG)

"""Producer names and access modes (PIP-68), as Pulsar's broker admits producers."""

from __future__ import annotations

import threading

import pulsar
import pytest

from cursorops.wire.commands import CommandType, ProducerAccessMode, ServerError
from cursorops.wire.frames import command
from cursorops.wire.proto import Proto
from tests.protocol.harness import Standalone, drain, unique
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow

Mode = pulsar.ProducerAccessMode


def test_a_producer_name_in_use_is_refused_until_it_is_free(client: pulsar.Client) -> None:
    topic = unique("names")
    first = client.create_producer(topic, producer_name="p")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name="p")
    client.create_producer(unique("names"), producer_name="p").close()  # another topic
    first.close()
    client.create_producer(topic, producer_name="p").close()


def test_exclusive_is_fenced_by_any_producer_and_refuses_shared_ones(
    client: pulsar.Client,
) -> None:
    topic = unique("access")
    exclusive = client.create_producer(topic, producer_name="x", access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, producer_name="y", access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name="z")
    exclusive.send(b"still mine")
    exclusive.close()
    shared = client.create_producer(topic, producer_name="s")
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, producer_name="x2", access_mode=Mode.Exclusive)
    shared.close()


def test_wait_for_exclusive_takes_the_topic_when_the_holder_leaves(
    client: pulsar.Client,
) -> None:
    topic = unique("access")
    consumer = client.subscribe(topic, "s")
    holder = client.create_producer(topic, producer_name="a", access_mode=Mode.Exclusive)
    created: list[pulsar.Producer] = []
    waiter = threading.Thread(
        target=lambda: created.append(
            client.create_producer(topic, producer_name="b", access_mode=Mode.WaitForExclusive)
        )
    )
    waiter.start()
    waiter.join(1.5)
    assert waiter.is_alive() and not created  # still waiting while "a" holds the topic
    holder.send(b"from a")
    holder.close()
    waiter.join(10)
    assert created
    created[0].send(b"from b")
    assert [m.data() for m in drain(consumer, 1000)] == [b"from a", b"from b"]
    created[0].close()
    consumer.close()


def test_exclusive_with_fencing_takes_the_topic_and_the_old_producer_is_fenced(
    client: pulsar.Client,
) -> None:
    topic = unique("access")
    consumer = client.subscribe(topic, "s")
    old = client.create_producer(
        topic, producer_name="old", access_mode=Mode.Exclusive, send_timeout_millis=5000
    )
    old.send(b"before")
    new = client.create_producer(topic, producer_name="new", access_mode=Mode.ExclusiveWithFencing)
    with pytest.raises((pulsar.ProducerFenced, pulsar.AlreadyClosed)):
        old.send(b"fenced")
    new.send(b"after")
    assert [m.data() for m in drain(consumer, 1000)] == [b"before", b"after"]
    new.close()
    consumer.close()


def test_each_exclusive_producer_moves_the_topic_epoch_and_an_older_one_is_fenced(
    standalone: Standalone,
) -> None:
    topic = unique("epoch")
    with RawClient(standalone.port) as raw:
        raw.connect()

        def open_exclusive(
            producer_id: int, answer: CommandType = CommandType.PRODUCER_SUCCESS, **fields: object
        ) -> Proto:
            raw.send(
                command(
                    CommandType.PRODUCER,
                    topic=topic,
                    producer_id=producer_id,
                    request_id=producer_id,
                    producer_access_mode=int(ProducerAccessMode.Exclusive),
                    **fields,
                )
            )
            return raw.expect(answer)

        epochs = []
        for producer_id in (1, 2):
            answer = open_exclusive(producer_id)
            epochs.append(answer["topic_epoch"])
            raw.send(command(CommandType.CLOSE_PRODUCER, producer_id=producer_id, request_id=90))
            raw.expect(CommandType.SUCCESS)
        assert epochs == [0, 1]
        refused = open_exclusive(3, CommandType.ERROR, topic_epoch=0)
        assert refused["error"] == ServerError.ProducerFenced
        assert open_exclusive(4, topic_epoch=1)["topic_epoch"] == 1

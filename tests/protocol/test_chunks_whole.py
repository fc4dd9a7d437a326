"""A chunked message is whole or nothing, with the official client: what a redrive
publishes, and what comes again after a negative acknowledgement, a consumer that
closes, an acknowledgement timeout or a seek is the whole message, as sent."""

from __future__ import annotations

import os
from pathlib import Path

import pulsar
import pytest

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.gating import redrive
from cursorops.core.services.gating.redrive import ORIGIN_PROPERTY, REDRIVE_PROPERTY
from tests.protocol.certs import message_keys
from tests.protocol.harness import Standalone, drain, unique

pytestmark = pytest.mark.slow

ROLE = "admin"
BIG = 11 * 1024 * 1024
"""Past the standalone's maximum message size (5 MiB): three chunks."""


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> pulsar.CryptoKeyReader:
    folder: Path = tmp_path_factory.mktemp("keys")
    public, private = message_keys(folder)
    return pulsar.CryptoKeyReader(str(public), str(private))


def dead_letter_topic(
    standalone: Standalone,
    client: pulsar.Client,
    prefix: str,
    crypto: pulsar.CryptoKeyReader | None,
) -> tuple[str, str, pulsar.Consumer]:
    """A new topic, its subscription ``s`` (a Shared consumer, reading with ``crypto``) and
    its dead-letter topic ``<topic>-s-DLQ``, read by ``dlq-reader`` from the earliest."""
    topic = unique(prefix)
    dlq = f"{topic}-s-DLQ"
    consumer = client.subscribe(
        topic, "s", consumer_type=pulsar.ConsumerType.Shared, crypto_key_reader=crypto
    )
    with standalone.broker() as broker:
        broker.admin.create_topic(ROLE, dlq)
        broker.admin.create_subscription(
            ROLE, dlq, "dlq-reader", SubscriptionType.SHARED, initial_position="earliest"
        )
    return topic, dlq, consumer


def left_on(
    client: pulsar.Client, dlq: str, crypto: pulsar.CryptoKeyReader | None = None
) -> list[pulsar.Message]:
    """What ``dlq-reader`` still has to read on ``dlq`` (reading with ``crypto``)."""
    reader = client.subscribe(
        dlq, "dlq-reader", consumer_type=pulsar.ConsumerType.Shared, crypto_key_reader=crypto
    )
    left = drain(reader)
    reader.close()
    return left


@pytest.mark.parametrize("sent_as", ["lz4", "encrypted"])
def test_a_chunked_dead_letter_is_redriven_whole_as_sent(
    standalone: Standalone,
    client: pulsar.Client,
    keys: pulsar.CryptoKeyReader,
    sent_as: str,
) -> None:
    crypto = keys if sent_as == "encrypted" else None
    topic, dlq, consumer = dead_letter_topic(standalone, client, "redrive", crypto)
    # A dead-letter producer that chunks, as one must for a message past the maximum size.
    producer = client.create_producer(
        dlq,
        batching_enabled=False,
        chunking_enabled=True,
        compression_type=pulsar.CompressionType.LZ4,
        encryption_key="chunks-key" if crypto else None,
        crypto_key_reader=crypto,
    )
    big = os.urandom(BIG)
    producer.send(big, properties={"REAL_TOPIC": topic}, partition_key="k")
    producer.close()
    with standalone.broker() as broker:
        plan = redrive.plan_redrive(broker.gated, ROLE, topic, "s")
        assert len(plan.ids) == 3  # every chunk, acknowledged on the DLQ together
        # What the approver reads and the quorum counts: one message.
        assert plan.messages == plan.preview()["messages"] == 1
        outcome = redrive.apply_redrive(broker.gated, ROLE, plan)
    assert len(outcome.published) == 3
    got = consumer.receive(15_000)
    assert got.data() == big
    assert got.partition_key() == "k"
    assert got.properties()["REAL_TOPIC"] == topic
    assert got.properties()[REDRIVE_PROPERTY] == plan.plan_id
    assert got.properties()[ORIGIN_PROPERTY] == plan.ids[0].triplet()
    consumer.acknowledge(got)
    consumer.close()
    assert left_on(client, dlq) == []


def _big_then_small(client: pulsar.Client, topic: str) -> tuple[bytes, bytes]:
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    big, small = os.urandom(BIG), b"after"
    producer.send(big, properties={"kind": "big"})
    producer.send(small)
    producer.close()
    return big, small


def test_a_negatively_acknowledged_chunked_message_comes_back_whole(
    client: pulsar.Client,
) -> None:
    topic = unique("nack")
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
    )
    big, small = _big_then_small(client, topic)
    first = consumer.receive(15_000)
    assert first.data() == big
    consumer.negative_acknowledge(first)
    got = {m.data(): m for m in (consumer.receive(15_000), consumer.receive(15_000))}
    assert set(got) == {big, small}
    again = got[big]
    assert again.properties() == {"kind": "big"}
    assert again.redelivery_count() >= 1
    for message in got.values():
        consumer.acknowledge(message)
    assert drain(consumer) == []
    consumer.close()


def test_a_shared_consumer_that_closes_leaves_the_whole_message_to_the_other(
    client: pulsar.Client,
) -> None:
    topic = unique("handover")
    first = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    big, small = _big_then_small(client, topic)
    assert first.receive(15_000).data() == big
    second = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    first.close()  # without acknowledging
    received = drain(second, 5_000)
    assert sorted(m.data() for m in received) == sorted([big, small])
    for message in received:
        second.acknowledge(message)
    second.close()


def test_two_shared_consumers_each_get_whole_messages(client: pulsar.Client) -> None:
    topic = unique("split")
    consumers = [
        client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=2
        )
        for _ in range(2)
    ]
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    sent = [os.urandom(6 * 1024 * 1024 + n) for n in range(4)]
    for payload in sent:
        producer.send_async(payload, None)
    producer.flush()
    producer.close()
    got: list[bytes] = []
    for consumer in consumers * 3:
        for message in drain(consumer, 2_000):
            got.append(message.data())
            consumer.acknowledge(message)
    assert sorted(got) == sorted(sent)
    for consumer in consumers:
        consumer.close()


def test_an_acknowledgement_timeout_sends_the_whole_message_again(
    client: pulsar.Client,
) -> None:
    topic = unique("timeout")
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        unacked_messages_timeout_ms=10_000,
    )
    big, _ = _big_then_small(client, topic)
    received = [consumer.receive(15_000), consumer.receive(15_000)]
    assert [m.data() for m in received][0] == big
    consumer.acknowledge(received[1])
    again = consumer.receive(30_000)
    assert again.data() == big and again.redelivery_count() >= 1
    consumer.acknowledge(again)
    consumer.close()


@pytest.mark.parametrize("subscription_type", ["Shared", "Exclusive"])
def test_a_seek_before_a_chunked_message_sends_it_again_whole(
    client: pulsar.Client, subscription_type: str
) -> None:
    topic = unique("seek")
    consumer = client.subscribe(
        topic, "s", consumer_type=getattr(pulsar.ConsumerType, subscription_type)
    )
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    big = os.urandom(BIG)
    for payload in (b"before", big, b"after"):
        producer.send(payload)
    producer.close()
    received = [consumer.receive(15_000) for _ in range(3)]
    assert [m.data() for m in received] == [b"before", big, b"after"]
    for message in received:
        consumer.acknowledge(message)
    # The client resumes after the id it seeks to (it drops that message itself), so a
    # seek to the message before the chunked one is the one that sends it again.
    consumer.seek(received[0].message_id())
    assert [m.data() for m in drain(consumer, 5_000)] == [big, b"after"]
    consumer.seek(received[1].publish_timestamp())
    assert [m.data() for m in drain(consumer, 5_000)] == [big, b"after"]
    consumer.close()


@pytest.mark.parametrize("batched", [False, True])
def test_an_encrypted_dead_letter_is_redriven_as_sent(
    standalone: Standalone,
    client: pulsar.Client,
    keys: pulsar.CryptoKeyReader,
    batched: bool,
) -> None:
    """The broker never reads an encrypted payload: a redrive publishes it as its client sent
    it, and the consumer with the key reads what the producer wrote."""
    topic, dlq, consumer = dead_letter_topic(standalone, client, "redrive-enc", keys)
    producer = client.create_producer(
        dlq,
        batching_enabled=batched,
        batching_max_publish_delay_ms=50,
        encryption_key="chunks-key",
        crypto_key_reader=keys,
    )
    sent = [f"secret-{i}".encode() for i in range(3)]
    for body in sent:
        producer.send_async(body, None, properties={"n": body.decode()}, partition_key="k")
    producer.flush()
    producer.close()
    with standalone.broker() as broker:
        if batched:
            # Sealed in one payload the broker cannot read: refused, nothing changes.
            with pytest.raises(InvalidArgumentError, match="encrypted batch"):
                redrive.plan_redrive(broker.gated, ROLE, topic, "s")
            consumer.close()
            assert sorted(m.data() for m in left_on(client, dlq, keys)) == sorted(sent)
            return
        plan = redrive.plan_redrive(broker.gated, ROLE, topic, "s")
        redrive.apply_redrive(broker.gated, ROLE, plan)
    got = [consumer.receive(15_000) for _ in sent]
    assert sorted(m.data() for m in got) == sorted(sent)
    assert all(m.properties()["n"] == m.data().decode() for m in got)
    assert all(m.partition_key() == "k" for m in got)
    for m in got:
        consumer.acknowledge(m)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1_000)
    consumer.close()
    assert left_on(client, dlq) == []

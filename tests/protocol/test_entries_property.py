"""Property: for any producer settings, what a consumer receives is what the producer
sent, field for field, through acknowledgements, negative acknowledgements and a
reconnect. Few examples: each one is a topic, a producer and two consumers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pulsar
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.protocol.certs import message_keys
from tests.protocol.harness import unique

pytestmark = pytest.mark.slow

CODECS = [
    pulsar.CompressionType.NONE,
    pulsar.CompressionType.LZ4,
    pulsar.CompressionType.ZLib,
    pulsar.CompressionType.ZSTD,
    pulsar.CompressionType.SNAPPY,
]
BIG = 5 * 1024 * 1024 + 4096
"""Past the standalone's maximum message size: sent in chunks when chunking is on."""


@dataclass(frozen=True)
class Sent:
    payload: bytes | None
    key: str | None
    properties: dict[str, str]
    event_time: int | None
    ordering_key: str | None
    delay_ms: int


texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=8)
message = st.builds(
    Sent,
    payload=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), texts.filter(bool)),
    properties=st.dictionaries(texts.filter(bool), texts, max_size=3),
    event_time=st.one_of(st.none(), st.integers(1, 2**40)),
    ordering_key=st.one_of(st.none(), st.text("abcxyz", min_size=1, max_size=6)),
    delay_ms=st.sampled_from([0, 0, 0, 300]),
)


@dataclass(frozen=True)
class Producing:
    batching: bool
    codec: pulsar.CompressionType
    chunking: bool
    encrypted: bool


producing = st.builds(
    Producing,
    batching=st.booleans(),
    codec=st.sampled_from(CODECS),
    chunking=st.booleans(),
    encrypted=st.booleans(),
)


@pytest.fixture(scope="module")
def crypto(tmp_path_factory: pytest.TempPathFactory) -> pulsar.CryptoKeyReader:
    folder: Path = tmp_path_factory.mktemp("property-keys")
    public, private = message_keys(folder)
    return pulsar.CryptoKeyReader(str(public), str(private))


def _rest(sent: Sent) -> tuple[str | None, dict[str, str], int | None, str | None, int]:
    return sent.key, sent.properties, sent.event_time, sent.ordering_key, sent.delay_ms


def _fields(message: pulsar.Message) -> tuple[object, ...]:
    """What the consumer got, in the shape of :class:`Sent` (with the index property)."""
    return (
        None if message.has_null_value() else message.data(),
        message.partition_key() or None,
        message.properties(),
        message.event_timestamp() or None,
        message.ordering_key() or None,
    )


def _expected(index: int, sent: Sent) -> tuple[object, ...]:
    return (
        sent.payload,
        sent.key,
        {**sent.properties, "index": str(index)},
        sent.event_time,
        sent.ordering_key,
    )


def _receive(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    out = []
    for _ in range(count):
        out.append(consumer.receive(15_000))
    return out


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    how=producing,
    sent=st.lists(message, min_size=1, max_size=10),
    big=st.booleans(),
    decisions=st.lists(st.sampled_from(["ack", "nack", "leave"]), min_size=11, max_size=11),
)
def test_the_consumer_receives_what_the_producer_sent(
    client: pulsar.Client,
    crypto: pulsar.CryptoKeyReader,
    how: Producing,
    sent: list[Sent],
    big: bool,
    decisions: list[str],
) -> None:
    chunking = how.chunking and not how.batching
    if how.codec == pulsar.CompressionType.ZLib:
        # The C++ client cannot inflate a ZLIB entry whose payload is empty (it discards
        # it as corrupt, from Pulsar too): what its own producer writes for an empty or
        # null message sent alone (not batched, or delayed). docs/decisions.md.
        sent = [s if s.payload else Sent(b"z", *_rest(s)) for s in sent]
    if big and chunking:
        sent = [*sent, Sent(os.urandom(BIG), "big", {}, None, None, 0)]
    reader = crypto if how.encrypted else None
    topic = unique("property")

    def subscribe() -> pulsar.Consumer:
        return client.subscribe(
            topic,
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            crypto_key_reader=reader,
            negative_ack_redelivery_delay_ms=100,
            batch_index_ack_enabled=True,
        )

    consumer = subscribe()
    producer = client.create_producer(
        topic,
        batching_enabled=how.batching,
        batching_max_messages=4,
        batching_max_publish_delay_ms=20,
        compression_type=how.codec,
        chunking_enabled=chunking,
        encryption_key="property-key" if reader else None,
        crypto_key_reader=reader,
    )
    for index, one in enumerate(sent):
        producer.send_async(
            one.payload,
            None,
            properties={**one.properties, "index": str(index)},
            partition_key=one.key,
            ordering_key=one.ordering_key,
            event_timestamp=one.event_time,
            deliver_after=timedelta(milliseconds=one.delay_ms) if one.delay_ms else None,
        )
    producer.flush()
    producer.close()

    def check(received: list[pulsar.Message], wanted: set[int]) -> dict[int, pulsar.Message]:
        by_index = {int(m.properties()["index"]): m for m in received}
        assert set(by_index) == wanted and len(received) == len(wanted)
        for index, got in by_index.items():
            assert _fields(got) == _expected(index, sent[index])
        return by_index

    everything = set(range(len(sent)))
    first = check(_receive(consumer, len(sent)), everything)
    acked = {i for i in everything if decisions[i] == "ack"}
    # A chunked message is not nacked here: the broker redelivers the chunk ids the
    # client names, not its message's other chunks (docs/decisions.md).
    nacked = {i for i in everything if decisions[i] == "nack" and sent[i].key != "big"}
    left = everything - acked - nacked
    decisions = [d if i in acked | nacked else "leave" for i, d in enumerate(decisions)]
    for i in sorted(everything):
        if decisions[i] == "ack":
            consumer.acknowledge(first[i])
        elif decisions[i] == "nack":
            consumer.negative_acknowledge(first[i])
    # The nacked come back; so may the unacknowledged of their batches (a batch is
    # redelivered whole but for what is acknowledged in it), never an acknowledged one.
    again: dict[int, pulsar.Message] = {}
    while not nacked <= set(again):
        message = consumer.receive(15_000)
        index = int(message.properties()["index"])
        assert index in nacked | left
        assert _fields(message) == _expected(index, sent[index])
        again[index] = message
    for index in nacked:
        consumer.acknowledge(again[index])
    consumer.close()
    # What was left unacknowledged comes back to a new consumer, and nothing else.
    consumer = subscribe()
    check(_receive(consumer, len(left)), left)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(800)
    consumer.close()

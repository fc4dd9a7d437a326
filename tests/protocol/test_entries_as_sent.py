"""Entries kept as sent: the official client gets back what it produced, encrypted,
compressed, chunked or null, and the broker adds only what it owns."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from cursorops.cli import output
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.gating import skip as skips
from cursorops.wire import commands
from cursorops.wire.commands import CommandType
from cursorops.wire.frames import command, encode_payload_frame
from cursorops.wire.proto import encode
from tests.protocol.certs import message_keys
from tests.protocol.harness import Standalone, drain, unique
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow

ROLE = "admin"

CODECS = [
    pulsar.CompressionType.NONE,
    pulsar.CompressionType.LZ4,
    pulsar.CompressionType.ZLib,
    pulsar.CompressionType.ZSTD,
    pulsar.CompressionType.SNAPPY,
]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> pulsar.CryptoKeyReader:
    """An RSA key pair made for the test, as PEM files the client reads."""
    folder: Path = tmp_path_factory.mktemp("keys")
    public, private = message_keys(folder)
    return pulsar.CryptoKeyReader(str(public), str(private))


def _payloads(n: int, size: int = 40) -> list[bytes]:
    # Compressible (a repeated pattern) and distinct per message.
    return [(f"m{i:04d}-" * size).encode()[:size] + os.urandom(4) for i in range(n)]


def _round_trip(
    client: pulsar.Client,
    *,
    codec: pulsar.CompressionType,
    batched: bool,
    crypto: pulsar.CryptoKeyReader | None,
) -> None:
    topic = unique("sent")
    consumer = client.subscribe(
        topic, "s", crypto_key_reader=crypto, consumer_type=pulsar.ConsumerType.Shared
    )
    producer = client.create_producer(
        topic,
        compression_type=codec,
        batching_enabled=batched,
        batching_max_messages=8,
        batching_max_publish_delay_ms=20,
        encryption_key="app-key" if crypto else None,
        crypto_key_reader=crypto,
    )
    sent = _payloads(20)
    for i, payload in enumerate(sent):
        producer.send_async(payload, None, partition_key=f"k{i % 3}", properties={"i": str(i)})
    producer.flush()
    received = drain(consumer)
    assert [m.data() for m in received] == sent
    assert [m.partition_key() for m in received] == [f"k{i % 3}" for i in range(20)]
    assert [m.properties() for m in received] == [{"i": str(i)} for i in range(20)]
    if crypto is not None:
        context = received[0].encryption_context()
        assert context is not None
        used = context.keys()
        assert [k.key for k in used] == ["app-key"]
    for message in received:
        consumer.acknowledge(message)
    producer.close()
    consumer.close()


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "single"])
def test_compressed_entries_come_back_as_sent(
    client: pulsar.Client, codec: pulsar.CompressionType, batched: bool
) -> None:
    _round_trip(client, codec=codec, batched=batched, crypto=None)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "single"])
def test_encrypted_entries_are_decrypted_by_the_consumer(
    client: pulsar.Client,
    keys: pulsar.CryptoKeyReader,
    codec: pulsar.CompressionType,
    batched: bool,
) -> None:
    _round_trip(client, codec=codec, batched=batched, crypto=keys)


def test_an_encrypted_entry_is_stored_opaque(
    standalone: Standalone, client: pulsar.Client, keys: pulsar.CryptoKeyReader
) -> None:
    topic = unique("opaque")
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_publish_delay_ms=50,
        encryption_key="app-key",
        crypto_key_reader=keys,
        compression_type=pulsar.CompressionType.LZ4,
    )
    with standalone.broker() as broker:
        broker.admin.create_subscription(
            ROLE, topic, "peek", SubscriptionType.SHARED, initial_position="earliest"
        )
    for i in range(3):
        producer.send_async(f"secret-{i}".encode(), None)
    producer.flush()
    with standalone.broker() as broker:
        stored = broker.reading.peek_messages(ROLE, topic, "peek", 10)
        plan = skips.plan_skip(broker.gated, ROLE, topic, "peek", [stored[0].message_id])
        [described] = broker.analysis.describe_messages(ROLE, plan, 5)
    assert len(stored) == 3
    assert described.payload_excerpt == b"" and described.encryption_keys == ("app-key",)
    assert described.payload_size == stored[0].stored_size
    assert all(m.payload == b"" and m.encryption_keys == ("app-key",) for m in stored)
    assert stored[0].stored_size is not None and stored[0].stored_size > 0
    # Shown as encrypted: its size and its key's name, never the bytes.
    line = output.message_line(output.message_json(stored[0]))
    assert f"<encrypted: {stored[0].stored_size} bytes, keys app-key>" in line
    doc = output.message_json(stored[0])
    assert (doc["payload"], doc["payloadEncoding"]) == ("", "encrypted")
    assert doc["encryptionKeys"] == ["app-key"]
    producer.close()


def test_a_null_value_arrives_as_a_null_value(client: pulsar.Client) -> None:
    topic = unique("null")
    consumer = client.subscribe(topic, "s")
    for batched in (False, True):
        producer = client.create_producer(
            topic, batching_enabled=batched, batching_max_publish_delay_ms=20
        )
        producer.send_async(None, None, partition_key="gone")
        producer.send_async(b"", None, partition_key="empty")
        producer.flush()
        producer.close()
    received = drain(consumer)
    assert [(m.partition_key(), m.has_null_value()) for m in received] == [
        ("gone", True),
        ("empty", False),
    ] * 2
    consumer.close()


def test_a_chunked_message_arrives_whole(client: pulsar.Client) -> None:
    topic = unique("chunk")
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    big = os.urandom(6 * 1024 * 1024 + 123)
    small = b"after"
    producer.send(big, properties={"kind": "big"})
    producer.send(small)
    first = consumer.receive(10_000)
    assert len(first.data()) == len(big) and first.data() == big
    assert first.properties() == {"kind": "big"}
    assert consumer.receive(10_000).data() == small
    producer.close()
    consumer.close()


def test_a_partly_acknowledged_batch_comes_back_exactly(client: pulsar.Client) -> None:
    topic = unique("partial")
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        batch_index_ack_enabled=True,
    )
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=10,
        batching_max_publish_delay_ms=100,
        compression_type=pulsar.CompressionType.LZ4,
    )
    sent = _payloads(10)
    for payload in sent:
        producer.send_async(payload, None)
    producer.flush()
    received = drain(consumer)
    assert [m.data() for m in received] == sent
    for message in received[::2]:
        consumer.acknowledge(message)
    consumer.close()
    again = client.subscribe(
        topic, "s", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True
    )
    assert [m.data() for m in drain(again)] == sent[1::2]
    again.close()
    producer.close()


@pytest.fixture
def raw(standalone: Standalone) -> Iterator[RawClient]:
    with RawClient(standalone.port) as c:
        c.connect()
        yield c


def test_metadata_bytes_are_dispatched_verbatim(raw: RawClient) -> None:
    topic = unique("raw")
    raw.producer(topic)
    raw.subscribe(topic, "s", 1)
    metadata = encode(
        commands.MessageMetadata,
        {
            "producer_name": "raw",
            "sequence_id": 7,
            "publish_time": 1234,
            "schema_version": b"\x00\x00\x00\x00\x00\x00\x00\x03",
            "partition_key": "k",
            "event_time": 99,
            "properties": [{"key": "a", "value": "b"}],
            "null_value": True,
        },
    )
    cmd = command(CommandType.SEND, producer_id=1, sequence_id=7, num_messages=1)
    raw.send_raw(encode_payload_frame(cmd, metadata, b""))
    raw.expect(CommandType.SEND_RECEIPT)
    raw.send(command(CommandType.FLOW, consumer_id=1, messagePermits=10))
    frame = raw.expect_frame(CommandType.MESSAGE)
    assert frame.raw_metadata == metadata
    assert frame.payload == b""


def test_schema_version_reaches_the_consumer(standalone: Standalone, raw: RawClient) -> None:
    topic = unique("schema")
    client = standalone.client()
    try:
        consumer = client.subscribe(topic, "s")
        raw.producer(topic)
        version = (3).to_bytes(8, "big")
        metadata = encode(
            commands.MessageMetadata,
            {
                "producer_name": "raw",
                "sequence_id": 1,
                "publish_time": 1,
                "schema_version": version,
            },
        )
        cmd = command(CommandType.SEND, producer_id=1, sequence_id=1, num_messages=1)
        raw.send_raw(encode_payload_frame(cmd, metadata, b"v3"))
        raw.expect(CommandType.SEND_RECEIPT)
        message = consumer.receive(5000)
        assert message.data() == b"v3"
        assert message.schema_version() == version.decode("ascii")
        consumer.close()
    finally:
        client.close()


def _backlog(standalone: Standalone, topic: str, subscription: str) -> int:
    with standalone.broker() as broker:
        parts = broker.analysis.analyze_backlog(ROLE, topic, subscription)
    return sum(part.result.messages for part in parts)


@pytest.mark.parametrize("chunk", ["first", "last"])
def test_a_chunked_message_is_one_message_to_the_backlog_and_to_a_skip(
    standalone: Standalone, client: pulsar.Client, chunk: str
) -> None:
    topic = unique("chunks")
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    with standalone.broker() as broker:
        broker.admin.create_subscription(
            ROLE, topic, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
    big = os.urandom(11 * 1024 * 1024)
    producer.send(b"before")
    producer.send(big)
    producer.send(b"after")
    producer.close()
    assert _backlog(standalone, topic, "s") == 3
    with standalone.broker() as broker:
        stored = broker.reading.peek_messages(ROLE, topic, "s", 10)
        chunks = [m for m in stored if m.chunk is not None]
        assert len(chunks) == 3 and {m.chunk[3] for m in chunks} == {len(big)}
        shown = output.whole_messages(stored)
        assert [
            output.message_line(output.message_json(m)).split("payload=")[1] for m in shown
        ] == [
            "before",
            f"<chunked message: {len(big)} bytes in 3 chunks>",
            "after",
        ]
        named = chunks[0] if chunk == "first" else chunks[-1]
        outcome = skips.skip_messages(broker.gated, ROLE, topic, "s", [named.message_id])
    assert len(outcome.skipped) == 3
    assert _backlog(standalone, topic, "s") == 2
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    assert [m.data() for m in drain(consumer)] == [b"before", b"after"]
    consumer.close()

"""Topic compaction through the admin path, read with ``read_compacted`` by the official
client: the latest message of each key through the horizon, null values deleting their
key, then the live tail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from tests.protocol.harness import Standalone, start, unique

pytestmark = pytest.mark.slow
"""The module starts standalones of its own (settings of their own): seconds each."""


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    server = start(Path(tmp_path_factory.mktemp("compaction")), web=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(standalone: Standalone) -> Iterator[pulsar.Client]:
    c = standalone.client()
    try:
        yield c
    finally:
        c.close()


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://") + "/compaction"


def _read(reader: pulsar.Reader) -> list[tuple[str, bytes | None]]:
    got = []
    while True:
        try:
            message = reader.read_next(1500)
        except pulsar.Timeout:
            return got
        value = None if message.has_null_value() else message.data()
        got.append((message.partition_key(), value))


def test_compaction_keeps_the_latest_per_key_then_the_tail(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = unique("compact")
    producer = client.create_producer(topic, batching_enabled=False)
    sent: list[tuple[str, bytes | None]] = [
        ("k1", b"v1"),
        ("k2", b"v1"),
        ("k1", b"v2"),
        ("k3", b"v1"),
        ("k2", None),
        ("", b"no key"),
        ("k1", b"v3"),
    ]
    for key, value in sent:
        if key:
            producer.send(value, partition_key=key)
        else:
            producer.send(value)
    with httpx.Client(base_url=str(standalone.web_url)) as web:
        assert web.get(_path(topic)).json()["status"] == "NOT_RUN"
        assert web.put(_path(topic)).status_code == 204
        assert web.get(_path(topic)).json()["status"] == "SUCCESS"
        assert web.put(_path(unique("missing"))).status_code == 404
    producer.send(b"v4", partition_key="k1")
    compacted = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert _read(compacted) == [("k3", b"v1"), ("k1", b"v3"), ("k1", b"v4")]
    plain = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [value for _, value in _read(plain)] == [v for _, v in sent] + [b"v4"]
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(
            topic, "shared", consumer_type=pulsar.ConsumerType.Shared, is_read_compacted=True
        )
    for closing in (producer, compacted, plain):
        closing.close()


def test_a_batch_keeps_only_its_latest_messages(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = unique("batches")
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=1000
    )
    for batch in ([("a", b"1"), ("b", b"1"), ("a", b"2")], [("b", b"2"), ("c", b"1")]):
        for key, value in batch:
            producer.send_async(value, None, partition_key=key)
        producer.flush()
    with httpx.Client(base_url=str(standalone.web_url)) as web:
        assert web.put(_path(topic)).status_code == 204
    consumer = client.subscribe(
        topic,
        "compacted",
        initial_position=pulsar.InitialPosition.Earliest,
        is_read_compacted=True,
    )
    got = []
    while True:
        try:
            message = consumer.receive(1500)
        except pulsar.Timeout:
            break
        got.append((message.partition_key(), message.data()))
        consumer.acknowledge(message)
    assert got == [("a", b"2"), ("b", b"2"), ("c", b"1")]
    for closing in (producer, consumer):
        closing.close()

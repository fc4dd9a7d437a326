"""A chunked message is whole or nothing, with the official client: what a redrive
publishes, and what comes again after a negative acknowledgement, a consumer that
closes, an acknowledgement timeout or a seek is the whole message, as sent."""

from __future__ import annotations

import os
from pathlib import Path

import pulsar
import pytest

from core.redriving.redrive_plan import ORIGIN_PROPERTY, REDRIVE_PROPERTY
from core.subscription import SubscriptionType
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


@pytest.mark.parametrize("sent_as", ["lz4", "encrypted"])
def test_a_chunked_dead_letter_is_redriven_whole_as_sent(
    standalone: Standalone,
    client: pulsar.Client,
    keys: pulsar.CryptoKeyReader,
    sent_as: str,
) -> None:
    topic = unique("redrive")
    dlq = f"{topic}-s-DLQ"
    crypto = keys if sent_as == "encrypted" else None
    consumer = client.subscribe(
        topic, "s", consumer_type=pulsar.ConsumerType.Shared, crypto_key_reader=crypto
    )
    with standalone.broker() as broker:
        broker.create_topic(ROLE, dlq)
        broker.create_subscription(
            ROLE, dlq, "dlq-reader", SubscriptionType.SHARED, initial_position="earliest"
        )
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
        plan = broker.plan_redrive(ROLE, topic, "s")
        assert len(plan.ids) == 3  # every chunk, acknowledged on the DLQ together
        outcome = broker.apply_redrive(ROLE, plan)
    assert len(outcome.published) == 3
    got = consumer.receive(15_000)
    assert got.data() == big
    assert got.partition_key() == "k"
    assert got.properties()["REAL_TOPIC"] == topic
    assert got.properties()[REDRIVE_PROPERTY] == plan.plan_id
    assert got.properties()[ORIGIN_PROPERTY] == plan.ids[0].triplet()
    consumer.acknowledge(got)
    consumer.close()
    reader = client.subscribe(dlq, "dlq-reader", consumer_type=pulsar.ConsumerType.Shared)
    assert drain(reader) == []
    reader.close()

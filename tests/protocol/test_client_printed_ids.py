"""What the official Python client prints for a message id, ``str(msg.message_id())``, is an
id ``cursorops topics skip-messages`` takes as it is, on a topic and on a partition of a
partitioned topic, and the skip prints the same form back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pulsar
import pytest

from cursorops.core.domain.subscription import SubscriptionType
from tests.protocol.harness import Standalone, drain, unique

pytestmark = pytest.mark.slow


def _skip(standalone: Standalone, topic: str, *ids: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    command = [sys.executable, "-m", "cursorops.cli.main", "--home", str(standalone.home)]
    return subprocess.run(
        [*command, "-o", "json", "topics", "skip-messages", topic, "-s", "s", "--message-id", *ids],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _received(standalone: Standalone, client: pulsar.Client, topic: str, count: int) -> list[str]:
    with standalone.broker() as broker:
        broker.admin.create_subscription(
            "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(b"m%d" % i, partition_key=str(i))
    producer.close()
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    printed = [str(message.message_id()) for message in drain(consumer)]
    consumer.close()
    assert len(printed) == count
    return printed


def test_the_printed_id_of_a_topic_is_taken(standalone: Standalone, client: pulsar.Client) -> None:
    topic = unique("printed")
    printed = _received(standalone, client, topic, 3)
    assert all(text.startswith("(") and text.endswith(",-1,-1)") for text in printed)
    done = _skip(standalone, topic, printed[1])
    assert done.returncode == 0, done.stderr
    assert [m["messageId"] for m in json.loads(done.stdout)["skipped"]] == [printed[1]]
    # With the spaces a person may type, and as the last "-1" spelled as a triplet.
    ledger, entry = printed[2].strip("()").split(",")[:2]
    done = _skip(standalone, topic, printed[2].replace(",", ", "))
    assert done.returncode == 0, done.stderr
    done = _skip(standalone, topic, f"{ledger}:{entry}:-1")
    assert done.returncode == 0, done.stderr
    skipped = json.loads(done.stdout)
    assert skipped["skipped"] == [] and len(skipped["alreadyAcknowledged"]) == 1


def test_the_printed_id_of_a_partition_is_taken(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = unique("printed-parts")
    with standalone.broker() as broker:
        broker.admin.create_topic("admin", topic, 2)
    printed = _received(standalone, client, topic, 6)
    partitions = {int(text.strip("()").split(",")[2]) for text in printed}
    assert partitions == {0, 1}
    done = _skip(standalone, topic, *printed[:2])
    assert done.returncode == 0, done.stderr
    assert sorted(m["messageId"] for m in json.loads(done.stdout)["skipped"]) == sorted(printed[:2])
    # An id whose partition is not its ledger's is refused, and nothing is skipped.
    ledger, entry, partition, batch = printed[2].strip("()").split(",")
    moved = f"({ledger},{entry},{1 - int(partition)},{batch})"
    done = _skip(standalone, topic, moved)
    assert done.returncode == 2 and "belongs to partition" in done.stderr, done.stderr
    done = _skip(standalone, topic, printed[2])
    assert done.returncode == 0 and len(json.loads(done.stdout)["skipped"]) == 1

"""Redelivery counts with the official client's dead-letter policy, as Pulsar counts them.

The client decides dead-lettering from the redelivery count the broker sends. Consumers
that come and go (closed, their process killed) hand their messages back uncounted, so no
healthy message reaches the dead-letter topic; a message negatively acknowledged past
``max_redeliver_count`` does, and only it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pulsar
import pytest

from tests.protocol.harness import Standalone, drain, unique

ROLE = "admin"
MESSAGES = 50
MAX_REDELIVER = 2

TYPES = {
    "Shared": pulsar.ConsumerType.Shared,
    "Key_Shared": pulsar.ConsumerType.KeyShared,
    "Failover": pulsar.ConsumerType.Failover,
}


def dead_letters(standalone: Standalone, dlq: str) -> int:
    """Entries on the dead-letter topic (0 when the client never created it)."""
    with standalone.broker() as broker:
        names = {t.name for t in broker.admin.list_topics(ROLE, "public/default")}
        return broker.analysis.entry_count(ROLE, dlq) if dlq in names else 0


def produce(client: pulsar.Client, topic: str) -> set[bytes]:
    producer = client.create_producer(topic, batching_enabled=False)
    sent = {f"m{i}".encode() for i in range(MESSAGES)}
    for i in range(MESSAGES):
        producer.send(f"m{i}".encode(), partition_key=f"k{i % 7}")
    producer.close()
    return sent


def subscribe(client: pulsar.Client, topic: str, kind: str, **kwargs: object) -> pulsar.Consumer:
    """A consumer as an application writes it: a dead-letter policy, the default queue."""
    return client.subscribe(
        topic,
        "s",
        consumer_type=TYPES[kind],
        initial_position=pulsar.InitialPosition.Earliest,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=MAX_REDELIVER),
        **kwargs,  # type: ignore[arg-type]
    )


def read_all(client: pulsar.Client, topic: str, kind: str) -> list[pulsar.Message]:
    consumer = subscribe(client, topic, kind)
    got = drain(consumer, 3000)
    for message in got:
        consumer.acknowledge(message)
    consumer.close()
    return got


@pytest.mark.parametrize("kind", sorted(TYPES))
def test_consumers_that_close_send_nothing_to_the_dead_letter_topic(
    standalone: Standalone, client: pulsar.Client, kind: str
) -> None:
    """Three times a consumer takes one message (its queue prefetches them all) and closes
    without acknowledging: every message comes back with its count unchanged, so the next
    consumer gets all 50, none dead-lettered."""
    topic = unique(f"restarts-{kind.lower()}")
    sent = produce(client, topic)
    for _ in range(MAX_REDELIVER + 1):
        consumer = subscribe(client, topic, kind)
        consumer.receive(5000)
        consumer.close()
    got = read_all(client, topic, kind)
    assert {m.data() for m in got} == sent and len(got) == MESSAGES
    assert {m.redelivery_count() for m in got} == {0}
    assert dead_letters(standalone, f"{topic}-s-DLQ") == 0


def test_only_the_negatively_acknowledged_message_is_dead_lettered(
    standalone: Standalone, client: pulsar.Client
) -> None:
    """A consumer acknowledges every message but one, which it negatively acknowledges each
    time: that one comes back with counts 0, 1, 2, then the client sends it to the
    dead-letter topic. Another consumer closing meanwhile counts nothing."""
    topic = unique("pill")
    sent = produce(client, topic)
    pill = b"m7"
    bystander = subscribe(client, topic, "Shared", receiver_queue_size=5)
    bystander.receive(5000)
    bystander.close()
    consumer = subscribe(client, topic, "Shared", negative_ack_redelivery_delay_ms=100)
    counts: list[int] = []
    done: set[bytes] = set()
    while (message := next_message(consumer)) is not None:
        if message.data() == pill:
            counts.append(message.redelivery_count())
            consumer.negative_acknowledge(message)
        else:
            done.add(message.data())
            consumer.acknowledge(message)
    consumer.close()
    assert counts == list(range(MAX_REDELIVER + 1))
    assert done == sent - {pill}
    dlq = f"{topic}-s-DLQ"
    deadline = time.monotonic() + 10
    while dead_letters(standalone, dlq) < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    reader = client.create_reader(dlq, pulsar.MessageId.earliest)
    assert [m.data() for m in drain_reader(reader)] == [pill]
    reader.close()


def next_message(consumer: pulsar.Consumer) -> pulsar.Message | None:
    """The next message, or None after 3 s of nothing."""
    try:
        return consumer.receive(3000)
    except pulsar.Timeout:
        return None


def drain_reader(reader: pulsar.Reader) -> list[pulsar.Message]:
    got = []
    while True:
        try:
            got.append(reader.read_next(1500))
        except pulsar.Timeout:
            return got


_CONSUMER = textwrap.dedent(
    """
    import sys, time
    import pulsar
    client = pulsar.Client(sys.argv[1], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    consumer = client.subscribe(
        sys.argv[2], "s", consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2),
    )
    consumer.receive(10000)
    print("holding", flush=True)
    time.sleep(600)
    """
)


def test_a_killed_consumer_process_sends_nothing_to_the_dead_letter_topic(
    standalone: Standalone, client: pulsar.Client
) -> None:
    """Three times a process running the client takes a message and is killed (SIGKILL):
    its connection is lost, the broker hands back what it held, uncounted."""
    topic = unique("killed")
    sent = produce(client, topic)
    repo = Path(__file__).resolve().parents[2]
    for _ in range(MAX_REDELIVER + 1):
        process = subprocess.Popen(
            [sys.executable, "-c", _CONSUMER, standalone.service_url, topic],
            stdout=subprocess.PIPE,
            text=True,
            cwd=repo,
            env={**os.environ, "PYTHONPATH": str(repo)},
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "holding"
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        assert process.returncode == -signal.SIGKILL
    got = read_all(client, topic, "Shared")
    assert {m.data() for m in got} == sent and len(got) == MESSAGES
    assert {m.redelivery_count() for m in got} == {0}
    assert dead_letters(standalone, f"{topic}-s-DLQ") == 0

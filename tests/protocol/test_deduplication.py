"""Message deduplication through the official client and the admin REST paths: a
duplicate is acknowledged and not stored, and a producer that comes back (after a
reconnect or a restart) learns its last stored sequence id."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from tests.protocol.harness import Standalone, drain, start, unique

pytestmark = pytest.mark.slow
"""The module starts standalones of its own (settings of their own): seconds each."""

NAMESPACE = "/admin/v2/namespaces/public/default/deduplication"
ROLE = "admin"


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    server = start(Path(tmp_path_factory.mktemp("dedup")), web=True)
    try:
        yield server
    finally:
        server.stop()


def _topic_path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://") + "/deduplicationEnabled"


def _received(client: pulsar.Client, topic: str) -> list[bytes]:
    consumer = client.subscribe(
        topic, unique("check").rsplit("/", 1)[1], initial_position=pulsar.InitialPosition.Earliest
    )
    try:
        return [m.data() for m in drain(consumer, 1000)]
    finally:
        consumer.close()


def test_the_admin_paths_set_and_answer_the_policy(standalone: Standalone) -> None:
    topic = unique("policy")
    with httpx.Client(base_url=str(standalone.web_url)) as web:
        assert web.get(NAMESPACE).json() is None
        assert web.post(NAMESPACE, json=True).status_code == 204
        assert web.get(NAMESPACE).json() is True
        assert web.delete(NAMESPACE).status_code == 204
        assert web.get(NAMESPACE).json() is None
        assert web.post(NAMESPACE, json="yes").status_code in (400, 422)
        # A topic's own policy: the topic must exist.
        assert web.post(_topic_path(topic), json=True).status_code == 404
        assert web.put("/admin/v2/persistent/" + topic.removeprefix("persistent://")).is_success
        assert web.post(_topic_path(topic), json=False).status_code == 204
        assert web.get(_topic_path(topic)).json() is False
        missing = web.get("/admin/v2/namespaces/public/nope/deduplication")
        assert missing.status_code == 404


def test_duplicates_are_acknowledged_and_not_stored(standalone: Standalone) -> None:
    topic = unique("dedup")
    client = standalone.client()
    with httpx.Client(base_url=str(standalone.web_url)) as web:
        assert web.put("/admin/v2/persistent/" + topic.removeprefix("persistent://")).is_success
        assert web.post(_topic_path(topic), json=True).status_code == 204
    try:
        producer = client.create_producer(topic, producer_name="p1", batching_enabled=False)
        assert producer.last_sequence_id() == -1
        for i in range(5):
            producer.send(f"m{i}".encode(), sequence_id=i)
        duplicate = producer.send(b"m2 again", sequence_id=2)
        assert (duplicate.ledger_id(), duplicate.entry_id()) == (-1, -1)
        producer.close()
        # Another producer name has its own sequence.
        other = client.create_producer(topic, producer_name="p2", batching_enabled=False)
        other.send(b"o0", sequence_id=0)
        other.close()
        # Reconnected, the producer learns where it was, and goes on from there.
        again = client.create_producer(topic, producer_name="p1", batching_enabled=True)
        assert again.last_sequence_id() == 4
        # A batch counts by its first sequence id: 3, 4 again are one duplicate batch,
        # 5 to 7 a new one.
        for batch in (range(3, 5), range(5, 8)):
            for i in batch:
                again.send_async(f"m{i}".encode(), None, sequence_id=i)
            again.flush()
        again.close()
        expected = [f"m{i}".encode() for i in range(5)] + [b"o0", b"m5", b"m6", b"m7"]
        assert _received(client, topic) == expected
    finally:
        client.close()


def test_without_deduplication_a_resend_is_stored_again(standalone: Standalone) -> None:
    topic = unique("plain")
    client = standalone.client()
    try:
        producer = client.create_producer(topic, producer_name="p", batching_enabled=False)
        producer.send(b"a", sequence_id=0)
        producer.send(b"a", sequence_id=0)
        producer.close()
        again = client.create_producer(topic, producer_name="p")
        assert again.last_sequence_id() == -1
        again.close()
        assert _received(client, topic) == [b"a", b"a"]
    finally:
        client.close()


@pytest.mark.slow
def test_the_last_sequence_id_survives_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = start(home, web=True)
    topic = unique("restart")
    try:
        with httpx.Client(base_url=str(server.web_url)) as web:
            assert web.post(NAMESPACE, json=True).status_code == 204
        client = server.client()
        producer = client.create_producer(topic, producer_name="p", batching_enabled=False)
        for i in range(3):
            producer.send(b"x", sequence_id=10 + i)
        client.close()
        server.stop()
        server = start(home)
        client = server.client()
        producer = client.create_producer(topic, producer_name="p")
        assert producer.last_sequence_id() == 12
        assert producer.send(b"dup", sequence_id=11).entry_id() == -1
        client.close()
    finally:
        server.stop()


class _Sender:
    """One producer's sends ``p0``, ``p1``, ... from a thread of its own until stopped, and
    what each send's callback said."""

    def __init__(self, client: pulsar.Client, topic: str, batching: bool) -> None:
        self.topic = topic
        self.producer = client.create_producer(
            topic,
            producer_name="p",
            batching_enabled=batching,
            batching_max_publish_delay_ms=5,
            block_if_queue_full=True,
            send_timeout_millis=120_000,
        )
        self.lock = threading.Lock()
        self.results: dict[int, pulsar.Result] = {}
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._send)
        self.thread.start()

    def _send(self) -> None:
        while not self.stop.is_set():
            self.producer.send_async(f"p{self.sent}".encode(), self._callback(self.sent))
            self.sent += 1
            if self.sent % 20 == 0:
                time.sleep(0.002)

    def _callback(self, i: int) -> object:
        def done(result: pulsar.Result, _: pulsar.MessageId) -> None:
            with self.lock:
                self.results[i] = result

        return done

    def receipted(self) -> set[int]:
        with self.lock:
            return {i for i, r in self.results.items() if r == pulsar.Result.Ok}

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(120)
        self.producer.flush()
        deadline = time.monotonic() + 120
        while len(self.results) < self.sent:
            assert time.monotonic() < deadline, "sends without an answer"
            time.sleep(0.05)


@pytest.mark.slow
def test_a_kill_9_in_the_middle_of_sends_leaves_every_send_once(tmp_path: Path) -> None:
    """With deduplication on, the official client's sends survive ``kill -9`` exactly
    once: a send its callback saw succeed is stored once, and nothing is stored twice,
    in the order sent. What was stored but not yet receipted when the process died is
    sent again by the client after the restart, and answered as a duplicate. A batching
    producer and a non-batching one send side by side, before, during and after."""
    home = tmp_path / "home"
    server = start(home)
    port = server.port
    with server.broker() as broker:
        broker.policies.set_deduplication(ROLE, "public/default", True)
    client = server.client()
    try:
        senders = [_Sender(client, unique("kill"), batching) for batching in (True, False)]
        deadline = time.monotonic() + 60
        while min(len(s.receipted()) for s in senders) < 300:
            assert time.monotonic() < deadline, "no receipts"
            time.sleep(0.002)
        server.process.kill()
        server.process.wait(10)
        receipted_at_kill = [s.receipted() for s in senders]
        server = start(home, broker_port=port)
        sent_by_restart = [s.sent for s in senders]
        for sender in senders:
            sender.finish()
        for sender, before, sent in zip(senders, receipted_at_kill, sent_by_restart, strict=True):
            # Sends were in flight across the kill.
            assert len(before) < sent
            receipted = sender.receipted()
            assert before <= receipted
            with server.broker() as broker:
                broker.admin.create_subscription(
                    ROLE, sender.topic, "check", initial_position="earliest"
                )
                stored = [
                    int(m.payload[1:])
                    for m in broker.reading.peek_messages(
                        ROLE, sender.topic, "check", 2 * sender.sent
                    )
                ]
            counts = Counter(stored)
            assert all(counts[i] == 1 for i in receipted), sender.topic
            assert max(counts.values()) == 1, sender.topic
            assert stored == sorted(stored)
            assert set(stored) <= set(range(sender.sent))
    finally:
        client.close()
        server.stop()

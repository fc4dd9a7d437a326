"""Message deduplication through the official client and the admin REST paths: a
duplicate is acknowledged and not stored, and a producer that comes back (after a
reconnect or a restart) learns its last stored sequence id."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from tests.protocol.harness import Standalone, drain, start, unique

NAMESPACE = "/admin/v2/namespaces/public/default/deduplication"


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

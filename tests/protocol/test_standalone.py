"""The standalone process: bootstrap, readers, the dead-letter policy, restarts, kill -9."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pulsar
import pytest

from cursorops.core.domain.config import Config
from cursorops.local.ports import free_port
from cursorops.wire.commands import CommandType, SubType
from cursorops.wire.frames import command
from tests.protocol.harness import Standalone, drain, start, unique
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow

ROLE = "admin"


def test_first_start_creates_public_default(standalone: Standalone) -> None:
    with standalone.broker() as broker:
        assert "public" in broker.admin.list_tenants(ROLE)
        assert "public/default" in broker.admin.list_namespaces(ROLE, "public")


def test_readers_from_the_start_and_after_an_id(client: pulsar.Client) -> None:
    topic = unique()
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    earliest = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [earliest.read_next(5000).data() for _ in range(5)] == [
        f"m{i}".encode() for i in range(5)
    ]
    after = client.create_reader(topic, ids[2])
    assert [after.read_next(5000).data() for _ in range(2)] == [b"m3", b"m4"]
    # The broker starts at the id's entry, as Pulsar's does; the client drops the id itself
    # unless its start is inclusive.
    at = client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    assert [at.read_next(5000).data() for _ in range(3)] == [b"m2", b"m3", b"m4"]
    latest = client.create_reader(topic, pulsar.MessageId.latest)
    producer.send(b"new")
    assert latest.read_next(5000).data() == b"new"
    for reader in (earliest, after, at, latest):
        reader.close()


def test_readers_leave_no_subscription(standalone: Standalone, client: pulsar.Client) -> None:
    topic = unique()
    client.create_producer(topic).send(b"x")
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    reader.read_next(5000)
    reader.close()
    time.sleep(0.3)
    with standalone.broker() as broker:
        assert broker.admin.list_subscriptions(ROLE, topic) == []


def test_dead_letter_policy_writes_an_ordinary_topic(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = unique()
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2),
    )
    client.create_producer(topic, batching_enabled=False).send(b"pill")
    for _ in range(3):
        consumer.negative_acknowledge(consumer.receive(5000))
    dlq = f"{topic}-s-DLQ"
    deadline = time.monotonic() + 10
    while True:
        with standalone.broker() as broker:
            names = [t.name for t in broker.admin.list_topics(ROLE, "public/default")]
            if dlq in names and broker.analysis.entry_count(ROLE, dlq) == 1:
                break
        assert time.monotonic() < deadline, names
        time.sleep(0.2)
    reader = client.create_reader(dlq, pulsar.MessageId.earliest)
    assert reader.read_next(5000).data() == b"pill"
    assert drain(consumer, 500) == []
    consumer.close()
    reader.close()


def test_sigint_stops_cleanly(tmp_path: Path) -> None:
    server = start(tmp_path / "home")
    client = server.client()
    try:
        consumer = client.subscribe(unique(), "s")
        assert server.stop(signal.SIGINT) == 0
        assert any("stopped" in line for line in server.lines)
        del consumer
    finally:
        client.close()
        server.stop()


def test_admin_rest_and_health_and_only_its_own_lines(tmp_path: Path) -> None:
    server = start(tmp_path / "home", web=True)
    try:
        assert server.web_url is not None
        with urllib.request.urlopen(f"{server.web_url}/admin/v2/brokers/health", timeout=10) as r:
            assert (r.status, r.read()) == (200, b"ok")
        topic = unique().split("://", 1)[1]
        request = urllib.request.Request(
            f"{server.web_url}/admin/v2/persistent/{topic}/partitions",
            data=b"3",
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.status in (200, 204)
        client = server.client()
        try:
            producer = client.create_producer(f"persistent://{topic}")
            receipts = [producer.send(b"x", partition_key=f"k{i}") for i in range(12)]
            assert {r.partition() for r in receipts} == {0, 1, 2}
        finally:
            client.close()
        with urllib.request.urlopen(
            f"{server.web_url}/admin/v2/persistent/public/default/partitioned", timeout=10
        ) as r:
            assert f"persistent://{topic}" in json.loads(r.read())
    finally:
        assert server.stop(signal.SIGINT) == 0
    # Every connection to the home's SQLite store was closed: none of its files stays open.
    home = tmp_path / "home"
    assert not list(home.glob("metadata.db-*")), sorted(p.name for p in home.iterdir())
    # Serving the REST app loads nothing that prints: no configuration messages, no
    # warnings, only the standalone's own lines.
    assert server.log.read_text() == ""
    printed = [line for line in server.lines if line.strip()]
    assert all(line.startswith("cursorops standalone ") for line in printed), printed


def test_kill_9_in_the_middle_of_produce_and_ack(tmp_path: Path) -> None:
    """Every receipted message and every receipted acknowledgement survives kill -9; the
    official client reconnects to the restarted standalone and goes on."""
    home = tmp_path / "home"
    port = free_port()
    server = start(home, broker_port=port)
    topic, acked_topic = unique(), unique()
    client = server.client()
    receipts: dict[bytes, tuple[int, int, int]] = {}
    try:
        # Acks first: 60 messages, acknowledged one by one with receipts (request ids).
        with RawClient(port) as raw:
            raw.connect()
            raw.producer(acked_topic)
            for i in range(60):
                raw.send_message(f"a{i}".encode(), i)
            raw.subscribe(acked_topic, "s", SubType.Shared)
            raw.send(command(CommandType.FLOW, consumer_id=1, messagePermits=60))
            delivered = [raw.expect_frame(CommandType.MESSAGE) for _ in range(60)]
            acked: list[int] = []

            def acknowledge() -> None:
                try:
                    for number, frame in enumerate(delivered):
                        raw.send(
                            command(
                                CommandType.ACK,
                                consumer_id=1,
                                ack_type=0,
                                message_id=[frame.body["message_id"]],
                                request_id=1000 + number,
                            )
                        )
                        raw.expect(CommandType.ACK_RESPONSE)
                        acked.append(frame.body["message_id"]["entryId"])
                except (ConnectionError, OSError):
                    return

            acker = threading.Thread(target=acknowledge)
            producer = client.create_producer(
                topic, batching_enabled=True, batching_max_publish_delay_ms=5
            )

            def sent(payload: bytes) -> object:
                def callback(result: object, mid: pulsar.MessageId) -> None:
                    if result == pulsar.Result.Ok:
                        receipts[payload] = (mid.ledger_id(), mid.entry_id(), mid.batch_index())

                return callback

            stop = threading.Event()

            def produce() -> None:
                for i in range(4000):
                    if stop.is_set():
                        return
                    payload = f"p{i}".encode()
                    producer.send_async(payload, sent(payload))
                    if i % 50 == 0:
                        time.sleep(0.005)

            sender = threading.Thread(target=produce)
            acker.start()
            sender.start()
            deadline = time.monotonic() + 30
            while len(receipts) < 500:
                assert time.monotonic() < deadline
                time.sleep(0.005)
            server.process.kill()
            server.process.wait(10)
            crashed_with = len(receipts)
            receipted_at_kill = set(receipts)
            stop.set()
            sender.join(20)
            acker.join(20)
        assert acked

        server = start(home, broker_port=port)
        producer.flush()  # what was pending goes again once the client has reconnected
        assert len(receipts) >= crashed_with
        with server.broker() as broker:
            broker.admin.create_subscription(ROLE, topic, "check", initial_position="earliest")
            stored: dict[bytes, set[tuple[int, int, int]]] = {}
            for m in broker.reading.peek_messages(ROLE, topic, "check", 20_000):
                mid = m.message_id
                stored.setdefault(m.payload, set()).add(
                    (mid.ledger_id, mid.entry_id, mid.batch_index)
                )
            left = {
                m.message_id.entry_id
                for m in broker.reading.peek_messages(ROLE, acked_topic, "s", 100)
            }
        for payload, mid in receipts.items():
            assert mid in stored.get(payload, set()), payload
        # Without deduplication only a send in flight at the kill may be stored twice (the
        # client sends again what has no receipt yet, as with Pulsar): one receipted
        # before it is stored once.
        assert all(len(stored[payload]) == 1 for payload in receipted_at_kill)
        # Every receipted ack holds (one more may have committed with its receipt lost).
        assert not left & set(acked)
        assert len(left) <= 60 - len(acked)

        # The same client reconnects to the restarted standalone and sends on.
        later = producer.send(b"after restart")
        consumer = client.subscribe(
            topic, "after", initial_position=pulsar.InitialPosition.Earliest
        )
        got = {m.data() for m in drain(consumer, 1500)}
        assert set(receipts) <= got and b"after restart" in got
        assert later.entry_id() >= 0
    finally:
        client.close()
        server.stop()


def test_token_authentication(tmp_path: Path) -> None:
    from cursorops.wire.auth import create_token

    secret = b"0123456789abcdef0123456789abcdef"
    key = tmp_path / "secret.key"
    key.write_bytes(secret)
    server = start(tmp_path / "home", web=True, extra=("--auth-token-secret", str(key)))
    try:
        good = server.client(
            authentication=pulsar.AuthenticationToken(create_token(secret, "admin"))
        )
        try:
            producer = good.create_producer(unique())
            assert producer.send(b"x").entry_id() == 0
        finally:
            good.close()
        for auth in (
            None,
            pulsar.AuthenticationToken(create_token(b"another key of 32 bytes ........", "admin")),
            pulsar.AuthenticationToken(create_token(secret, "admin", expires_at=1)),
        ):
            bad = (
                server.client(timeout_s=2)
                if auth is None
                else server.client(timeout_s=2, authentication=auth)
            )
            try:
                with pytest.raises(pulsar.PulsarException):
                    bad.create_producer(unique())
            finally:
                bad.close()
        assert "authentication failed" in server.log_text()
        url = f"{server.web_url}/admin/v2/persistent/public/default"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401
        request = urllib.request.Request(
            url, headers={"Authorization": f"Bearer {create_token(secret, 'admin')}"}
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.status == 200
    finally:
        server.stop()


def test_two_standalones_on_the_same_stores(tmp_path: Path) -> None:
    """Several standalone processes serve the same topics consistently: what one's
    producer sends, the other's consumer receives; an Exclusive subscription held
    through one is refused through the other. Each has a home of its own (one standalone
    per home), the second naming the first's metadata store and ledger root."""
    home = tmp_path / "home"
    first = start(home)
    shared = Config.from_home(home)
    second = start(
        tmp_path / "second", metadata_url=shared.metadata_url, ledger_root=shared.ledger_root
    )
    one, two = first.client(), second.client()
    try:
        topic = unique()
        consumer = two.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Exclusive)
        producer = one.create_producer(topic, batching_enabled=False)
        for i in range(5):
            producer.send(f"m{i}".encode())
        assert [m.data() for m in drain(consumer, 1500)] == [f"m{i}".encode() for i in range(5)]
        with pytest.raises(pulsar.ConsumerBusy):
            one.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Exclusive)
        consumer.close()
    finally:
        one.close()
        two.close()
        first.stop()
        second.stop()

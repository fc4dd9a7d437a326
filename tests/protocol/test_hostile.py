"""Hostile input through raw sockets, and what the official client never sends."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest

from cursorops.wire import commands
from cursorops.wire.commands import CommandType, SubType
from cursorops.wire.frames import command, encode_payload_frame
from cursorops.wire.proto import encode
from tests.protocol.harness import Standalone, drain, start, unique
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow

ROLE = "admin"


def _store_snapshot(standalone: Standalone) -> list[tuple[str, int]]:
    with standalone.broker() as broker:
        return [
            (t.name, broker.analysis.entry_count(ROLE, t.name))
            for t in broker.admin.list_topics(ROLE, "public/default")
        ]


def _bad_checksum_send() -> bytes:
    meta = encode(
        commands.MessageMetadata, {"producer_name": "raw", "sequence_id": 0, "publish_time": 1}
    )
    frame = bytearray(
        encode_payload_frame(
            command(CommandType.SEND, producer_id=1, sequence_id=0), meta, b"payload"
        )
    )
    frame[-1] ^= 0xFF
    return bytes(frame)


def _unknown_command() -> bytes:
    body = encode(commands.BaseCommand, {"type": 99})
    return struct.pack(">II", len(body) + 4, len(body)) + body


@pytest.mark.parametrize(
    ("case", "data", "logged"),
    [
        ("bad checksum", _bad_checksum_send(), "checksum mismatch"),
        ("oversized", struct.pack(">I", 64 * 1024 * 1024) + b"\0" * 64, "exceeds"),
        ("unknown command", _unknown_command(), "unknown command"),
        ("garbage", struct.pack(">II", 7, 3) + b"\xff\xff\xff", "malformed command"),
    ],
)
def test_a_bad_frame_closes_that_connection_only(
    standalone: Standalone, case: str, data: bytes, logged: str
) -> None:
    topic = unique()
    with RawClient(standalone.port) as healthy:
        healthy.connect()
        healthy.producer(topic)
        before = _store_snapshot(standalone)
        with RawClient(standalone.port) as bad:
            bad.connect()
            bad.producer(topic)
            bad.send_raw(data)
            assert bad.closed_by_server(), case
        # The other connection carries on; nothing was stored for the bad frame.
        assert _store_snapshot(standalone) == before
        receipt = healthy.send_message(b"still here", 0)
        assert receipt["message_id"]["entryId"] == 0
    assert standalone.alive()
    assert logged in standalone.log_text()


def test_a_frame_cut_short_is_logged_and_stores_nothing(standalone: Standalone) -> None:
    topic = unique()
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.producer(topic)
        before = _store_snapshot(standalone)
        frame = _bad_checksum_send()
        raw.send_raw(frame[: len(frame) // 2])
    deadline = time.monotonic() + 5
    while "cut short" not in standalone.log_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _store_snapshot(standalone) == before
    assert standalone.alive()


def test_a_thousand_connections_opened_and_dropped(standalone: Standalone) -> None:
    before = _store_snapshot(standalone)
    connect = encode_payload_frame(
        command(CommandType.CONNECT, client_version="x", protocol_version=20), b"", b""
    )
    for i in range(1000):
        with socket.create_connection(("127.0.0.1", standalone.port), timeout=5) as sock:
            if i % 3 == 1:
                sock.sendall(connect[: i % len(connect)])
    client = standalone.client()
    try:
        topic = unique()
        producer = client.create_producer(topic)
        producer.send(b"after")
        consumer = client.subscribe(
            topic, "s", initial_position=__import__("pulsar").InitialPosition.Earliest
        )
        assert [m.data() for m in drain(consumer, 500)] == [b"after"]
    finally:
        client.close()
    after = _store_snapshot(standalone)
    assert [t for t in after if t[0] != topic] == before
    assert standalone.alive()


def test_the_epoch_a_client_sends_is_stamped_on_what_it_receives(standalone: Standalone) -> None:
    """PIP-84 on the wire: redeliver carries the consumer epoch; what the broker sends
    after it carries that epoch (the official C++ client does not send one)."""
    topic = unique()
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.producer(topic)
        for i in range(3):
            raw.send_message(f"m{i}".encode(), i)
        raw.subscribe(topic, "s", SubType.Exclusive, consumer_epoch=3)
        raw.send(command(CommandType.FLOW, consumer_id=1, messagePermits=3))
        first = [raw.expect_frame(CommandType.MESSAGE) for _ in range(3)]
        assert [f.body["consumer_epoch"] for f in first] == [3, 3, 3]
        raw.send(
            command(CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=1, consumer_epoch=7)
        )
        raw.send(command(CommandType.FLOW, consumer_id=1, messagePermits=3))
        again = [raw.expect_frame(CommandType.MESSAGE) for _ in range(3)]
        assert [f.body["consumer_epoch"] for f in again] == [7, 7, 7]
        assert [f.payload for f in again] == [b"m0", b"m1", b"m2"]
        assert [f.body["redelivery_count"] for f in again] == [1, 1, 1]


def test_a_redelivered_batch_carries_its_ack_set(standalone: Standalone) -> None:
    topic = unique()
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.producer(topic)
        raw.send_message(b"", 0, batch=[b"a", b"b", b"c", b"d"])
        raw.subscribe(topic, "s", SubType.Shared)
        raw.send(command(CommandType.FLOW, consumer_id=1, messagePermits=10))
        first = raw.expect_frame(CommandType.MESSAGE)
        assert "ack_set" not in first.body
        entry = first.body["message_id"]
        # Acknowledge indexes 0 and 2: the ack_set keeps 1 and 3 (set bit = unacknowledged).
        raw.send(
            command(
                CommandType.ACK,
                consumer_id=1,
                ack_type=0,
                message_id=[{**entry, "ack_set": [0b1010]}],
                request_id=9,
            )
        )
        assert raw.expect(CommandType.ACK_RESPONSE)["request_id"] == 9
        raw.send(command(CommandType.CLOSE_CONSUMER, consumer_id=1, request_id=10))
        raw.expect(CommandType.SUCCESS)
        raw.subscribe(topic, "s", SubType.Shared, consumer_id=2)
        raw.send(command(CommandType.FLOW, consumer_id=2, messagePermits=10))
        again = raw.expect_frame(CommandType.MESSAGE)
        assert again.body["ack_set"] == [0b1010]
        assert again.metadata is not None and again.metadata["num_messages_in_batch"] == 4


def test_failover_priority_levels_on_the_wire(standalone: Standalone) -> None:
    """``priority_level``: only the highest level (lowest value) is active."""
    topic = unique()
    with RawClient(standalone.port) as low, RawClient(standalone.port) as high:
        for raw in (low, high):
            raw.connect()
        low.producer(topic)
        low.send_message(b"m0", 0)
        low.subscribe(topic, "s", SubType.Failover, priority_level=1, consumer_name="a")
        high.subscribe(topic, "s", SubType.Failover, priority_level=0, consumer_name="z")
        low.send(command(CommandType.FLOW, consumer_id=1, messagePermits=10))
        high.send(command(CommandType.FLOW, consumer_id=1, messagePermits=10))
        assert high.expect_frame(CommandType.MESSAGE).payload == b"m0"
        with pytest.raises(TimeoutError):
            low.expect_frame(CommandType.MESSAGE, timeout=0.5)
        high.close()  # the higher level is gone: the lower one takes over at once
        assert low.expect_frame(CommandType.MESSAGE).payload == b"m0"


def test_a_half_open_connection_is_found_by_ping(tmp_path: Path) -> None:
    """A client that stops answering is pinged, then dropped, and its consumer's
    messages go to the others."""
    server = start(tmp_path / "home", extra=("--keepalive", "1"))
    try:
        topic = unique()
        with RawClient(server.port) as silent:
            silent.connect()
            silent.producer(topic)
            silent.send_message(b"m0", 0)
            silent.subscribe(topic, "s", SubType.Shared)
            silent.send(command(CommandType.FLOW, consumer_id=1, messagePermits=10))
            assert silent.expect_frame(CommandType.MESSAGE).payload == b"m0"
            assert silent.expect_frame(CommandType.PING, timeout=5).type is CommandType.PING
            # No PONG: the standalone closes the connection within two intervals.
            assert silent.closed_by_server(timeout=5)
        with RawClient(server.port) as other:
            other.connect()
            other.subscribe(topic, "s", SubType.Shared)
            other.send(command(CommandType.FLOW, consumer_id=1, messagePermits=10))
            again = other.expect_frame(CommandType.MESSAGE)
            # A dropped connection is no redelivery request: the count is unchanged.
            assert again.payload == b"m0" and again.body["redelivery_count"] == 0
        assert "no answer to ping" in server.log_text()
    finally:
        server.stop()


def test_an_ack_naming_an_impossible_batch_is_refused_and_changes_nothing(
    standalone: Standalone,
) -> None:
    """A batch size no entry can have would cost its size in memory to acknowledge: the
    ack gets an error and the cursor and the messages held stay as they were."""
    topic = unique()
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.producer(topic)
        raw.send_message(b"", 0, batch=[b"a", b"b", b"c", b"d"])
        raw.subscribe(topic, "s", SubType.Shared)
        raw.send(command(CommandType.FLOW, consumer_id=1, messagePermits=10))
        entry = raw.expect_frame(CommandType.MESSAGE).body["message_id"]
        with standalone.broker() as broker:
            before = broker.analysis.cursor_state(ROLE, topic, "s")
        other = {**entry, "entryId": entry["entryId"] + 1, "batch_size": 2**31 - 1}
        raw.send(
            command(
                CommandType.ACK,
                consumer_id=1,
                ack_type=0,
                message_id=[{**entry, "ack_set": [0b1010]}, other],
                request_id=9,
            )
        )
        answer = raw.expect(CommandType.ACK_RESPONSE)
        assert answer["request_id"] == 9 and "batch size" in answer["message"]
        with standalone.broker() as broker:
            assert broker.analysis.cursor_state(ROLE, topic, "s") == before
        raw.send(command(CommandType.CLOSE_CONSUMER, consumer_id=1, request_id=10))
        raw.expect(CommandType.SUCCESS)
        raw.subscribe(topic, "s", SubType.Shared, consumer_id=2)
        raw.send(command(CommandType.FLOW, consumer_id=2, messagePermits=10))
        again = raw.expect_frame(CommandType.MESSAGE)
        assert "ack_set" not in again.body

"""A chunked message is dispatched whole or not at all, through any receive, acknowledge,
negative acknowledgement (of its last chunk, as a client names it), close or lease expiry.

Topics of plain messages and chunked messages interleaved (several producers), some
incomplete (the producer still sending; it may finish later) and some abandoned (the
producer went on to another message). After every step, each complete chunked message's
unacknowledged chunks are pending at one consumer all together, or none is; a chunk of an
incomplete or abandoned message is never pending; and a consumer is handed a chunked
message's chunks in one dispatch, in order. At the end every complete message is received
exactly as stored, and nothing of an abandoned one.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import Entry, OutgoingMessage
from cursorops.core.services.reading.dispatch import Consumer, Message

from .conftest import Clock

TOPIC = "persistent://acme/ops/chunks"
LEASE_MS = 1_000
NAMES = ("a", "b")


def _entry(payload: bytes, producer: str, chunk: tuple[str, int, int, int] | None) -> Entry:
    message = OutgoingMessage(payload, sequence_id=1)
    return dataclasses.replace(Entry.of_messages([message], False, producer, 1), chunk=chunk)


Topic = tuple[list[tuple[str, Entry]], list[tuple[str, Entry]], set[str]]


@st.composite
def topics(draw: st.DrawFn) -> Topic:
    """(entries in the order stored, each with its message's uuid or "plain"; the last
    chunks of the incomplete messages; the uuids of the abandoned ones): per producer a
    sequence of entries, interleaved at random."""
    streams: list[list[tuple[str, Entry]]] = [
        [("plain", _entry(b"p%d" % i, "small", None)) for i in range(draw(st.integers(0, 4)))]
    ]
    later: list[tuple[str, Entry]] = []
    abandoned: set[str] = set()
    for m in range(draw(st.integers(1, 3))):
        chunks = draw(st.integers(2, 4))
        state = draw(st.sampled_from(["complete", "complete", "incomplete", "abandoned"]))
        uuid, producer = f"big{m}-1", f"big{m}"
        parts = [
            (uuid, _entry(b"%s/%d" % (uuid.encode(), i), producer, (uuid, i, chunks, 9)))
            for i in range(chunks)
        ]
        if state == "complete":
            streams.append(parts)
        else:
            streams.append(parts[:-1])
            if state == "abandoned":
                abandoned.add(uuid)
                streams[-1].append(("plain", _entry(b"next-%d" % m, producer, None)))
            else:
                later.append(parts[-1])
    order = draw(st.permutations([n for n, s in enumerate(streams) for _ in s]))
    at = [0] * len(streams)
    entries = []
    for n in order:
        entries.append(streams[n][at[n]])
        at[n] += 1
    return entries, later, abandoned


operation = st.one_of(
    st.tuples(st.just("receive"), st.sampled_from(NAMES), st.integers(1, 4)),
    st.tuples(st.just("nack"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(
        st.sampled_from(["ack", "close", "expire", "finish"]), st.sampled_from(NAMES), st.just(0)
    ),
)


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(topic=topics(), ops=st.lists(operation, max_size=20), queue=st.integers(1, 3))
def test_a_chunked_message_is_dispatched_whole_or_not_at_all(
    topic: Topic, ops: list[tuple[str, str, int]], queue: int
) -> None:
    entries, later, abandoned = topic
    with tempfile.TemporaryDirectory() as home:
        clock = Clock()
        config = Config.from_home(Path(home), consumer_lease_ms=LEASE_MS)
        with Broker(config, clock=clock) as broker:
            broker.admin.create_tenant("admin", "acme")
            broker.admin.create_namespace("admin", "acme/ops")
            broker.admin.create_topic("admin", TOPIC)
            broker.admin.create_subscription(
                "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
            )
            positions = broker.producing.append_entries("admin", TOPIC, [e for _, e in entries])
            # Each message's positions: a plain one alone, a chunked one all its chunks.
            members: dict[str, list[Position]] = defaultdict(list)
            for (name, _), position in zip(entries, positions, strict=True):
                members[name if name != "plain" else f"plain{position}"].append(position)
            whole = {
                name
                for name, found in members.items()
                if name.startswith("plain") or len(found) == _chunks(entries, name)
            }
            message_of = {p: name for name, found in members.items() for p in found}
            dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
            consumers: dict[str, Consumer] = {
                name: dispatcher.subscribe(name, receiver_queue_size=queue) for name in NAMES
            }
            returned: dict[str, list[Message]] = {name: [] for name in NAMES}
            acked: set[Position] = set()
            received: list[Position] = []
            for action, name, count in ops:
                if action == "receive":
                    got = consumers[name].receive_many(count)
                    returned[name] += got
                    received += [m.position for m in got]
                elif action == "ack" and returned[name]:
                    consumers[name].acknowledge(returned[name])
                    acked.update(m.position for m in returned[name])
                    returned[name] = []
                elif action == "nack" and returned[name]:
                    # A client names a chunked message by its last chunk, and lets it all go.
                    last = returned[name].pop()
                    consumers[name].negative_acknowledge(last)
                    gone = message_of[last.position]
                    returned[name] = [m for m in returned[name] if message_of[m.position] != gone]
                elif action == "close":
                    consumers[name].close()
                    returned[name] = []
                    consumers[name] = dispatcher.subscribe(name, receiver_queue_size=queue)
                elif action == "expire":
                    clock.advance(LEASE_MS)
                    returned = {n: [] for n in NAMES}
                elif action == "finish" and later:
                    for uuid, entry in later:
                        (position,) = broker.producing.append_entries("admin", TOPIC, [entry])
                        members[uuid].append(position)
                        message_of[position] = uuid
                        whole.add(uuid)
                    later = []
                _check_pending(broker, clock, members, message_of, whole, acked)
            for consumer in consumers.values():
                consumer.close()
            last = dispatcher.subscribe("last", receiver_queue_size=1000)
            rest = last.receive_many(1000)
            last.acknowledge(rest)
            acked.update(m.position for m in rest)
            expected = {p for name in whole - abandoned for p in members[name]}
            assert acked == expected
            assert not {message_of[p] for p in received} & abandoned
            last.close()


def _chunks(entries: list[tuple[str, Entry]], uuid: str) -> int:
    return next(e.chunk[2] for name, e in entries if name == uuid and e.chunk is not None)


def _check_pending(
    broker: Broker,
    clock: Clock,
    members: dict[str, list[Position]],
    message_of: dict[Position, str],
    whole: set[str],
    acked: set[Position],
) -> None:
    with broker.metadata.subscription_transaction(TOPIC, "s", clock()) as txn:
        pending = txn.pending()
    holders: dict[str, set[str | None]] = defaultdict(set)
    for (_, ledger, entry, _), info in pending.items():
        position = Position(ledger, entry)
        name = message_of[position]
        assert name in whole, f"{name} is pending but incomplete"
        if info.consumer_id is not None:
            holders[name].add(info.consumer_id)
    for name, who in holders.items():
        live = [p for p in members[name] if p not in acked]
        held = {
            Position(k[1], k[2])
            for k, info in pending.items()
            if info.consumer_id is not None and message_of[Position(k[1], k[2])] == name
        }
        assert len(who) == 1 and held == set(live), f"{name} held in part: {held} of {live}"


def _chunked_topic(broker: Broker) -> list[Position]:
    """Chunk 0 of A, x, chunk 1 (the last) of A."""
    broker.admin.create_tenant("admin", "acme")
    broker.admin.create_namespace("admin", "acme/ops")
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    chunk = [_entry(b"A%d" % i, "big", ("big-1", i, 2, 4)) for i in range(2)]
    return broker.producing.append_entries(
        "admin", TOPIC, [chunk[0], _entry(b"x", "small", None), chunk[1]]
    )


def test_a_negative_acknowledgement_of_the_last_chunk_releases_the_whole_message(
    tmp_path: Path,
) -> None:
    with Broker(Config.from_home(tmp_path / "home")) as broker:
        _chunked_topic(broker)
        dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
        first = dispatcher.subscribe("a")
        got = first.receive_many(10)
        assert [m.payload for m in got] == [b"A0", b"x", b"A1"]
        first.negative_acknowledge(got[-1])
        second = dispatcher.subscribe("b")
        again = second.receive_many(10)
        assert [(m.payload, m.redelivery_count) for m in again] == [(b"A0", 1), (b"A1", 1)]
        assert first.receive_many(10) == []


def test_a_receive_never_cuts_a_chunked_message(tmp_path: Path) -> None:
    with Broker(Config.from_home(tmp_path / "home")) as broker:
        positions = _chunked_topic(broker)
        # One message asked for: the chunked one, whole, and all of it acknowledged.
        got = broker.reading.consume("admin", TOPIC, "s", 1, ack=True)
        assert [m.payload for m in got] == [b"A0", b"A1"]
        state = broker.analysis.cursor_state("admin", TOPIC, "s")
        assert [state.is_acked(p) for p in positions] == [True, False, True]
        # A consumer that read ahead hands the chunked one out whole too, with x, which
        # came between its chunks.
        broker.admin.create_subscription(
            "admin", TOPIC, "t", SubscriptionType.SHARED, initial_position="earliest"
        )
        ahead = broker.reading.dispatcher("admin", TOPIC, "t").subscribe("a", receiver_queue_size=5)
        assert [m.payload for m in ahead.receive_many(1)] == [b"A0", b"x", b"A1"]
        ahead.close()

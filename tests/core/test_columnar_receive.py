"""The columnar read path against a plain model of the per-message dispatch.

A Shared subscription on a two-partition topic with batched entries, some
batch indexes acknowledged beforehand (skip), some delayed messages, then
random receive_batch / receive_many / acknowledge / negative acknowledge /
redeliver / close / clock steps on one consumer. The model is the dispatch as
it was written per message: partitions taken round-robin, one candidate each
in turn; a candidate is a message neither acknowledged nor held; a delayed
one uses its turn and stays; the first ``permits`` others go, recorded held,
each with the number of times it was negatively acknowledged or redelivered as its
redelivery count (a close releases without counting, as in Pulsar).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.services.reading.dispatch import Consumer, Message, MessageBatch

from .conftest import Clock

TOPIC = "persistent://acme/ops/columnar"
STEP_MS = 3_000


@dataclass(frozen=True)
class Sent:
    payload: bytes
    topic: str
    mid: MessageId
    deliver_at: int | None


class Model:
    """The old per-message dispatch and consumer buffer, as plain lists."""

    def __init__(self, sent: list[Sent], acked: set[bytes], queue: int) -> None:
        by_partition: dict[str, list[Sent]] = {}
        for message in sent:
            by_partition.setdefault(message.topic, []).append(message)
        self.streams = [
            sorted(
                by_partition[t], key=lambda m: (m.mid.ledger_id, m.mid.entry_id, m.mid.batch_index)
            )
            for t in sorted(by_partition)
        ]
        self.acked = set(acked)
        self.held: set[bytes] = set()
        self.released: dict[bytes, int] = {}
        self.queue = queue
        self.incoming: list[tuple[bytes, int]] = []
        self.wire: list[tuple[bytes, int]] = []

    def dispatch(self, permits: int, now: int) -> None:
        streams = [
            iter([m for m in s if m.payload not in self.acked and m.payload not in self.held])
            for s in self.streams
        ]
        chosen: list[tuple[bytes, int]] = []
        active = list(streams)
        while active and len(chosen) < permits:
            stream = active.pop(0)
            candidate = next(stream, None)
            if candidate is None:
                continue
            active.append(stream)
            if candidate.deliver_at is not None and candidate.deliver_at > now:
                continue
            chosen.append((candidate.payload, self.released.get(candidate.payload, 0)))
        self.held.update(p for p, _ in chosen)
        self.wire += chosen

    def _take_from_wire(self) -> None:
        self.incoming += self.wire
        self.wire = []

    def _fill(self, now: int) -> bool:
        if not self.incoming:
            self._take_from_wire()
        if not self.incoming:
            self.dispatch(self.queue, now)
            self._take_from_wire()
        return bool(self.incoming)

    def receive_batch(self, count: int, now: int) -> list[tuple[bytes, int]]:
        out: list[tuple[bytes, int]] = []
        while len(out) < count and self._fill(now):
            taken = self.incoming[: count - len(out)]
            self.incoming = self.incoming[len(taken) :]
            out += taken
        return out

    def receive_many(self, count: int, now: int) -> list[tuple[bytes, int]]:
        out: list[tuple[bytes, int]] = []
        dry = False
        while len(out) < count and self._fill(now):
            out.append(self.incoming.pop(0))
            buffered = len(self.incoming) + len(self.wire)
            if not dry and buffered <= self.queue // 2:
                self.dispatch(self.queue // 2, now)
                dry = len(self.incoming) + len(self.wire) == buffered

        return out

    def ack(self, payloads: list[bytes]) -> None:
        self.acked.update(payloads)
        self.held.difference_update(payloads)

    def release(self, payloads: list[bytes], *, asked: bool = True) -> None:
        """``asked``: the consumer asked for them again (counted), else it went."""
        for payload in payloads:
            if payload in self.held:
                self.held.discard(payload)
                self.released[payload] = self.released.get(payload, 0) + asked

    def redeliver(self) -> None:
        self.incoming = []
        self.release(sorted(self.held))

    def close(self) -> None:
        self.incoming, self.wire = [], []
        self.release(sorted(self.held), asked=False)


topics = st.fixed_dictionaries(
    {
        "keys": st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=30),
        "batch_size": st.integers(1, 4),
        "delayed": st.lists(st.integers(0, 29), max_size=5, unique=True),
        "acked": st.lists(st.integers(0, 29), max_size=12, unique=True),
        "queue": st.integers(1, 8),
    }
)
operation = st.one_of(
    st.tuples(st.just("batch"), st.integers(1, 9)),
    st.tuples(st.just("many"), st.integers(1, 9)),
    st.tuples(st.just("ack"), st.integers(1, 5)),
    st.tuples(st.just("ack_columns"), st.integers(1, 5)),
    st.tuples(st.just("nack"), st.just(0)),
    st.tuples(st.just("redeliver"), st.just(0)),
    st.tuples(st.just("close"), st.just(0)),
    st.tuples(st.just("tick"), st.just(0)),
)


def _sent(
    broker: Broker, clock: Clock, keys: list[str], batch_size: int, delayed: list[int]
) -> list[Sent]:
    messages = [
        OutgoingMessage(
            f"m{i}".encode(),
            key=key,
            deliver_at=clock.now_ms + STEP_MS * (1 + i % 2) if i in delayed else None,
        )
        for i, key in enumerate(keys)
    ]
    ids = broker.producing.produce("admin", TOPIC, messages, batch_size=batch_size)
    return [
        Sent(m.payload, f"{TOPIC}-partition-{mid.partition}", mid, m.deliver_at)
        for m, mid in zip(messages, ids, strict=True)
    ]


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(topics, st.lists(operation, max_size=20))
def test_columnar_receive_matches_the_per_message_model(
    topic: dict[str, object], ops: list[tuple[str, int]]
) -> None:
    with tempfile.TemporaryDirectory() as home:
        clock = Clock()
        config = Config.from_home(Path(home), consumer_lease_ms=10**9)
        with Broker(config, clock=clock) as broker:
            broker.admin.create_tenant("admin", "acme")
            broker.admin.create_namespace("admin", "acme/ops")
            broker.admin.create_topic("admin", TOPIC, partitions=2)
            broker.admin.create_subscription(
                "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
            )
            keys = list(topic["keys"])  # type: ignore[call-overload]
            sent = _sent(broker, clock, keys, topic["batch_size"], topic["delayed"])  # type: ignore[arg-type]
            acked = [sent[i] for i in topic["acked"] if i < len(sent)]  # type: ignore[attr-defined]
            if acked:
                skips.skip_messages(broker.gated, "admin", TOPIC, "s", [m.mid for m in acked])
            queue = int(topic["queue"])  # type: ignore[call-overload]
            model = Model(sent, {m.payload for m in acked}, queue)
            by_payload = {m.payload: m for m in sent}
            dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
            consumer = dispatcher.subscribe("c", receiver_queue_size=queue)
            # What the client holds, oldest first: a Message, and its row when columnar.
            received: list[tuple[Message, MessageBatch | None]] = []
            for action, count in ops:
                if action == "batch":
                    batch = consumer.receive_batch(count)
                    expected = model.receive_batch(count, clock.now_ms)
                    messages = batch.messages()
                    _check(batch, messages, expected, by_payload)
                    received += [(m, batch.slice(i, i + 1)) for i, m in enumerate(messages)]
                elif action == "many":
                    got = consumer.receive_many(count)
                    assert [(m.payload, m.redelivery_count) for m in got] == model.receive_many(
                        count, clock.now_ms
                    )
                    received += [(m, None) for m in got]
                elif action in ("ack", "ack_columns"):
                    done, received = received[:count], received[count:]
                    if not done:
                        continue
                    rows = [row for _, row in done]
                    if action == "ack_columns" and all(row is not None for row in rows):
                        consumer.acknowledge(
                            MessageBatch.concat([r for r in rows if r is not None])
                        )
                    else:
                        consumer.acknowledge([m for m, _ in done])
                    model.ack([m.payload for m, _ in done])
                elif action == "nack" and received:
                    (message, _), received = received[0], received[1:]
                    consumer.negative_acknowledge(message)
                    model.release([message.payload])
                elif action == "redeliver":
                    consumer.redeliver_unacknowledged_messages()
                    model.redeliver()
                elif action == "close":
                    consumer.close()
                    model.close()
                    consumer = dispatcher.subscribe("c", receiver_queue_size=queue)
                elif action == "tick":
                    clock.advance(STEP_MS)
            consumer.close()
            model.close()
            clock.advance(10 * STEP_MS)
            drained = _drain(dispatcher.subscribe("d", receiver_queue_size=queue))
            expected = model.receive_batch(len(sent) + 1, clock.now_ms)
            assert [(m.payload, m.redelivery_count) for m in drained] == expected


def _check(
    batch: MessageBatch,
    messages: list[Message],
    expected: list[tuple[bytes, int]],
    by_payload: dict[bytes, Sent],
) -> None:
    assert [(m.payload, m.redelivery_count) for m in messages] == expected
    assert len(batch) == len(messages)
    for row, message in enumerate(messages):
        sent = by_payload[message.payload]
        assert message.topic == sent.topic == batch.topic_names()[row]
        assert message.message_id == sent.mid
        assert message.message_id.batch_size == sent.mid.batch_size
        assert message.deliver_at == sent.deliver_at
        assert batch.payloads[row].as_py() == message.payload
    assert np.array_equal(batch.redelivery_count, [count for _, count in expected])


def _drain(consumer: Consumer) -> list[Message]:
    out: list[Message] = []
    while batch := consumer.receive_batch(7):
        out += batch.messages()
    consumer.close()
    return out


def test_an_empty_receive_batch_is_falsy_and_refuses_zero(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription("admin", TOPIC, "s", SubscriptionType.SHARED)
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c")
    batch = consumer.receive_batch(10)
    assert not batch and len(batch) == 0 and batch.messages() == []
    with pytest.raises(Exception, match="at least 1"):
        consumer.receive_batch(0)

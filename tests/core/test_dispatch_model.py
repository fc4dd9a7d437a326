"""Shared dispatch against a plain model: a list of messages, a pending map, an acked set.

Random sequences of receive / ack / negative ack / close / lease expiry on
three consumers. The model says exactly what each receive returns: the first
messages, in publish order, neither acknowledged nor pending anywhere, each
with the number of times it was negatively acknowledged as its redelivery count
(a close or a lapsed lease releases without counting, as in Pulsar).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.services.reading.dispatch import Consumer, Message

from .conftest import Clock

TOPIC = "persistent://acme/ops/model"
MESSAGES = 24
LEASE_MS = 1_000
NAMES = ("a", "b", "c")

operation = st.one_of(
    st.tuples(st.just("receive"), st.sampled_from(NAMES), st.integers(1, 6)),
    st.tuples(st.just("ack"), st.sampled_from(NAMES), st.integers(1, 4)),
    st.tuples(st.just("nack"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("close"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("expire"), st.just(""), st.just(0)),
)


class Model:
    def __init__(self) -> None:
        self.order = [f"m{i}".encode() for i in range(MESSAGES)]
        self.acked: set[bytes] = set()
        self.pending: dict[bytes, str] = {}
        self.released: dict[bytes, int] = {}
        self.held: dict[str, list[bytes]] = {name: [] for name in NAMES}

    def receive(self, name: str, count: int) -> list[tuple[bytes, int]]:
        free = [m for m in self.order if m not in self.acked and m not in self.pending][:count]
        for message in free:
            self.pending[message] = name
            self.held[name].append(message)
        return [(m, self.released.get(m, 0)) for m in free]

    def ack(self, name: str, count: int) -> list[bytes]:
        done, self.held[name] = self.held[name][:count], self.held[name][count:]
        for message in done:
            self.acked.add(message)
            del self.pending[message]
        return done

    def release(self, name: str, messages: list[bytes], *, asked: bool) -> None:
        """``asked``: a consumer asked for them again (counted), else its consumer went."""
        for message in messages:
            del self.pending[message]
            self.released[message] = self.released.get(message, 0) + asked
            self.held[name].remove(message)


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(operation, max_size=25))
def test_shared_dispatch_matches_the_model(ops: list[tuple[str, str, int]]) -> None:
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
            broker.producing.produce(
                "admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(24)]
            )
            dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
            model = Model()
            # A receiver queue of 1: what a consumer holds is exactly what it was handed.
            consumers: dict[str, Consumer] = {
                name: dispatcher.subscribe(name, receiver_queue_size=1) for name in NAMES
            }
            held: dict[str, dict[bytes, Message]] = {name: {} for name in NAMES}
            for action, name, count in ops:
                if action == "receive":
                    got = consumers[name].receive_many(count)
                    assert [(m.payload, m.redelivery_count) for m in got] == model.receive(
                        name, count
                    )
                    held[name].update((m.payload, m) for m in got)
                elif action == "ack":
                    done = model.ack(name, count)
                    if done:
                        consumers[name].acknowledge([held[name].pop(p) for p in done])
                elif action == "nack" and model.held[name]:
                    first = model.held[name][0]
                    consumers[name].negative_acknowledge(held[name].pop(first))
                    model.release(name, [first], asked=True)
                elif action == "close":
                    consumers[name].close()
                    model.release(name, list(model.held[name]), asked=False)
                    held[name].clear()
                    consumers[name] = dispatcher.subscribe(name, receiver_queue_size=1)
                elif action == "expire":
                    clock.advance(LEASE_MS)
                    for owner in NAMES:
                        model.release(owner, list(model.held[owner]), asked=False)
                        held[owner].clear()
            for consumer in consumers.values():
                consumer.close()
            rest = broker.reading.consume("admin", TOPIC, "s", 1000)
            assert sorted(m.payload for m in rest) == sorted(set(model.order) - model.acked)

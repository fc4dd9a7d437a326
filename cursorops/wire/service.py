"""What every connection of one broker process shares.

The broker and its store thread, the group commit, the consumers waiting for a
produce, each topic's producers, the non-persistent topics and this broker's
place in the cluster. A connection is known here only as a :class:`Client`
(:class:`cursorops.wire.session.Session` is one): the service never imports the
layers above it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from cursorops.core import BrokerRecord
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import AlreadyExistsError, CursorOpsError, TopicNotFoundError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import unsubscribe as unsubscribe_slice
from cursorops.wire.appender import Appender
from cursorops.wire.authentication import Authentication
from cursorops.wire.consumer_loop import ConsumerLoop
from cursorops.wire.deduplication import Deduplication
from cursorops.wire.key_shared import KeySharedConsumers
from cursorops.wire.listeners import BrokerUrls
from cursorops.wire.non_persistent import NonPersistentTopics
from cursorops.wire.producer_access import TopicProducers
from cursorops.wire.sessions import Registry, WireConsumer
from cursorops.wire.store_thread import StoreThread

KEEPALIVE_SECONDS = 30.0
"""Pulsar's ``keepAliveIntervalSeconds``: a silent connection is pinged, then dropped."""
RENEW_SECONDS = 5.0
"""How often live connections renew their consumers' leases in the registry."""


class Client(Protocol):
    """What the service (and one connection, of another) asks of a connection."""

    consumers: dict[int, ConsumerLoop]

    async def close(self) -> None:
        """Free what the connection held, and close it."""

    def fence(self, producer_id: int) -> None:
        """An exclusive producer with fencing took the topic of this connection's producer."""

    def resume(self, loop: ConsumerLoop) -> None:
        """Deliver to the consumer again (a refused seek stopped it)."""

    async def disconnect_for_seek(self, loop: ConsumerLoop) -> None:
        """Close the consumer for a seek; its client subscribes again."""


ProducerKey = tuple[Client, int]
"""A connected producer: its connection and its producer id."""


class Service:
    """What every connection shares: the broker, its thread, the appender, the consumers."""

    def __init__(
        self,
        broker: Broker,
        store: StoreThread,
        urls: BrokerUrls,
        role: str,
        authentication: Authentication | None = None,
        keepalive_s: float = KEEPALIVE_SECONDS,
        broker_id: str = "",
    ) -> None:
        self.broker = broker
        self.slot = broker_id
        """This broker's id in the cluster: its slot on its home
        (:mod:`cursorops.wire.broker_identity`)."""
        self.broker_id = broker_id
        """Every consumer id this process registers starts with it: the slot and the
        life (``<slot>.<epoch>``, set by :func:`cursorops.wire.membership.join`)."""
        self.authentication = authentication or Authentication(role)
        self.keepalive_s = keepalive_s
        self.store = store
        self.urls = urls
        """What lookups answer (set once the ports are bound)."""
        self.role = role
        self.appender = Appender(store, broker, self.wake)
        self.deduplication = Deduplication()
        self.non_persistent = NonPersistentTopics()
        self.connections: set[Client] = set()
        self._consumers: dict[str, set[ConsumerLoop]] = {}
        self.producers: dict[str, TopicProducers[ProducerKey]] = {}
        """Each topic's (or partition's) connected producers: names, access modes, epoch."""
        self.key_shared = KeySharedConsumers()
        """Key_Shared modes and sticky ranges (touched on the store thread only)."""
        self.non_durable: set[tuple[str, str]] = set()
        """(base topic, subscription) of the readers' subscriptions this process made:
        they live as long as their readers (touched on the store thread only)."""
        self.live: list[BrokerRecord] = []
        """The cluster's members (brokers not declared dead) as the last heartbeat saw
        them (:mod:`cursorops.wire.membership`): a lookup answers the owner among them."""

    def forget_connections_state(self) -> None:
        """After every connection closed for a new life: nothing of the last one is
        remembered (the store holds what lasts)."""
        self.deduplication = Deduplication()
        self.producers.clear()

    def wake(self, topic: str) -> None:
        for loop in self._consumers.get(topic, ()):
            loop.wake.set()

    def watch(self, loop: ConsumerLoop) -> None:
        self._consumers.setdefault(loop.wire.topic, set()).add(loop)

    def producers_of(self, topic: str) -> TopicProducers[ProducerKey]:
        return self.producers.setdefault(topic, TopicProducers())

    def producer_gone(self, topic: str, key: ProducerKey) -> None:
        producers = self.producers.get(topic)
        if producers is not None:
            producers.remove(key)
            if producers.empty and producers.epoch is None:
                # A topic's epoch stays for the process's life, as Pulsar keeps it with the topic.
                del self.producers[topic]

    def consumers_of(self, topic: str, subscription: str) -> list[tuple[Client, ConsumerLoop]]:
        """Every connection's consumers of ``subscription`` on one partition (or topic)."""
        return [
            (connection, loop)
            for connection in self.connections
            for loop in connection.consumers.values()
            if loop.wire.topic == topic and loop.wire.subscription == subscription
        ]

    def unwatch(self, loop: ConsumerLoop) -> None:
        watchers = self._consumers.get(loop.wire.topic)
        if watchers is not None:
            watchers.discard(loop)
            if not watchers:
                del self._consumers[loop.wire.topic]

    # -- store-thread helpers ---------------------------------------------------

    def ensure_topic(self, role: str, name: TopicName, operation: Operation) -> tuple[str, int]:
        """(base topic, partition or -1); creates a missing non-partitioned topic for a role
        allowed ``operation`` on it (Pulsar's auto-creation)."""
        base = name.base
        try:
            info = self.broker.access.authorized_topic(role, Operation.LOOKUP, base)
        except TopicNotFoundError:
            if name.is_partition:
                raise
            try:
                info = self.broker.admin.auto_create_topic(role, str(base), operation)
            except AlreadyExistsError:
                info = self.broker.access.authorized_topic(role, Operation.LOOKUP, base)
        if name.is_partition:
            if name.partition_index >= info.partitions:
                raise TopicNotFoundError(f"Topic {name} not found")
            return info.name, name.partition_index
        return info.name, -1

    def partitions(self, role: str, topic: str) -> int:
        """A topic's partitions; 0 for a non-partitioned or missing one (created on use).
        Refused unless ``role`` may look the topic up (``canLookup``)."""
        name = TopicName.parse(topic)
        try:
            info = self.broker.access.authorized_topic(role, Operation.LOOKUP, name.base)
        except TopicNotFoundError:
            return 0
        # A partition is a topic of its own to a client, as in Pulsar: not partitioned.
        return 0 if name.is_partition else info.partitions

    def subscription_type(self, role: str, topic: str, name: str) -> SubscriptionType | None:
        """The type of the topic's subscription ``name``; None when there is none."""
        for info in self.broker.admin.list_subscriptions(role, topic):
            if info.name == name:
                return info.type
        return None

    def leave(
        self, role: str, registry: Registry, wire: WireConsumer, *, unsubscribe: bool, seeking: bool
    ) -> None:
        """A closed consumer leaves its subscription. ``seeking``: closed by a seek, which
        the client follows with a new subscribe: what it held on this partition is
        released, and a reader's subscription stays."""
        if seeking:
            wire.release_held()
        if registry.leave(wire.registry_key):
            self.key_shared.leave(wire.base_topic, wire.subscription, wire.identity.consumer_id)
            wire.core.close()
            if not wire.durable and not seeking:
                self.non_durable.discard((wire.base_topic, wire.subscription))
                # A reader's subscription lives as long as the reader (non-durable).
                with contextlib.suppress(CursorOpsError):
                    self.broker.admin.end_reader_subscription(
                        role, wire.base_topic, wire.subscription
                    )
                return
        if unsubscribe:
            unsubscribe_slice.delete_subscription(
                self.broker.gated, role, wire.base_topic, wire.subscription
            )


async def renew_leases(service: Service) -> None:
    """Keep live connections' consumers registered (their leases would lapse when idle)."""
    while True:
        await asyncio.sleep(RENEW_SECONDS)
        wires = [
            loop.wire
            for connection in list(service.connections)
            for loop in connection.consumers.values()
        ]

        def renew(wires: list[WireConsumer]) -> None:
            seen: set[str] = set()
            for wire in wires:
                if wire.closed or wire.identity.consumer_id in seen:
                    continue
                seen.add(wire.identity.consumer_id)
                with contextlib.suppress(CursorOpsError):
                    wire.dispatcher.renew(wire.core)

        await service.store.run(renew, wires)

"""Non-persistent topics: no storage, each message handed to the consumers connected now.

As Pulsar's ``NonPersistentTopic``: a send is receipted at once with message id
(0, 0) and passed to every subscription of the topic that has a consumer in
this process; a subscription whose chosen consumer has no permits drops it, and
a message nobody is subscribed to is gone. Messages go out with message id
(0, 0) (Pulsar's too), nothing is acknowledged or redelivered, and a
subscription lives as long as its consumers. ``read_compacted`` is refused.

The subscriptions live in this process's memory: a consumer connected to
another standalone on the same store does not receive what is sent here.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from cursorops.core.domain.errors import ConsumerBusyError
from cursorops.wire.commands import SubType
from cursorops.wire.entries import message_command
from cursorops.wire.frames import encode_payload_frame

SCHEME = "non-persistent://"
"""How a non-persistent topic's name starts."""


@dataclass(eq=False)
class NonPersistentConsumer:
    consumer_id: int
    topic: str
    """The partition (or non-partitioned topic) it reads."""
    subscription: str
    sub_type: SubType
    partition: int
    priority: int
    name: str
    write: Callable[[bytes], None]
    """Writes a frame to the consumer's connection."""
    permits: int = 0


@dataclass
class _Subscription:
    sub_type: SubType
    consumers: list[NonPersistentConsumer] = field(default_factory=list)
    turn: itertools.count[int] = field(default_factory=itertools.count)

    def chosen(self, key: bytes | None) -> NonPersistentConsumer | None:
        """The consumer a message goes to: the active one (Exclusive, Failover), the next in
        turn (Shared), the one its key hashes to (Key_Shared)."""
        if not self.consumers:
            return None
        if self.sub_type in (SubType.Exclusive, SubType.Failover):
            return min(self.consumers, key=lambda c: (c.priority, c.name))
        if self.sub_type is SubType.Key_Shared and key is not None:
            return self.consumers[zlib.crc32(key) % len(self.consumers)]
        # Shared: the next consumer in turn that has permits.
        start = next(self.turn)
        for offset in range(len(self.consumers)):
            consumer = self.consumers[(start + offset) % len(self.consumers)]
            if consumer.permits > 0:
                return consumer
        return None


class NonPersistentTopics:
    """Every non-persistent subscription with a consumer in this process."""

    def __init__(self) -> None:
        self._topics: dict[str, dict[str, _Subscription]] = {}

    def subscribe(self, consumer: NonPersistentConsumer) -> None:
        """Join the subscription (created with its first consumer); ConsumerBusyError when
        the type differs or an Exclusive one has its consumer."""
        subscriptions = self._topics.setdefault(consumer.topic, {})
        found = subscriptions.get(consumer.subscription)
        if found is None:
            found = subscriptions[consumer.subscription] = _Subscription(consumer.sub_type)
        elif found.sub_type is not consumer.sub_type:
            raise ConsumerBusyError(
                f"Subscription {consumer.subscription} is of a different type"
                f" ({found.sub_type.name})"
            )
        elif found.sub_type is SubType.Exclusive and found.consumers:
            raise ConsumerBusyError("Exclusive consumer is already connected")
        found.consumers.append(consumer)

    def leave(self, consumer: NonPersistentConsumer) -> None:
        subscriptions = self._topics.get(consumer.topic, {})
        found = subscriptions.get(consumer.subscription)
        if found is None or consumer not in found.consumers:
            return
        found.consumers.remove(consumer)
        if not found.consumers:
            del subscriptions[consumer.subscription]
            if not subscriptions:
                del self._topics[consumer.topic]

    def publish(
        self, topic: str, metadata: bytes, payload: bytes, messages: int, key: bytes | None
    ) -> int:
        """Hand one entry to each subscription's chosen consumer; how many got it."""
        delivered = 0
        for subscription in list(self._topics.get(topic, {}).values()):
            consumer = subscription.chosen(key)
            if consumer is None or consumer.permits <= 0:
                continue
            consumer.permits -= messages
            command = message_command(consumer.consumer_id, 0, 0, consumer.partition, 0, None, None)
            consumer.write(encode_payload_frame(command, metadata, payload))
            delivered += 1
        return delivered

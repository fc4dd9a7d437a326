"""The brokers sharing one store, as one service: joining, beating, declaring the
silent dead, releasing what they held, and which live broker owns a topic partition.

The registry's rules are in :mod:`cursorops.core.store.broker_registry`; this is what a
broker process does with them (:mod:`cursorops.wire.standalone` calls it on a thread of
its own, so a busy store thread never delays a heartbeat).

Ownership: a topic partition is owned by the live broker that scores highest for it
(rendezvous hashing of the partition's name with each broker's id): every broker
computes the same owner from the same list, partitions spread over the brokers, and
when one dies only its partitions move. A lookup answers the owner among the
members (the brokers not declared dead); the owner's death moves its partitions to
the others at the next lookup. Every broker can serve
every partition (the dispatch state is in the store), so a client that reaches a
broker other than the owner is served too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.config import Config
from cursorops.core.services.broker.access import Access
from cursorops.core.store.broker_registry import LIVE, Advertised, BrokerRecord
from cursorops.core.store.metadata import MetadataStore
from cursorops.core.store.values import Fence


@dataclass(frozen=True)
class Beat:
    """What one heartbeat found."""

    alive: bool
    """False: this life was declared dead (fenced); the broker must start a new one."""
    declared: list[Fence] = field(default_factory=list)
    """Lives this beat declared dead."""
    released: int = 0
    """Consumers of dead lives this beat released."""


def owner_of(topic_partition: str, live: Sequence[BrokerRecord]) -> BrokerRecord | None:
    """The live broker that owns ``topic_partition`` (rendezvous hashing); None: none live."""

    def score(record: BrokerRecord) -> bytes:
        return hashlib.sha256(f"{record.broker_id}\0{topic_partition}".encode()).digest()

    return max(live, key=score, default=None)


@dataclass(frozen=True)
class BrokerView:
    """One broker as ``brokers list`` shows it."""

    broker_id: str
    epoch: int
    state: str
    """``live`` (beating), ``late`` (silent, not declared dead yet) or ``dead``."""
    broker_url: str
    broker_url_tls: str
    web_url: str
    started_ms: int
    heartbeat_ms: int


class Cluster:
    """One broker process's membership: its current life and the others it sees."""

    def __init__(
        self, config: Config, metadata: MetadataStore, clock: Callable[[], int], access: Access
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.clock = clock
        self.access = access

    @property
    def fence(self) -> Fence | None:
        """The life this process writes as (None before :meth:`join`)."""
        return self.metadata.fence

    def join(self, broker_id: str, advertised: Advertised) -> Fence:
        """Start a new life of ``broker_id``: registered, writing as it from here on. The
        consumers of its earlier lives are released (they are gone: this slot is ours)."""
        self.metadata.end_idle_transactions_after(self.config.broker_dead_after_ms)
        self.metadata.hold_life_lock(broker_id)
        fence = self.metadata.register_broker(broker_id, advertised, self.clock())
        self.metadata.fence = fence
        self.metadata.release_consumers_with_prefix(fence.lives_prefix, self.clock())
        return fence

    def beat(self) -> Beat:
        """Write this life's heartbeat; declare the silent brokers dead and release what
        every dead life held."""
        fence = self.metadata.fence
        if fence is None:
            raise RuntimeError("a broker beats once it joined")
        now = self.clock()
        if not self.metadata.beat(fence, now):
            return Beat(alive=False)
        declared = self.metadata.declare_dead(
            now, self.config.broker_dead_after_ms, me=fence.broker_id
        )
        released = 0
        for dead in self.metadata.unreleased():
            released += self.metadata.release_consumers_with_prefix(
                dead.consumer_prefix, self.clock()
            )
            self.metadata.mark_released(dead)
        return Beat(True, declared, released)

    def leave(self) -> None:
        """End this life cleanly (a broker stopping): what its consumers still hold is
        released first, then the life is dead and released, and the others stop routing to
        it at once rather than once its heartbeat goes silent."""
        fence = self.metadata.fence
        if fence is not None:
            self.metadata.release_consumers_with_prefix(fence.consumer_prefix, self.clock())
            self.metadata.leave(fence)

    @staticmethod
    def owner_of(topic_partition: str, live: Sequence[BrokerRecord]) -> BrokerRecord | None:
        """The live broker that owns ``topic_partition`` (:func:`owner_of`)."""
        return owner_of(topic_partition, live)

    def brokers(self) -> list[BrokerRecord]:
        """Every broker registered, live or dead, by id."""
        return self.metadata.brokers()

    def list_brokers(self, role: str) -> list[BrokerView]:
        """Every broker registered, as an operator reads it (superusers, as in Pulsar)."""
        self.access.check(role, Operation.LIST_BROKERS, "", "listing brokers")
        now = self.clock()
        dead_after = self.config.broker_dead_after_ms
        return [
            BrokerView(
                r.broker_id,
                r.epoch,
                "live" if r.live_at(now, dead_after) else ("late" if r.state == LIVE else "dead"),
                r.advertised.broker_url,
                r.advertised.broker_url_tls,
                r.advertised.web_url,
                r.started_ms,
                r.heartbeat_ms,
            )
            for r in self.metadata.brokers()
        ]

    def members(self) -> list[BrokerRecord]:
        """The brokers no one declared dead (nor stopped): what ownership is computed
        over, so that a partition moves when its owner is declared dead, not each time
        a heartbeat runs late on a loaded machine."""
        return [b for b in self.metadata.brokers() if b.state == LIVE]

    def live(self) -> list[BrokerRecord]:
        """The brokers beating now."""
        now = self.clock()
        return [
            b for b in self.metadata.brokers() if b.live_at(now, self.config.broker_dead_after_ms)
        ]


__all__ = ["Beat", "BrokerView", "Cluster", "owner_of"]

"""A ``cursorops standalone`` for the protocol tests, and the official client.

Each test module starts its own standalone (:mod:`cursorops.local.brokers`: free ports,
a temporary home) and stops it with SIGINT afterwards, as a person would with Ctrl-C.
"""

from __future__ import annotations

import fcntl
import uuid
from dataclasses import dataclass
from pathlib import Path

import pulsar

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker import Broker
from cursorops.local import brokers


@dataclass
class Standalone(brokers.Standalone):
    """A standalone of :mod:`cursorops.local.brokers`, with the official client and the topic
    names it owns."""

    def broker(self) -> Broker:
        return Broker(Config.from_home(self.home))

    def client(
        self, timeout_s: int = 10, service_url: str | None = None, **kwargs: object
    ) -> pulsar.Client:
        return pulsar.Client(
            service_url or self.service_url,
            operation_timeout_seconds=timeout_s,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
            **kwargs,  # type: ignore[arg-type]
        )

    @property
    def slot(self) -> str:
        """Its broker id in the cluster: the slot of its home it holds locked
        (:mod:`cursorops.wire.broker_identity`)."""
        held = []
        for path in sorted((self.home / "brokers").glob("*.lock")):
            with open(path, "rb") as probe:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held.append(path.stem)
        assert len(held) == 1, held
        return held[0]

    def owned_topic(self, prefix: str = "t", store: Config | None = None) -> str:
        """A new topic name this broker owns among the live brokers of its store (``store``,
        default its home's): a lookup of it from any broker answers this one."""
        from cursorops.core.services.broker.cluster import owner_of

        with Broker(store or Config.from_home(self.home)) as broker:
            live = broker.cluster.members()
        while True:
            topic = unique(prefix)
            owner = owner_of(str(TopicName.parse(topic)), live)
            if owner is not None and owner.broker_id == self.slot:
                return topic


def start(
    home: Path,
    *,
    web: bool = False,
    broker_port: int = 0,
    extra: tuple[str, ...] = (),
    metadata_url: str | None = None,
    ledger_root: str | None = None,
) -> Standalone:
    """A standalone serving ``home`` (:func:`cursorops.local.brokers.start`)."""
    started = brokers.start(
        home,
        web=web,
        broker_port=broker_port,
        extra=extra,
        metadata_url=metadata_url,
        ledger_root=ledger_root,
    )
    return Standalone(**vars(started))


def unique(prefix: str = "t") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def drain(consumer: pulsar.Consumer, timeout_ms: int = 1500) -> list[pulsar.Message]:
    """Everything the consumer receives until ``timeout_ms`` passes with nothing."""
    received = []
    while True:
        try:
            received.append(consumer.receive(timeout_ms))
        except pulsar.Timeout:
            return received

"""What the Broker's collaborator tests share: a topic of ten numbered messages, on the
``broker`` fixture's tenant ``acme`` and namespace ``acme/ops``, with a Shared subscription
``s`` at earliest."""

from __future__ import annotations

import dataclasses

import pytest

from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import Entry, OutgoingMessage

TOPIC = "persistent://acme/ops/orders"


@pytest.fixture
def ids(broker: Broker) -> list[MessageId]:
    """The ids of ``TOPIC``'s ten messages, ``b"0"`` to ``b"9"``, in order."""
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    return broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(10)])


def chunk_entries(
    payload: bytes, chunks: int, *, uuid: str, producer: str = "big", send: int | None = None
) -> list[Entry]:
    """A message of ``chunks`` chunks as a client sends it, one entry each (the first
    ``send`` chunks only: a message whose producer has not sent the rest)."""
    size = -(-len(payload) // chunks)
    return [
        dataclasses.replace(
            Entry.of_messages(
                [OutgoingMessage(payload[i * size : (i + 1) * size], key="big", sequence_id=7)],
                False,
                producer,
                1_000 + i,
            ),
            chunk=(uuid, i, chunks, len(payload)),
        )
        for i in range(chunks if send is None else send)
    ]


def plain_entry(payload: bytes, producer: str = "small") -> Entry:
    return Entry.of_messages([OutgoingMessage(payload, sequence_id=1)], False, producer, 1_000)

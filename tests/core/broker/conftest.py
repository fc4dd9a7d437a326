"""What the Broker's collaborator tests share: a topic of ten numbered messages, on the
``broker`` fixture's tenant ``acme`` and namespace ``acme/ops``, with a Shared subscription
``s`` at earliest."""

from __future__ import annotations

import pytest

from core.broker import Broker
from core.ids.message_id import MessageId
from core.producer import OutgoingMessage
from core.subscription import SubscriptionType

TOPIC = "persistent://acme/ops/orders"


@pytest.fixture
def ids(broker: Broker) -> list[MessageId]:
    """The ids of ``TOPIC``'s ten messages, ``b"0"`` to ``b"9"``, in order."""
    broker.create_topic("admin", TOPIC)
    broker.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    return broker.produce("admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(10)])

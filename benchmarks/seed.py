"""The benchmarks' publish step for plain messages: ``Producer.send_columns`` behind
the Broker's authorization.

The same check, producer and defaults as ``Broker.produce`` (so the data written
is the same), but payloads in as a list and ids out as columns: generating
millions of messages builds no object per message.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.authz import Operation
from core.broker import Broker
from core.message_id_columns import MessageIdColumns
from core.producer import Producer


def produce_plain(
    broker: Broker,
    role: str,
    topic: str,
    payloads: Sequence[bytes],
    *,
    batch_size: int = 1,
    producer_name: str = "cursorops-cli",
) -> MessageIdColumns:
    """Publish one plain message per payload, as ``broker.produce`` would; their ids."""
    info = broker.authorized_topic(role, Operation.PRODUCE, topic)
    producer = Producer(broker.ledgers, info, producer_name=producer_name, batch_size=batch_size)
    return producer.send_columns(payloads, broker.clock())

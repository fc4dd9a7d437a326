"""``read_compacted``: a consumer of the compacted topic skips what compaction drops.

Pulsar serves such a consumer from the compacted ledger up to the compaction
horizon, then from the topic. Here nothing is rewritten: when the consumer
subscribes, the messages the compacted view drops
(:meth:`cursorops.core.services.broker.compaction.Compaction.compacted_away`) are acknowledged on
its subscription, so its cursor passes them as Pulsar's does, and dispatch hands
out the rest. A message of a batch that the view drops is acknowledged by its
batch index: the batch goes out with an ack set that hides it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cursorops.core.services.broker import Broker
from cursorops.core.services.reading.message import MessageBatch
from cursorops.wire.sessions import WireConsumer


def skip_compacted_away(broker: Broker, role: str, wire: WireConsumer) -> int:
    """Acknowledge, on the consumer's subscription, what the compacted view of its partition
    drops; how many messages. Runs on the store thread, before the first dispatch."""
    away = broker.compaction.compacted_away(role, wire.topic)
    n = len(away)
    if not n:
        return 0
    sizes = pa.RecordBatch.from_arrays([pa.array(away.batch_size, pa.int32())], ["batch_size"])
    batch = MessageBatch(
        (wire.topic,),
        np.zeros(n, np.int64),
        np.full(n, wire.partition, np.int64),
        away.ledger_id,
        away.entry_id,
        away.batch_index,
        np.zeros(n, np.int64),
        sizes,
    )
    wire.dispatcher.acknowledge_batch(wire.core, batch)
    return n

"""Producing: messages (one by one or as columns) and entries a client built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker.admin import Admin
from cursorops.core.services.broker.context import BrokerContext, Collaborator

# The producer is imported where it is used: a command that only counts or skips does not
# load it.
if TYPE_CHECKING:
    from cursorops.core.domain.ids.message_id_columns import MessageIdColumns
    from cursorops.core.services.producer import Entry, OutgoingMessage, Producer


class Producing(Collaborator):
    """Appends to the ledgers, authorized as PRODUCE; a missing topic is created on first
    use where its namespace allows it (:meth:`Admin.topic_on_use`)."""

    def __init__(self, context: BrokerContext, admin: Admin) -> None:
        super().__init__(context)
        self.admin = admin

    def produce(
        self,
        role: str,
        topic: str,
        messages: Sequence[OutgoingMessage],
        *,
        batch_size: int = 1,
        producer_name: str = "cursorops-cli",
    ) -> list[MessageId]:
        return self._producer(role, topic, batch_size, producer_name).send(messages, self.clock())

    def produce_columns(
        self,
        role: str,
        topic: str,
        payloads: Sequence[bytes],
        *,
        batch_size: int = 1,
        producer_name: str = "cursorops-cli",
    ) -> MessageIdColumns:
        """Plain messages (a payload each, no key, properties or delay), ids as columns.

        What :meth:`produce` writes for the same plain messages, built without an
        object per message: the way to generate millions of them.
        """
        producer = self._producer(role, topic, batch_size, producer_name)
        return producer.send_columns(payloads, self.clock())

    def append_entries(self, role: str, topic: str, entries: Sequence[Entry]) -> list[Position]:
        """Append entries a client built (batching, routing and sequence ids are its own)
        to a non-partitioned topic or one partition (``t-partition-2``); their positions.

        Durable when it returns; one commit for the lot (the binary protocol's
        group commit hands every entry queued meanwhile to one call).
        """
        from cursorops.core.services.producer import entry_columns

        name = TopicName.parse(topic)
        self.access.check(role, Operation.PRODUCE, name.tenant, str(name.base), name.namespace_name)
        if not entries:
            return []
        sizes, columns = entry_columns(entries)
        return self.ledgers.append_columns(name, sizes, columns)

    def last_sequence_id(self, role: str, topic: str, producer_name: str) -> int:
        """The highest sequence id the producer ``producer_name`` has stored in a
        non-partitioned topic or one partition (``t-partition-2``); -1 when none.

        What Pulsar's deduplication recovers by replaying the ledger. Cost: one scan
        of the partition's ``producer_name`` and ``sequence_id`` columns, the name
        pushed down to the Parquet reader.
        """
        import pyarrow.compute as pc

        name = TopicName.parse(topic)
        self.access.check(role, Operation.PRODUCE, name.tenant, str(name.base), name.namespace_name)
        table = self.ledgers.read_table(
            name, ["sequence_id"], filter=pc.field("producer_name") == producer_name
        )
        if not table.num_rows:
            return -1
        return int(pc.max(table.column("sequence_id")).as_py())

    def _producer(self, role: str, topic: str, batch_size: int, producer_name: str) -> Producer:
        from cursorops.core.services.producer import Producer

        info = self.admin.topic_on_use(role, topic, Operation.PRODUCE)
        return Producer(self.ledgers, info, producer_name=producer_name, batch_size=batch_size)

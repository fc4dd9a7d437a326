"""What a consumer receives: one :class:`Message`, or a dispatch's messages as columns.

:class:`MessageBatch` is the columnar form of the read path: the ids, keys,
payloads, publish times... of the messages of one dispatch as arrays, built
without a Python object per message. ``Consumer.receive_batch`` returns one and
``Consumer.acknowledge`` takes one; :meth:`MessageBatch.messages` gives the same
messages as :class:`Message` objects (what ``receive_many`` returns), in the
same order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.message_schema import MESSAGE_SCHEMA

Ints = npt.NDArray[np.int64]

MESSAGE_COLUMNS = (
    "batch_size",
    "payload",
    "key",
    "properties",
    "publish_time",
    "deliver_at",
    "producer_name",
    "sequence_id",
    "event_time",
    "ordering_key",
    "null_value",
    "encrypted",
    "encryption_keys",
    "uuid",
    "chunk_id",
    "num_chunks_from_msg",
    "total_chunk_msg_size",
    "metadata",
    "entry_payload",
    "single_metadata",
)
"""The ledger columns a :class:`MessageBatch` carries besides the position: what a
consumer is given (the entry as its client sent it, where it was kept) and what a
preview shows."""

_COLUMN_SCHEMA = pa.schema([MESSAGE_SCHEMA.field(name) for name in MESSAGE_COLUMNS])
# Built from arrays: RecordBatch.from_pylist imports pandas (a third of a second) when it is
# installed, on the first empty dispatch of a process.
_EMPTY_COLUMNS = pa.RecordBatch.from_arrays(
    [pa.array([], field.type) for field in _COLUMN_SCHEMA], schema=_COLUMN_SCHEMA
)


@dataclass(frozen=True, slots=True)
class Message:
    message_id: MessageId
    topic: str
    payload: bytes
    key: str | None
    properties: dict[str, str]
    publish_time: int
    deliver_at: int | None
    producer_name: str
    sequence_id: int
    redelivery_count: int = 0
    consumer_epoch: int = -1
    event_time: int | None = None
    """Epoch ms the producer set as the message's event time; None when it set none."""
    ordering_key: bytes | None = None
    """The producer's ordering key (Key_Shared); None when it set none."""
    null_value: bool = False
    """Sent as a null value (a tombstone): not an empty payload."""
    encryption_keys: tuple[str, ...] | None = None
    """The names of the keys its payload is encrypted with (``payload`` is then empty:
    the broker cannot read it); None when it is not encrypted."""
    chunk: tuple[str, int, int, int] | None = None
    """A chunk of a larger message: (uuid, chunk id, chunks in the message, its total
    size); None when the message is not chunked."""
    stored_size: int | None = None
    """The size of the payload as stored when ``payload`` is not it (an encrypted or
    compressed chunk's bytes as sent); None when ``payload`` is."""

    @property
    def position(self) -> Position:
        return self.message_id.position


@dataclass(frozen=True, eq=False)
class MessageBatch:
    """Messages of one dispatch as columns, in delivery order.

    Row ``i`` is one message: it comes from partition ``topics[topic_index[i]]``
    (Pulsar's index ``partition[i]``, -1 when the topic is not partitioned) at
    ``(ledger_id[i], entry_id[i])``, batch index ``batch_index[i]``. The other
    ledger columns are in ``columns`` (:data:`MESSAGE_COLUMNS`). Every message
    of a batch was read for one consumer epoch.
    """

    topics: tuple[str, ...]
    topic_index: Ints
    partition: Ints
    ledger_id: Ints
    entry_id: Ints
    batch_index: Ints
    redelivery_count: Ints
    columns: pa.RecordBatch
    consumer_epoch: int = -1

    @classmethod
    def empty(cls, consumer_epoch: int = -1) -> MessageBatch:
        none = np.zeros(0, dtype=np.int64)
        return cls((), none, none, none, none, none, none, _EMPTY_COLUMNS, consumer_epoch)

    def __len__(self) -> int:
        return len(self.ledger_id)

    def __bool__(self) -> bool:
        return len(self.ledger_id) > 0

    @property
    def payloads(self) -> pa.BinaryArray:
        return self.columns.column("payload")

    @property
    def keys(self) -> pa.StringArray:
        return self.columns.column("key")

    @property
    def publish_times(self) -> Ints:
        return np.asarray(self.columns.column("publish_time").to_numpy(zero_copy_only=False))

    @property
    def batch_sizes(self) -> Ints:
        return np.asarray(
            self.columns.column("batch_size").to_numpy(zero_copy_only=False), dtype=np.int64
        )

    def topic_names(self) -> list[str]:
        """Each message's partition name."""
        return [self.topics[i] for i in self.topic_index.tolist()]

    def message_ids(self) -> list[MessageId]:
        return [
            MessageId.of_store(ledger, entry, partition, index, size)
            for ledger, entry, partition, index, size in zip(
                self.ledger_id.tolist(),
                self.entry_id.tolist(),
                self.partition.tolist(),
                self.batch_index.tolist(),
                self.batch_sizes.tolist(),
                strict=True,
            )
        ]

    def messages(self) -> list[Message]:
        """The same messages as :class:`Message` objects, in order."""
        values = self.columns.to_pydict()
        epoch = self.consumer_epoch
        return [
            Message(
                message_id=mid,
                topic=topic,
                payload=payload,
                key=key,
                properties=dict(properties) if properties else {},
                publish_time=publish_time,
                deliver_at=deliver_at,
                producer_name=producer_name,
                sequence_id=sequence_id,
                redelivery_count=redelivery_count,
                consumer_epoch=epoch,
                event_time=event_time,
                ordering_key=ordering_key,
                null_value=bool(null_value),
                encryption_keys=tuple(keys or ()) if encrypted else None,
                chunk=None if uuid is None else (uuid, chunk_id, chunks, total),
                stored_size=(
                    len(raw) if raw is not None and (encrypted or uuid is not None) else None
                ),
            )
            for (
                mid,
                topic,
                payload,
                key,
                properties,
                publish_time,
                deliver_at,
                producer_name,
                sequence_id,
                redelivery_count,
                event_time,
                ordering_key,
                null_value,
                encrypted,
                keys,
                uuid,
                chunk_id,
                chunks,
                total,
                raw,
            ) in zip(
                self.message_ids(),
                self.topic_names(),
                values["payload"],
                values["key"],
                values["properties"],
                values["publish_time"],
                values["deliver_at"],
                values["producer_name"],
                values["sequence_id"],
                self.redelivery_count.tolist(),
                values["event_time"],
                values["ordering_key"],
                values["null_value"],
                values["encrypted"],
                values["encryption_keys"],
                values["uuid"],
                values["chunk_id"],
                values["num_chunks_from_msg"],
                values["total_chunk_msg_size"],
                values["entry_payload"],
                strict=True,
            )
        ]

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages())

    def __getitem__(self, row: int) -> Message:
        if not -len(self) <= row < len(self):
            raise IndexError("message batch index out of range")
        row %= len(self)
        return self.slice(row, row + 1).messages()[0]

    def slice(self, start: int, stop: int) -> MessageBatch:
        """Rows ``start .. stop - 1`` (zero-copy)."""
        return MessageBatch(
            self.topics,
            self.topic_index[start:stop],
            self.partition[start:stop],
            self.ledger_id[start:stop],
            self.entry_id[start:stop],
            self.batch_index[start:stop],
            self.redelivery_count[start:stop],
            self.columns.slice(start, max(stop - start, 0)),
            self.consumer_epoch,
        )

    @classmethod
    def concat(cls, parts: Sequence[MessageBatch]) -> MessageBatch:
        """The rows of ``parts`` one after the other (all read for one epoch)."""
        if len(parts) == 1:
            return parts[0]
        topics: dict[str, int] = {}
        remapped = []
        for part in parts:
            codes = np.asarray([topics.setdefault(t, len(topics)) for t in part.topics], np.int64)
            remapped.append(codes[part.topic_index] if len(part) else part.topic_index)
        return cls(
            tuple(topics),
            np.concatenate(remapped),
            np.concatenate([p.partition for p in parts]),
            np.concatenate([p.ledger_id for p in parts]),
            np.concatenate([p.entry_id for p in parts]),
            np.concatenate([p.batch_index for p in parts]),
            np.concatenate([p.redelivery_count for p in parts]),
            pa.concat_batches([p.columns for p in parts]),
            parts[0].consumer_epoch,
        )


__all__ = ["MESSAGE_COLUMNS", "Message", "MessageBatch"]

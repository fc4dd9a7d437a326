"""The backlog as a relation: one row per unacknowledged message of a subscription.

The rows are the messages a consumer of the subscription would still receive, read
by the dispatcher's own read path (:func:`cursorops.core.services.reading.dispatch.
unacknowledged`): batch-index and individual acknowledgements, skips and resets
honoured, a chunked message one row at its last chunk, as analyze-backlog counts it
(:func:`cursorops.core.domain.analysis.backlog.unacked_messages`), so ``count(*)``
over the relation is analyze-backlog's ``messages``.

This module holds what is pure about it: the columns (:data:`BACKLOG_SCHEMA`), which
of them are content (:data:`CONTENT_COLUMNS`, by :mod:`cursorops.core.domain.content`'s
one rule), a row's state (:func:`states`) and the snapshot a result names
(:class:`BacklogSnapshot`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cursorops.core.domain.content import CONTENT_FIELDS


class MessageState(StrEnum):
    """Where an unacknowledged message stands for its subscription at the snapshot."""

    AVAILABLE = "available"
    """The next dispatch may hand it to a consumer (released ones included)."""
    HELD = "held"
    """Delivered to a live consumer (``held_by``) and not acknowledged yet."""
    DELAYED = "delayed"
    """Its ``deliver_at`` is later than the snapshot, on a subscription that waits for it
    (Shared and Key_Shared)."""


BACKLOG_SCHEMA = pa.schema(
    [
        pa.field("topic_partition", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("ledger_id", pa.int64(), nullable=False),
        pa.field("entry_id", pa.int64(), nullable=False),
        pa.field("batch_index", pa.int32(), nullable=False),
        pa.field("batch_size", pa.int32(), nullable=False),
        pa.field("message_id", pa.string(), nullable=False),
        pa.field("triplet", pa.string(), nullable=False),
        pa.field("message_id_base64", pa.string(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("ordering_key", pa.binary()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("publish_time", pa.int64(), nullable=False),
        pa.field("event_time", pa.int64()),
        pa.field("deliver_at", pa.int64()),
        pa.field("producer_name", pa.string(), nullable=False),
        pa.field("sequence_id", pa.int64(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("chunks", pa.int32(), nullable=False),
        pa.field("encrypted", pa.bool_(), nullable=False),
        pa.field("redelivery_count", pa.int64(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("held_by", pa.string()),
        pa.field("payload", pa.binary()),
    ]
)
"""One row per unacknowledged message, in partition then position order.

- Position: ``partition`` (-1 when the topic is not partitioned), ``ledger_id``,
  ``entry_id``, ``batch_index`` (-1: not batched), ``batch_size`` (0: not batched); the
  id as the official Python client prints it (``message_id``, ``(ledger,entry,partition,
  batch)``), as ``--messageId-triplet`` takes it (``triplet``) and as
  ``--messageId-base64`` takes it; each form is read back by every command that takes an id.
- Metadata: times in epoch milliseconds (``event_time`` and ``deliver_at`` null when the
  producer set none), ``size`` the message's bytes as stored (a chunked message's whole
  size; an encrypted one's stored bytes), ``chunks`` 0 unless the message is chunked.
- Content: ``key``, ``ordering_key``, ``properties`` and ``payload``; null for a reader
  who may not peek (:data:`CONTENT_COLUMNS`). A chunked message's payload is its chunks'
  payloads in chunk order; an encrypted message's is empty (the broker cannot read it).
- State: ``redelivery_count`` as the next consumer would receive it, ``state`` one of
  :class:`MessageState`, ``held_by`` the name of the consumer holding a ``held`` message.
"""

BACKLOG_COLUMNS = tuple(BACKLOG_SCHEMA.names)


def _field_name(column: str) -> str:
    """A column's name as the JSON documents spell it (``ordering_key``: ``orderingKey``)."""
    head, *rest = column.split("_")
    return head + "".join(part.title() for part in rest)


CONTENT_COLUMNS = tuple(c for c in BACKLOG_COLUMNS if _field_name(c) in CONTENT_FIELDS)
"""The columns that are message content by :data:`cursorops.core.domain.content.
CONTENT_FIELDS`: ``key``, ``ordering_key``, ``properties``, ``payload``."""


def masked(table: pa.Table) -> pa.Table:
    """``table`` with every content column null (its type kept, so a query over a masked
    relation reads the same columns)."""
    for column in CONTENT_COLUMNS:
        at = table.schema.get_field_index(column)
        table = table.set_column(
            at, table.schema.field(at), pa.nulls(table.num_rows, table.schema.field(at).type)
        )
    return table


def states(
    held: npt.NDArray[np.bool_],
    deliver_at: npt.NDArray[np.int64],
    as_of_ms: int,
    honours_delay: bool,
) -> list[str]:
    """Each row's :class:`MessageState`: held first (a consumer has it, delayed or not),
    then delayed (``deliver_at`` after ``as_of_ms``, where the subscription type waits for
    it; ``deliver_at`` is ``as_of_ms`` or less for a message that is not delayed)."""
    delayed = (deliver_at > as_of_ms) if honours_delay else np.zeros(len(held), np.bool_)
    codes = np.where(held, 1, np.where(delayed, 2, 0))
    names = (MessageState.AVAILABLE.value, MessageState.HELD.value, MessageState.DELAYED.value)
    return [names[c] for c in codes.tolist()]


@dataclass(frozen=True)
class PartitionMark:
    """What one partition's rows were read at: its cursor's journal version and its last
    committed entry (``ledger:entry``; ``-1:-1`` for none)."""

    topic_partition: str
    cursor_version: int
    last_entry: str


@dataclass(frozen=True)
class BacklogSnapshot:
    """The state a backlog relation was read at: two results naming one :attr:`id` hold
    the same rows, every column the same.

    ``marks``: each partition's cursor version and last entry; ``pending``: a digest of
    the subscription's pending messages as judged at ``as_of_ms`` (who holds what, a lapsed
    lease holding nothing; redelivery counts), which have no version of their own;
    ``delayed``: a digest of which rows were still delayed at ``as_of_ms``. The clock
    itself is not part of the id: a later read of an unchanged backlog, with no delay
    come due and no lease lapsed meanwhile, names the same snapshot.
    """

    topic: str
    subscription: str
    as_of_ms: int
    marks: tuple[PartitionMark, ...]
    pending: str
    delayed: str

    @property
    def id(self) -> str:
        """16 hex digits of the SHA-256 of every field but ``as_of_ms``."""
        fields = self._fields()
        del fields["asOfMs"]
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def _fields(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "asOfMs": self.as_of_ms,
            "partitions": [
                {
                    "topicPartition": m.topic_partition,
                    "cursorVersion": m.cursor_version,
                    "lastEntry": m.last_entry,
                }
                for m in self.marks
            ],
            "pending": self.pending,
            "delayed": self.delayed,
        }

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, **self._fields()}


def delayed_digest(state: Sequence[str]) -> str:
    """A digest of which rows (in order) are :attr:`MessageState.DELAYED`."""
    flags = np.fromiter((s == MessageState.DELAYED for s in state), np.bool_, len(state))
    return hashlib.sha256(np.packbits(flags).tobytes() + str(len(state)).encode()).hexdigest()[:16]


def pending_digest(messages: Iterable[tuple[str, int, int, int, int, str | None]]) -> str:
    """A digest of the pending messages, each ``(partition, ledger, entry, batch index,
    redelivery count, holder or None)``, whatever their order."""
    digest = hashlib.sha256()
    for message in sorted(messages, key=lambda m: (m[:5], m[5] or "")):
        digest.update(repr(message).encode("utf-8"))
    return digest.hexdigest()[:16]


__all__ = [
    "BACKLOG_COLUMNS",
    "BACKLOG_SCHEMA",
    "CONTENT_COLUMNS",
    "BacklogSnapshot",
    "MessageState",
    "PartitionMark",
    "delayed_digest",
    "masked",
    "pending_digest",
    "states",
]

"""Producers and consumers of one connection, over the
:class:`~cursorops.core.services.broker.Broker`.

Everything here runs on the store thread (:class:`cursorops.wire.store_thread.StoreThread`),
one call at a time: the broker and its stores are used by one thread, and a
consumer's bookkeeping (what it holds, its epoch) needs no lock.

A :class:`WireConsumer` is one ``consumer_id`` of a connection. Its core
consumer's identity in the subscription's registry is shared by the wire
consumers of one connection with the same name on the same subscription: the
client's consumer of a partitioned topic is one wire consumer per partition,
and Pulsar counts it as one consumer (Exclusive admits it, Failover ranks it
once).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from cursorops.core.domain.acks.ack_set import first_unacked, from_words, full
from cursorops.core.domain.acks.ack_words import AckWords
from cursorops.core.domain.delivery.redelivery import Release
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.reading.dispatch import Consumer, Dispatcher
from cursorops.core.services.reading.message import Message, MessageBatch
from cursorops.wire.commands import AckType
from cursorops.wire.entries import (
    OutgoingEntry,
    ack_set_of,
    batch_metadata,
    entry_payload,
    interleaved_batch,
    message_command,
    sent_payload,
    uniform_batch_payload,
)
from cursorops.wire.frames import encode_payload_frame
from cursorops.wire.proto import Proto

_INT64 = 1 << 64


def signed64(value: int) -> int:
    """A ``uint64`` id field as the int64 it encodes (-1 is ``2**64 - 1`` on the wire)."""
    return value - _INT64 if value >= 1 << 63 else value


def _binary_buffers(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary column's offsets (``len + 1``, of this slice) and value bytes, as numpy
    views of its buffers."""
    _, offsets, data = column.buffers()
    assert offsets is not None
    at = np.frombuffer(offsets, np.int32)[column.offset : column.offset + len(column) + 1]
    values = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return at, values


def _int64s(column: pa.Array) -> np.ndarray:
    """An int64 column without nulls as a numpy view of its buffer."""
    data = column.buffers()[1]
    assert data is not None and column.null_count == 0
    return np.frombuffer(data, np.int64)[column.offset : column.offset + len(column)]


def _values_or_none(column: pa.Array) -> list[Any] | None:
    """The column's values; None when all are null (no Python object per message)."""
    return None if column.null_count == len(column) else column.to_pylist()


def _properties(column: pa.Array, n: int) -> list[Sequence[tuple[str, str]]]:
    """Each message's properties; without a Python object per message when none has any."""
    offsets = column.offsets
    if n == 0 or offsets[0].as_py() == offsets[-1].as_py():
        return [()] * n
    return [p or () for p in column.to_pylist()]


class _Verbatim:
    """Entries' payloads as their clients sent them, from a dispatch's columns."""

    def __init__(self, columns: pa.RecordBatch | pa.Table) -> None:
        self.raw = columns.column("entry_payload")
        if isinstance(self.raw, pa.ChunkedArray):
            self.raw = self.raw.combine_chunks()
        self.any_raw = self.raw.null_count < len(self.raw)
        payload = columns.column("payload")
        singles = columns.column("single_metadata")
        if isinstance(payload, pa.ChunkedArray):
            payload, singles = payload.combine_chunks(), singles.combine_chunks()
        self.payload_column, self.single_column = payload, singles
        self.offsets, self.values = _binary_buffers(payload)
        self.single_offsets, self.single_values = _binary_buffers(singles)

    def payload(self, start: int, stop: int, size: int) -> bytes:
        """The payload of the entry at rows ``start .. stop - 1`` (all its messages)."""
        if self.any_raw:
            raw = self.raw[start].as_py()
            if raw is not None:
                return bytes(raw)
        if size == 0:
            return bytes(self.payload_column[start].as_py())
        own = np.diff(self.offsets[start : stop + 1])
        single = np.diff(self.single_offsets[start : stop + 1])
        if own.min() == own.max() and single.min() == single.max() and single[0] > 0:
            # One payload size and one metadata size (what producers mostly send): numpy.
            length, width = int(own[0]), int(single[0])
            first, at = int(self.offsets[start]), int(self.single_offsets[start])
            return interleaved_batch(
                self.single_values[at : at + width * size].reshape(size, width),
                self.values[first : first + length * size].reshape(size, length),
            )
        return sent_payload(
            size,
            None,
            self.single_column.slice(start, stop - start).to_pylist(),
            self.payload_column.slice(start, stop - start).to_pylist(),
        )


class _Rebuilt:
    """Entries without their client's bytes, written from the dispatch's columns."""

    def __init__(self, batch: MessageBatch, bounds: list[int]) -> None:
        columns = batch.columns
        n = len(batch)
        firsts = pa.array(bounds[:-1], pa.int64())
        self.payload_column = columns.column("payload")
        self.sequence_column = columns.column("sequence_id")
        self.keys = _values_or_none(columns.column("key"))
        self.properties = _properties(columns.column("properties"), n)
        self.producers = columns.column("producer_name").take(firsts).to_pylist()
        self.publish_times = columns.column("publish_time").take(firsts).to_pylist()
        self.deliver_at = columns.column("deliver_at").take(firsts).to_pylist()
        self.event_times = _values_or_none(columns.column("event_time"))
        self.ordering_keys = _values_or_none(columns.column("ordering_key"))
        self.n = n
        self.plain = (
            self.keys is None
            and self.event_times is None
            and self.ordering_keys is None
            and self.properties[0] == ()
            and self.properties.count(()) == n
        )
        self.offsets, self.values = _binary_buffers(self.payload_column)
        self.lengths = np.diff(self.offsets)
        self.sequences = _int64s(self.sequence_column)
        self._lists: dict[str, list[Any]] = {}

    def _listed(self, name: str, column: pa.Array) -> list[Any]:
        if name not in self._lists:
            self._lists[name] = column.to_pylist()
        return self._lists[name]

    def entry(
        self, number: int, start: int, stop: int, size: int, delivered: list[int]
    ) -> tuple[bytes, bytes, list[int] | None]:
        """(metadata, payload, ack_set) of the entry at rows ``start .. stop - 1``.

        A whole batch of plain messages of one size with consecutive sequence ids is
        written with numpy from the payload column's buffers; any other entry message
        by message (:func:`entry_payload`).
        """
        sequences = self.sequences
        if self.plain and size == stop - start and delivered[0] == 0 and delivered[-1] == size - 1:
            own = self.lengths[start:stop]
            steps = np.diff(sequences[start:stop])
            if own.min() == own.max() and (steps == 1).all():
                length = int(own[0])
                first = int(self.offsets[start])
                rows = self.values[first : first + length * size].reshape(size, length)
                body = uniform_batch_payload(rows, int(sequences[start]))
                if body is not None:
                    meta = batch_metadata(
                        self.producers[number],
                        int(sequences[start]),
                        self.publish_times[number],
                        size,
                        self.deliver_at[number],
                    )
                    return meta, body, None
        keys, event_times, ordering_keys = self.keys, self.event_times, self.ordering_keys
        return entry_payload(
            OutgoingEntry(
                size,
                self.producers[number],
                self.publish_times[number],
                self.deliver_at[number],
                delivered,
                self._listed("payload", self.payload_column)[start:stop],
                (keys or [None] * self.n)[start:stop],
                self.properties[start:stop],
                self._listed("sequence_id", self.sequence_column)[start:stop],
                event_times[start:stop] if event_times is not None else None,
                ordering_keys[start:stop] if ordering_keys is not None else None,
            )
        )


@dataclass
class Identity:
    """One consumer in the subscription's registry, shared by its wire consumers."""

    consumer_id: str
    wire: int = 0
    """How many wire consumers use it: it leaves the subscription with the last."""


@dataclass
class WireConsumer:
    consumer_id: int
    """The client's id for it on this connection."""
    topic: str
    """The partition (or non-partitioned topic) it reads."""
    base_topic: str
    subscription: str
    sub_type: SubscriptionType
    partition: int
    dispatcher: Dispatcher
    core: Consumer
    identity: Identity
    registry_key: tuple[str, str, str]
    durable: bool = True
    """False for a reader: its subscription goes when it closes."""
    permits: int = 0
    closed: bool = False
    held: dict[tuple[int, int], set[int]] = field(default_factory=dict)
    """Entries delivered and not acknowledged: their delivered batch indexes (-1: unbatched)."""
    batch_sizes: dict[tuple[int, int], int] = field(default_factory=dict)

    # -- dispatch ---------------------------------------------------------------

    def dispatch(self, permits: int) -> tuple[list[bytes], int]:
        """``permits`` messages or more as ``CommandMessage`` frames; (frames, messages).

        Whole entries, as Pulsar's dispatchers send them (its permits may go below
        zero): a batch is never split between consumers by the permits. A client with
        batch-index acks off (the official clients' default) acknowledges a batch only
        once every message it received of it is acknowledged, and sends nothing for a
        batch it got part of while another consumer got the rest: those messages
        would come back after the application had acknowledged them.
        """
        if self.closed:
            return [], 0
        self.dispatcher.flow(self.core, permits, whole_entries=True)
        parts = self._taken()
        if not parts:
            return [], 0
        batch = MessageBatch.concat(parts)
        return self._frames(batch), len(batch)

    def _taken(self) -> list[MessageBatch]:
        """What the dispatcher handed to the core consumer, in order."""
        parts = []
        while self.core.wire:
            batch = self.core.wire.popleft()
            if len(batch):
                parts.append(batch)
        return parts

    def _frames(self, batch: MessageBatch) -> list[bytes]:
        """One frame per entry, from the dispatch's columns (no object per message).

        An entry a client sent over this protocol goes out as it came: its
        ``MessageMetadata`` bytes and its payload as sent (:meth:`_sent`); only the
        ``CommandMessage`` says what the broker adds (redelivery count, ``ack_set``,
        epoch). Any other entry (written before the broker kept them, or produced
        by the command line or the REST API) is written from its columns
        (:meth:`_rebuilt`).
        """
        columns = batch.columns
        n = len(batch)
        ledgers, entries = batch.ledger_id, batch.entry_id
        cuts = np.flatnonzero((ledgers[1:] != ledgers[:-1]) | (entries[1:] != entries[:-1])) + 1
        bounds = [0, *cuts.tolist(), n]
        firsts = pa.array(bounds[:-1], pa.int64())
        metadata = columns.column("metadata").take(firsts).to_pylist()
        sizes = batch.batch_sizes.tolist()
        indexes = batch.batch_index.tolist()
        redeliveries = batch.redelivery_count.tolist()
        ledger_list, entry_list = ledgers.tolist(), entries.tolist()
        epoch = batch.consumer_epoch
        rebuilt: _Rebuilt | None = None
        sent: _Verbatim | None = None
        frames = []
        for number, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            position = (ledger_list[start], entry_list[start])
            size = sizes[start]
            delivered = indexes[start:stop]
            self.batch_sizes[position] = size
            self.held.setdefault(position, set()).update(delivered)
            whole = size == 0 or (
                size == stop - start and delivered[0] == 0 and delivered[-1] == size - 1
            )
            out: tuple[bytes, bytes, list[int] | None] | None = None
            if whole and metadata[number] is not None:
                sent = sent or _Verbatim(columns)
                out = metadata[number], sent.payload(start, stop, size), None
            elif not whole:
                out = self._sent_whole(position, size, delivered)
            if out is None:
                rebuilt = rebuilt or _Rebuilt(batch, bounds)
                out = rebuilt.entry(number, start, stop, size, delivered)
            meta, body, ack_set = out
            cmd = message_command(
                self.consumer_id,
                position[0],
                position[1],
                self.partition,
                max(redeliveries[start:stop]),
                ack_set,
                epoch if epoch >= 0 else None,
            )
            frames.append(encode_payload_frame(cmd, meta, body))
        return frames

    def _sent_whole(
        self, position: tuple[int, int], size: int, delivered: Sequence[int]
    ) -> tuple[bytes, bytes, list[int] | None] | None:
        """Part of a batch a client sent: the whole entry as sent, read again from the
        partition, with the indexes delivered now set in the ``ack_set`` (the client
        skips the others, as it skips what Pulsar marks acknowledged); None for an
        entry without its client's bytes."""
        rows = self.dispatcher.entry_rows(self.topic, Position(*position))
        if rows is None or len(rows) != size:
            return None
        meta = rows.column("metadata")[0].as_py()
        if meta is None:
            return None
        body = _Verbatim(rows).payload(0, size, size)
        return meta, body, ack_set_of(delivered, size)

    # -- acknowledgements -------------------------------------------------------

    def _message(self, ledger: int, entry: int, index: int, size: int) -> Message:
        """The id of a message to hand to the dispatcher (only its id and topic are read)."""
        mid = MessageId(ledger, entry, self.partition, index, size)
        return Message(mid, self.topic, b"", None, {}, 0, None, "", 0)

    def acknowledge(self, body: Proto) -> None:
        ids: list[Proto] = body.get("message_id", [])
        if body.get("ack_type", AckType.Individual) == AckType.Cumulative:
            if ids:
                self._acknowledge_cumulative(ids[-1])
            return
        ledgers: list[int] = []
        entries: list[int] = []
        sizes: list[int] = []
        counts: list[int] = []
        words: list[int] = []
        for mid in ids:
            ledger, entry = signed64(mid["ledgerId"]), signed64(mid["entryId"])
            size = max(self.batch_sizes.get((ledger, entry)) or mid.get("batch_size", 0), 0)
            # No ack_set on a batch: the whole entry (a client with batch-index acks off
            # acknowledges a batch once all its messages are).
            given = mid.get("ack_set") if size else None
            ledgers.append(ledger)
            entries.append(entry)
            sizes.append(size)
            counts.append(len(given) if given else 0)
            if given:
                words.extend(given)
        if not ledgers:
            return
        acks = AckWords.of(ledgers, entries, sizes, counts, words)
        self.dispatcher.acknowledge_words(self.core, self.topic, acks)
        at = 0
        for ledger, entry, count in zip(ledgers, entries, counts, strict=True):
            self._forget_acked((ledger, entry), words[at : at + count])
            at += count

    def _forget_acked(self, key: tuple[int, int], words: Sequence[int]) -> None:
        """Forget the held indexes of an entry that ``words`` (an ack set) acknowledge: all
        of them when there are none."""
        held = self.held.get(key)
        if held is None:
            return
        if words:
            bits = from_words(words)
            held.intersection_update([index for index in held if bits >> index & 1])
        if not words or not held:
            del self.held[key]
            self.batch_sizes.pop(key, None)

    def _forget(self, key: tuple[int, int], indexes: Iterable[int]) -> None:
        held = self.held.get(key)
        if held is None:
            return
        held.difference_update(indexes)
        if not held:
            del self.held[key]
            self.batch_sizes.pop(key, None)

    def _acknowledge_cumulative(self, mid: Proto) -> None:
        ledger, entry = signed64(mid["ledgerId"]), signed64(mid["entryId"])
        size = self.batch_sizes.get((ledger, entry)) or mid.get("batch_size", 0)
        index = -1
        words = mid.get("ack_set")
        if size > 0 and words:
            first = first_unacked(from_words(words) & full(size))
            if first >= 0:
                index = first - 1
                if index < 0:
                    return
        self.dispatcher.acknowledge_cumulative(self.core, self._message(ledger, entry, index, size))
        for key in [k for k in self.held if k < (ledger, entry)]:
            del self.held[key]
            self.batch_sizes.pop(key, None)
        if index < 0:
            self.held.pop((ledger, entry), None)
        else:
            self._forget((ledger, entry), range(index + 1))

    # -- redelivery -------------------------------------------------------------

    def release_held(self) -> None:
        """Make what this wire consumer holds deliverable again for a seek, redelivery counts
        unchanged (its partition only: the identity's other wire consumers keep theirs)."""
        keys = [
            (self.topic, ledger, entry, index)
            for (ledger, entry), indexes in self.held.items()
            for index in sorted(indexes)
        ]
        self.held.clear()
        self.batch_sizes.clear()
        self.dispatcher.release(self.core, keys, Release.SEEK)

    def redeliver(self, body: Proto) -> None:
        ids: list[Proto] = body.get("message_ids", [])
        if ids and self.sub_type in (SubscriptionType.SHARED, SubscriptionType.KEY_SHARED):
            keys: list[tuple[str, int, int, int]] = []
            for mid in ids:
                entry = (signed64(mid["ledgerId"]), signed64(mid["entryId"]))
                for index in sorted(self.held.pop(entry, {-1})):
                    keys.append((self.topic, entry[0], entry[1], index))
                self.batch_sizes.pop(entry, None)
            # The client names a chunked message by its last chunk: all its chunks go again.
            keys = self.dispatcher.whole_messages(self.core, keys)
            for _, ledger, entry_id, _ in keys:
                self.held.pop((ledger, entry_id), None)
                self.batch_sizes.pop((ledger, entry_id), None)
            self.dispatcher.release(self.core, keys, Release.REDELIVER)
            return
        if self.core.epoch >= 0:
            epoch = body.get("consumer_epoch")
            self.core.epoch = epoch if epoch is not None else self.core.epoch + 1
        self.held.clear()
        self.batch_sizes.clear()
        self.dispatcher.redeliver_unacknowledged(self.core)


class Registry:
    """The connection's identities, by (base topic, subscription, consumer name)."""

    def __init__(self, connection_id: str) -> None:
        self.connection_id = connection_id
        self._identities: dict[tuple[str, str, str], Identity] = {}

    def join(self, key: tuple[str, str, str]) -> Identity:
        identity = self._identities.get(key)
        if identity is None:
            identity = Identity(f"{self.connection_id}/{len(self._identities)}/{key[2]}"[:200])
            self._identities[key] = identity
        identity.wire += 1
        return identity

    def leave(self, key: tuple[str, str, str]) -> bool:
        """True when the identity's last wire consumer left."""
        identity = self._identities.get(key)
        if identity is None:
            return True
        identity.wire -= 1
        if identity.wire <= 0:
            del self._identities[key]
            return True
        return False

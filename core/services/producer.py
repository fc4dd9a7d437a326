"""Producer-side batching and partition routing, with the Java client's habits.

Routing (``RoundRobinPartitionMessageRouter``, the Java client's default): a
keyed message goes to ``signSafeMod(JavaStringHash(key), partitions)``; unkeyed
messages go round-robin, one batch-sized group of messages per partition in turn,
starting, as the Java client's ``PartitionedProducerImpl`` does, at a random
partition for each producer: one-shot producers (each CLI call) then spread
evenly instead of always filling partition 0 first.
Batching: within a partition, consecutive messages that are not delayed form
entries of up to ``batch_size`` messages. Producers do not batch delayed
messages: each one is an entry of its own, not batched.

Plain messages (no key, properties, delay or explicit sequence id: the bulk
of generated data) take a columnar path: routing, entries, sequence ids and
the Arrow columns are computed over arrays, with one list pass per column.
It writes exactly what the per-message path writes, which serves every other
call and gives the one-line error for a bad message. ``send_columns`` takes
plain messages as a payload array and returns their ids as
:class:`~cursorops.core.domain.ids.message_id_columns.MessageIdColumns`, with no object per
message on either side: the form for generating data in bulk.

Size: one module on purpose. Batching, routing and the columnar send share the
Java client's batching rules; split, one rule would have two homes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, cast

import numpy as np
import pyarrow as pa

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.message_id_columns import MessageIdColumns
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.message_schema import MESSAGE_SCHEMA
from cursorops.core.store import arrow_columns
from cursorops.core.store.ledger import LedgerStore, RowDraft
from cursorops.core.store.values import TopicInfo


@dataclass(frozen=True)
class OutgoingMessage:
    payload: bytes
    key: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    deliver_at: int | None = None
    """Epoch ms before which a Shared/Key_Shared subscription does not deliver it; None = now."""
    sequence_id: int | None = None
    """None = the producer assigns the next of its own increasing sequence."""


@dataclass(frozen=True)
class Entry:
    """One entry as a client built it (the binary protocol's ``CommandSend``): whether
    its messages form a batch, the producer name and publish time the client stamped
    on it, and its messages as aligned columns, one item per message (no object per
    message: the binary protocol's group commit appends thousands of them per call).
    Every message needs its ``sequence_id``."""

    batched: bool
    producer_name: str
    publish_time: int
    payloads: Sequence[bytes] | pa.BinaryArray
    """A binary array where the client's batch was read as a whole."""
    sequence_ids: Sequence[int | None] | np.ndarray
    """An int64 array where the client's batch was read as a whole."""
    keys: Sequence[str | None]
    properties: Sequence[Sequence[tuple[str, str]]]
    deliver_at: Sequence[int | None]
    event_times: Sequence[int | None]
    """Epoch ms; None where the producer set no event time."""
    ordering_keys: Sequence[bytes | None]
    null_values: Sequence[bool] | None = None
    """Which messages were sent as a null value; None: none was."""
    encryption_keys: Sequence[str] | None = None
    """The names of the keys its payload is encrypted with; None: not encrypted."""
    chunk: tuple[str, int, int, int] | None = None
    """A chunk of a larger message: (uuid, chunk id, chunks in the message, its size)."""
    schema_version: bytes | None = None
    metadata: bytes | None = None
    """The client's ``MessageMetadata`` bytes, verbatim."""
    raw_payload: bytes | None = None
    """The payload as sent, where it cannot be rebuilt from the message columns."""
    single_metadata: Sequence[bytes] | pa.BinaryArray | None = None
    """Each batched message's ``SingleMessageMetadata`` bytes, verbatim."""

    @classmethod
    def of_messages(
        cls,
        messages: Sequence[OutgoingMessage],
        batched: bool,
        producer_name: str,
        publish_time: int,
        event_times: Sequence[int | None] | None = None,
        ordering_keys: Sequence[bytes | None] | None = None,
    ) -> Entry:
        """The entry of ``messages`` (the message-object form)."""
        n = len(messages)
        return cls(
            batched,
            producer_name,
            publish_time,
            list(map(_PAYLOAD, messages)),
            list(map(_SEQUENCE_ID, messages)),
            list(map(_KEY, messages)),
            [list(p.items()) if p else [] for p in map(_PROPERTIES, messages)],
            list(map(_DELIVER_AT, messages)),
            list(event_times) if event_times is not None else [None] * n,
            list(ordering_keys) if ordering_keys is not None else [None] * n,
        )


_PROPERTIES_TYPE = MESSAGE_SCHEMA.field("properties").type


def entry_columns(entries: Sequence[Entry]) -> tuple[np.ndarray, dict[str, pa.Array]]:
    """The ledger columns of client-built entries and their sizes (what
    ``LedgerStore.append_columns`` takes), checked as ``LedgerStore.append`` checks rows.

    Columns are concatenated entry by entry (``list.extend`` of each entry's
    columns), with no row object per message.
    """
    sizes: list[int] = []
    batched: list[bool] = []
    publish: list[int] = []
    producers: list[str] = []
    payloads: list[bytes] = []
    keys: list[str | None] = []
    properties: list[Sequence[tuple[str, str]]] = []
    deliver: list[int | None] = []
    sequence: list[int | None] = []
    event_times: list[int | None] = []
    ordering_keys: list[bytes | None] = []
    # Entries read as a whole come as arrays: chunks, with the list items between them.
    payload_chunks: list[pa.Array] = []
    sequence_chunks: list[np.ndarray] = []
    sent = _SentColumns()
    for number, entry in enumerate(entries):
        n = len(entry.payloads)
        if n == 0 or (n > 1 and not entry.batched):
            raise InvalidArgumentError(
                f"Entry {number}: {n} messages in {'a batch' if entry.batched else 'an entry'}"
            )
        lengths = {
            len(entry.sequence_ids),
            len(entry.keys),
            len(entry.properties),
            len(entry.deliver_at),
            len(entry.event_times),
            len(entry.ordering_keys),
        }
        if lengths != {n}:
            raise InvalidArgumentError(f"Entry {number}: its message columns differ in length")
        sizes.append(n)
        batched.append(entry.batched)
        publish.append(entry.publish_time)
        producers.append(entry.producer_name)
        if isinstance(entry.payloads, pa.Array):
            if payloads:
                payload_chunks.append(_payload_chunk(payloads))
                payloads = []
            payload_chunks.append(entry.payloads)
        else:
            payloads.extend(entry.payloads)
        if isinstance(entry.sequence_ids, np.ndarray):
            if sequence:
                sequence_chunks.append(_sequence_chunk(sequence))
                sequence = []
            sequence_chunks.append(entry.sequence_ids)
        else:
            sequence.extend(entry.sequence_ids)
        keys.extend(entry.keys)
        properties.extend(entry.properties)
        deliver.extend(entry.deliver_at)
        event_times.extend(entry.event_times)
        ordering_keys.extend(entry.ordering_keys)
        sent.add(entry, n)
    if not sizes:
        raise InvalidArgumentError("No entry to append")
    if None in sequence:
        raise InvalidArgumentError("A client-built entry needs every message's sequence id")
    if sequence or not sequence_chunks:
        sequence_chunks.append(_sequence_chunk(sequence))
    sequence_ids = np.concatenate(sequence_chunks).astype(np.int64, copy=False)
    if payloads or not payload_chunks:
        payload_chunks.append(_payload_chunk(payloads))
    payload_column = (
        payload_chunks[-1] if len(payload_chunks) == 1 else pa.concat_arrays(payload_chunks)
    )
    # Checked on the lists: Array.to_numpy of a column with nulls imports pandas.
    for name, values in (
        ("publish_time", publish),
        ("deliver_at", deliver),
        ("event_time", event_times),
    ):
        if cast("list[object]", values).count(None) == len(values):
            continue
        present = values if None not in values else [v for v in values if v is not None]
        try:
            negative = bool(present) and min(cast("list[int]", present)) < 0
        except TypeError as exc:
            raise InvalidArgumentError(f"Invalid {name}: must be integers") from exc
        if negative:
            raise InvalidArgumentError(f"Invalid {name}: must be at least 0")
    if len(sequence_ids) and int(sequence_ids.min()) < 0:
        raise InvalidArgumentError("Invalid sequence_id: must be at least 0")
    counts = np.asarray(sizes, dtype=np.int64)
    total = int(counts.sum())
    flags = np.asarray(batched, dtype=bool)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    in_batch = np.repeat(flags, counts)
    batch_index = np.where(in_batch, np.arange(total, dtype=np.int64) - starts, -1)
    batch_size = np.where(in_batch, np.repeat(counts, counts), 0)
    try:
        columns = {
            "batch_index": arrow_columns.from_numpy(batch_index.astype(np.int32)),
            "batch_size": arrow_columns.from_numpy(batch_size.astype(np.int32)),
            "publish_time": arrow_columns.from_numpy(
                np.repeat(np.asarray(publish, dtype=np.int64), counts)
            ),
            "deliver_at": _nullable(deliver, pa.int64()),
            "key": _nullable(keys, pa.string()),
            "properties": (
                pa.array(properties, _PROPERTIES_TYPE)
                if any(properties)
                else arrow_columns.empty_maps(total, _PROPERTIES_TYPE)
            ),
            "payload": payload_column,
            "producer_name": (
                arrow_columns.repeated_string(producers[0], total)
                if producers.count(producers[0]) == len(producers)
                else pa.array(list(np.repeat(np.asarray(producers, object), counts)), pa.string())
            ),
            "sequence_id": arrow_columns.from_numpy(sequence_ids),
            "event_time": _nullable(event_times, pa.int64()),
            "ordering_key": _nullable(ordering_keys, pa.binary()),
            **sent.columns(counts),
        }
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"Invalid entry: {exc}") from exc
    return np.asarray(sizes, dtype=np.int64), columns


class _SentColumns:
    """The columns of what clients sent verbatim, and of the facts analysis reads from it
    (null value, encryption, chunk, schema version), gathered entry by entry.

    Entries with none of it (every entry not sent by a client) add nothing per
    message: their columns come out as nulls without a pass over the rows.
    """

    def __init__(self) -> None:
        self.entries = 0
        self.any = False
        self.metadata: list[bytes | None] = []
        self.raw_payloads: list[bytes | None] = []
        self.encryption_keys: list[list[str] | None] = []
        self.chunks: list[tuple[str, int, int, int] | None] = []
        self.schema_versions: list[bytes | None] = []
        self.null_values: list[bool | None] = []
        self.singles: list[pa.Array] = []
        self.single_rows = 0

    def add(self, entry: Entry, n: int) -> None:
        self.entries += 1
        self.metadata.append(entry.metadata)
        self.raw_payloads.append(entry.raw_payload)
        keys = entry.encryption_keys
        self.encryption_keys.append(None if keys is None else list(keys))
        self.chunks.append(entry.chunk)
        self.schema_versions.append(entry.schema_version)
        if entry.null_values is None:
            self.null_values.extend([None] * n)
        else:
            self.null_values.extend(True if v else None for v in entry.null_values)
        single = entry.single_metadata
        if single is not None:
            if self.single_rows:
                self.singles.append(pa.nulls(self.single_rows, pa.binary()))
                self.single_rows = 0
            self.singles.append(single if isinstance(single, pa.Array) else _binary(single))
        else:
            self.single_rows += n
        self.any = (
            self.any
            or entry.metadata is not None
            or entry.null_values is not None
            or entry.chunk is not None
            or keys is not None
        )

    def columns(self, counts: np.ndarray) -> dict[str, pa.Array]:
        total = int(counts.sum())
        if not self.any and not self.singles:
            return {}
        rows = np.repeat(np.arange(self.entries, dtype=np.int64), counts)
        firsts = np.zeros(total, np.bool_)
        firsts[np.cumsum(counts) - counts] = True
        keys = self.encryption_keys
        chunks = self.chunks
        out = {
            "metadata": _at_first_rows(self.metadata, firsts),
            "entry_payload": _at_first_rows(self.raw_payloads, firsts),
            "null_value": _nullable(self.null_values, pa.bool_()),
            "encrypted": _per_entry(
                [True if k is not None else None for k in keys], rows, pa.bool_()
            ),
            "encryption_keys": _per_entry(keys, rows, pa.list_(pa.string())),
            "uuid": _per_entry([None if c is None else c[0] for c in chunks], rows, pa.string()),
            "chunk_id": _per_entry([None if c is None else c[1] for c in chunks], rows, pa.int32()),
            "num_chunks_from_msg": _per_entry(
                [None if c is None else c[2] for c in chunks], rows, pa.int32()
            ),
            "total_chunk_msg_size": _per_entry(
                [None if c is None else c[3] for c in chunks], rows, pa.int64()
            ),
            "schema_version": _per_entry(self.schema_versions, rows, pa.binary()),
        }
        singles = self.singles
        if self.single_rows or not singles:
            singles = [*singles, pa.nulls(self.single_rows, pa.binary())]
        out["single_metadata"] = singles[0] if len(singles) == 1 else pa.concat_arrays(singles)
        return out


def _binary(values: Sequence[bytes]) -> pa.Array:
    return arrow_columns.binary(values) or pa.array(values, pa.binary())


def _per_entry(values: list[Any], rows: np.ndarray, kind: pa.DataType) -> pa.Array:
    """A value per entry, repeated on each of its rows; all null without a pass when none."""
    if values.count(None) == len(values):
        return pa.nulls(len(rows), kind)
    return pa.array(values, kind).take(arrow_columns.from_numpy(rows))


def _at_first_rows(values: list[bytes | None], firsts: np.ndarray) -> pa.Array:
    """A binary value per entry on its first row, null on the others (built from buffers)."""
    total = len(firsts)
    if values.count(None) == len(values):
        return pa.nulls(total, pa.binary())
    lengths = np.zeros(total, np.int64)
    valid = np.zeros(total, np.bool_)
    at = np.flatnonzero(firsts)
    lengths[at] = [0 if v is None else len(v) for v in values]
    valid[at] = [v is not None for v in values]
    ends = np.cumsum(lengths)
    if total and int(ends[-1]) > 2**31 - 1:
        raise InvalidArgumentError("Entries of more than 2 GiB of metadata in one append")
    offsets = np.zeros(total + 1, np.int32)
    offsets[1:] = ends
    bitmap = np.packbits(valid, bitorder="little")
    return pa.Array.from_buffers(
        pa.binary(),
        total,
        [
            pa.py_buffer(bitmap),
            pa.py_buffer(offsets),
            pa.py_buffer(b"".join(v or b"" for v in values)),
        ],
        null_count=int(total - valid.sum()),
    )


def _payload_chunk(payloads: list[bytes]) -> pa.Array:
    if payloads and set(map(type, payloads)) != {bytes}:
        raise InvalidArgumentError("Every payload must be bytes")
    return arrow_columns.binary(payloads) or pa.array(payloads, pa.binary())


def _sequence_chunk(sequence: list[int | None]) -> np.ndarray:
    try:
        return np.asarray(sequence, dtype=np.int64)
    except (OverflowError, TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"Invalid sequence_id: {exc}") from exc


def _nullable(values: list[Any], kind: pa.DataType) -> pa.Array:
    """``pa.array(values, kind)``; all nulls (the common case) without a per-value pass."""
    if values.count(None) == len(values):
        return pa.nulls(len(values), kind)
    return pa.array(values, kind)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``31 * h + c`` over UTF-16 code units, as an int32."""
    encoded = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: str, partitions: int) -> int:
    """A keyed message's partition: ``signSafeMod(JavaStringHash(key), partitions)``."""
    return (java_string_hash(key) & 0x7FFFFFFF) % partitions


def _validate(message: object, number: int) -> None:
    if not isinstance(message, OutgoingMessage):
        raise InvalidArgumentError(
            f"Message {number}: expected OutgoingMessage, got {type(message).__name__}"
        )
    if not isinstance(message.payload, bytes):
        raise InvalidArgumentError(
            f"Message {number}: payload must be bytes, got {type(message.payload).__name__}"
        )
    if message.key is not None and not isinstance(message.key, str):
        raise InvalidArgumentError(f"Message {number}: key must be a string or None")
    if not isinstance(message.properties, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in message.properties.items()
    ):
        raise InvalidArgumentError(f"Message {number}: properties must map strings to strings")
    for name, value in (("deliver_at", message.deliver_at), ("sequence_id", message.sequence_id)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise InvalidArgumentError(
                f"Message {number}: {name} must be an integer >= 0 or None, got {value!r}"
            )


def _all_plain(messages: Sequence[object]) -> bool:
    """Whether every message is well formed with nothing but a payload (the columnar kind).

    One pass per attribute in C (``map``), not a Python call per message.
    """
    if not messages or set(map(type, messages)) != {OutgoingMessage}:
        return False
    plain = cast("Sequence[OutgoingMessage]", messages)
    n = len(plain)
    return (
        set(map(type, map(_PAYLOAD, plain))) == {bytes}
        and list(map(_KEY, plain)).count(None) == n
        and list(map(_DELIVER_AT, plain)).count(None) == n
        and list(map(_SEQUENCE_ID, plain)).count(None) == n
        and set(map(type, map(_PROPERTIES, plain))) == {dict}
        and not any(map(_PROPERTIES, plain))
    )


_PAYLOAD = attrgetter("payload")
_KEY = attrgetter("key")
_DELIVER_AT = attrgetter("deliver_at")
_SEQUENCE_ID = attrgetter("sequence_id")
_PROPERTIES = attrgetter("properties")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_now(now_ms: object) -> None:
    if isinstance(now_ms, bool) or not isinstance(now_ms, int) or now_ms < 0:
        raise InvalidArgumentError(f"Invalid publish time {now_ms!r}: expected epoch ms >= 0")


def _payload_column(payloads: object) -> pa.Array:
    """``send_columns``'s payloads as a binary Arrow array; a one-line error for bad input."""
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    if isinstance(payloads, pa.Array):
        if payloads.type != pa.binary():
            raise InvalidArgumentError(
                f"Payloads must be a binary Arrow array, got type {payloads.type}"
            )
        if payloads.null_count:
            first = payloads.to_pylist().index(None)
            raise InvalidArgumentError(f"Message {first}: payload must be bytes, got None")
        return payloads
    if isinstance(payloads, (bytes, str)) or not isinstance(payloads, Sequence):
        raise InvalidArgumentError(
            f"Payloads must be a sequence of bytes, got {type(payloads).__name__}"
        )
    if set(map(type, payloads)) - {bytes}:
        for number, payload in enumerate(payloads):
            if not isinstance(payload, bytes):
                raise InvalidArgumentError(
                    f"Message {number}: payload must be bytes, got {type(payload).__name__}"
                )
    column = arrow_columns.binary(payloads)
    if column is None:
        raise InvalidArgumentError(
            "Payloads of one call must total under 2 GiB: send them in several calls"
        )
    return column


class Producer:
    """Writes messages to a topic's partitions through a :class:`LedgerStore`.

    Not thread-safe: like a pulsar-client producer, one sender at a time. Each
    ``send`` appends to each partition it routes to with one append. Plain
    messages go to every partition in one metadata commit (one more where a
    partition's ledger fills up), their segment files flushed side by side;
    other sends write partitions one after the other. Callers must not rely on
    a send being atomic across partitions.
    """

    def __init__(
        self,
        ledger_store: LedgerStore,
        topic: TopicInfo,
        producer_name: str = "cursorops-producer",
        batch_size: int = 1,
        start_partition: int | None = None,
    ) -> None:
        """``start_partition``: where round-robin starts (None: a random partition)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(
                f"Invalid batch size {batch_size!r}: expected an integer >= 1 (1 = no batching)"
            )
        if not isinstance(producer_name, str) or not producer_name:
            raise InvalidArgumentError(f"Invalid producer name {producer_name!r}")
        self.ledger_store = ledger_store
        self.topic = topic
        self.producer_name = producer_name
        self.batch_size = batch_size
        self._partitions = [TopicName.parse(name) for name in topic.partition_names()]
        self._next_sequence_id = 0
        count = len(self._partitions)
        if start_partition is None:
            start_partition = random.randrange(count)
        if (
            isinstance(start_partition, bool)
            or not isinstance(start_partition, int)
            or not 0 <= start_partition < count
        ):
            raise InvalidArgumentError(
                f"Invalid start partition {start_partition!r}: expected 0..{count - 1}"
            )
        # Unkeyed messages routed so far, counted from the start partition's first
        # group: the n-th goes with group n // batch_size.
        self._round_robin = start_partition * batch_size

    def send(self, messages: Sequence[OutgoingMessage], now_ms: int) -> list[MessageId]:
        """Publish ``messages`` at ``now_ms``; returns their ids in input order.

        Every message is validated before anything is written.
        """
        plain = _all_plain(messages)
        if not plain:
            for number, message in enumerate(messages):
                _validate(message, number)
        _check_now(now_ms)
        if plain and self._columnar(now_ms):
            payloads = arrow_columns.binary(list(map(_PAYLOAD, messages)))
            if payloads is not None:
                return self._send_payloads(payloads, now_ms).to_list()
        return self._send_rows(messages, now_ms)

    def send_columns(
        self, payloads: Sequence[bytes] | pa.Array | pa.ChunkedArray, now_ms: int
    ) -> MessageIdColumns:
        """Publish plain messages (a payload each, nothing else) at ``now_ms``.

        What ``send`` of ``OutgoingMessage(payload)`` for each payload does,
        with the same routing, entries, sequence ids and files, but taking the
        payloads as a list of bytes or an Arrow binary array and returning the
        ids as columns: no object per message on either side. Every payload is
        checked before anything is written.
        """
        column = _payload_column(payloads)
        _check_now(now_ms)
        if not len(column):
            return MessageIdColumns.empty()
        if self._columnar(now_ms):
            return self._send_payloads(column, now_ms)
        # A producer name or time the columnar writer does not take: the per-message
        # path writes it or gives its one-line error.
        messages = [OutgoingMessage(payload) for payload in column.to_pylist()]
        ids = self._send_rows(messages, now_ms)
        return MessageIdColumns(
            *(
                np.array([getattr(i, name) for i in ids], np.int64)
                for name in ("ledger_id", "entry_id", "partition", "batch_index", "batch_size")
            )
        )

    def _columnar(self, now_ms: int) -> bool:
        return now_ms < 2**63 and _utf8(self.producer_name)

    def _send_rows(self, messages: Sequence[OutgoingMessage], now_ms: int) -> list[MessageId]:
        """``send`` message by message, for any valid messages."""
        routed: dict[int, list[int]] = {}
        for number, message in enumerate(messages):
            routed.setdefault(self._route(message), []).append(number)
        sequence_ids = [self._sequence_id(message) for message in messages]

        ids: list[MessageId | None] = [None] * len(messages)
        partitioned = self.topic.partitions > 0
        for slot, numbers in routed.items():
            entries = self._entries(numbers, messages)
            drafts = [
                [
                    RowDraft(
                        payload=messages[n].payload,
                        publish_time=now_ms,
                        producer_name=self.producer_name,
                        sequence_id=sequence_ids[n],
                        batch_index=index if batched else -1,
                        batch_size=len(entry) if batched else 0,
                        deliver_at=messages[n].deliver_at,
                        key=messages[n].key,
                        properties=dict(messages[n].properties),
                    )
                    for index, n in enumerate(entry)
                ]
                for entry, batched in entries
            ]
            positions = self.ledger_store.append(self._partitions[slot], drafts)
            partition = slot if partitioned else -1
            for (entry, batched), position in zip(entries, positions, strict=True):
                for index, n in enumerate(entry):
                    ids[n] = MessageId(
                        position.ledger_id,
                        position.entry_id,
                        partition,
                        index if batched else -1,
                        len(entry) if batched else 0,
                    )
        sent = [message_id for message_id in ids if message_id is not None]
        assert len(sent) == len(messages), "every message is routed to one partition"
        return sent

    def _send_payloads(self, payloads: pa.Array, now_ms: int) -> MessageIdColumns:
        """Plain messages over arrays: the routing, entries and ids of :meth:`_send_rows`."""
        n = len(payloads)
        count = len(self._partitions)
        size = self.batch_size
        if count == 1:
            slots = np.zeros(n, np.int64)
        else:
            slots = ((self._round_robin + np.arange(n, dtype=np.int64)) // size) % count
            self._round_robin += n
        first_sequence = self._next_sequence_id
        self._next_sequence_id += n
        # Round-robin sends runs of consecutive messages to one partition: each
        # partition's payloads are its runs' slices joined, in input order.
        run_starts = np.flatnonzero(np.diff(slots, prepend=-1))
        run_stops = np.append(run_starts[1:], n)
        runs: dict[int, list[tuple[int, int]]] = {}
        for slot, start, stop in zip(
            slots[run_starts].tolist(), run_starts.tolist(), run_stops.tolist(), strict=True
        ):
            runs.setdefault(slot, []).append((start, stop - start))
        # Partitions in the order of their first message, the order the per-message path
        # appends in; message numbers grouped by partition, input order kept within each.
        grouped = np.argsort(slots, kind="stable")
        counts = np.bincount(slots, minlength=count)
        starts = np.cumsum(counts) - counts
        sequence_ids = grouped + first_sequence
        # Columns the same for every message, built once and sliced (no copy) per partition.
        widest = int(counts.max())
        batched = size > 1
        properties = MESSAGE_SCHEMA.field("properties").type
        shared = {
            "publish_time": arrow_columns.from_numpy(np.full(widest, now_ms, np.int64)),
            "deliver_at": pa.nulls(widest, pa.int64()),
            "key": pa.nulls(widest, pa.string()),
            "properties": arrow_columns.empty_maps(widest, properties),
            "producer_name": arrow_columns.repeated_string(self.producer_name, widest),
        }
        index_of = np.empty(n, np.int32)
        size_of = np.empty(n, np.int32)
        parts = []
        for slot, pieces in runs.items():
            start, k = int(starts[slot]), int(counts[slot])
            entry_sizes = np.full(k // size, size, np.int64)
            if k % size:
                entry_sizes = np.append(entry_sizes, k % size)
            if batched:
                index = np.arange(k, dtype=np.int32) % size
                of_size = np.full(k, size, np.int32)
                of_size[k - k % size :] = k % size
            else:
                index = np.full(k, -1, np.int32)
                of_size = np.zeros(k, np.int32)
            numbers = grouped[start : start + k]
            index_of[numbers] = index
            size_of[numbers] = of_size
            columns = {name: column.slice(0, k) for name, column in shared.items()}
            columns["batch_index"] = arrow_columns.from_numpy(index)
            columns["batch_size"] = arrow_columns.from_numpy(of_size)
            columns["payload"] = pa.concat_arrays(
                [payloads.slice(first, length) for first, length in pieces]
            )
            columns["sequence_id"] = arrow_columns.from_numpy(sequence_ids[start : start + k])
            parts.append((self._partitions[slot], entry_sizes, columns))
        # Every partition's segment in one metadata commit, the files written side by side.
        written = self.ledger_store.append_columns_many(parts)
        ledger_ids = np.empty(n, np.int64)
        entry_ids = np.empty(n, np.int64)
        for slot, (_, entry_sizes, _), positions in zip(runs, parts, written, strict=True):
            numbers = grouped[int(starts[slot]) : int(starts[slot]) + int(counts[slot])]
            ledger_ids[numbers] = np.repeat([p.ledger_id for p in positions], entry_sizes)
            entry_ids[numbers] = np.repeat([p.entry_id for p in positions], entry_sizes)
        partition = slots if self.topic.partitions > 0 else np.full(n, -1, np.int64)
        return MessageIdColumns(ledger_ids, entry_ids, partition, index_of, size_of)

    def _route(self, message: OutgoingMessage) -> int:
        count = len(self._partitions)
        if count == 1:
            return 0
        if message.key is not None:
            return key_partition(message.key, count)
        slot = (self._round_robin // self.batch_size) % count
        self._round_robin += 1
        return slot

    def _sequence_id(self, message: OutgoingMessage) -> int:
        # As in the Java client, an explicit sequence id does not move the producer's own counter.
        if message.sequence_id is not None:
            return message.sequence_id
        assigned = self._next_sequence_id
        self._next_sequence_id += 1
        return assigned

    def _entries(
        self, numbers: list[int], messages: Sequence[OutgoingMessage]
    ) -> list[tuple[list[int], bool]]:
        """Group one partition's messages into entries: ``(message numbers, batched)``."""
        entries: list[tuple[list[int], bool]] = []
        batched = self.batch_size > 1
        pending: list[int] = []
        for n in numbers:
            if messages[n].deliver_at is not None:
                if pending:
                    entries.append((pending, batched))
                    pending = []
                entries.append(([n], False))
                continue
            pending.append(n)
            if len(pending) == self.batch_size:
                entries.append((pending, batched))
                pending = []
        if pending:
            entries.append((pending, batched))
        return entries

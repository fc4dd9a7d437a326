"""The read path: a subscription's dispatcher and its consumers, shared by every process.

What a consumer receives, per Pulsar's dispatchers:

- Messages of one partition arrive in position order (then batch index);
  partitions are served round-robin.
- Never a message whose entry or batch index is acknowledged (batch-index
  acknowledgement is always on, PIP-391), skipped ones included.
- On Shared and Key_Shared, never a delayed message before its ``deliver_at``;
  Exclusive and Failover deliver delayed messages at once.
- A delivered message stays *pending* on its consumer until acknowledged, and
  no other consumer receives it meanwhile. Negative acknowledgement,
  ``redeliver_unacknowledged_messages``, closing the consumer (a clean exit of
  the process closes those left open) or the lapse of its lease makes it
  deliverable again. Its redelivery count is bumped only when a consumer asked
  for it again (a negative acknowledgement, a redeliver request), never when
  its consumer went (:mod:`cursorops.core.domain.delivery.redelivery`), as in Pulsar.
- Exclusive refuses a second live consumer ("Exclusive consumer is already
  connected"). Failover: only the consumers of the highest priority level
  (the lowest ``priority`` value) are active, sorted by name; partition ``i``
  is served by active consumer ``i % n`` (a non-partitioned topic by the first).
  Shared: whoever asks gets the next messages nobody holds. Key_Shared: a
  key's hash (Murmur3, ``0..65535``; a message without a key uses its entry's
  ``producer-sequence`` as Pulsar 4 does) goes to its consumer on the consistent-
  hashing ring of the live consumers (:mod:`cursorops.core.domain.delivery.key_hash`); a hash whose
  messages are still pending at another consumer is blocked until those are
  acknowledged (PIP-379 draining hashes), so per-key order holds when
  consumers join or leave.
- A chunked message goes to one consumer whole: all its unacknowledged chunks in
  one dispatch, in position order (past the permits, as a batch does), and only
  once its last chunk is stored; releasing any of its chunks (a client names its
  last) releases them all (:mod:`cursorops.core.domain.delivery.chunk_dispatch`).
- Where the namespace requires approval, a consumer acknowledges only what it was
  handed and still holds: the cursor door refuses (and audits) an acknowledgement of
  anything else, and a cumulative one acknowledges the consumer's pending messages up to
  its position, one by one (docs/decisions/, "An approval namespace refuses
  acknowledgements of messages not delivered to the consumer"). Elsewhere, as in Pulsar,
  an acknowledgement applies whatever ids it names.
- Exclusive and Failover consumers carry a consumer epoch (PIP-84):
  ``redeliver_unacknowledged_messages`` bumps it and releases the consumer's
  pending messages, so the next read starts again from the first
  unacknowledged one, and messages stamped with an older epoch that were
  already on their way are dropped by the consumer.

Where the state lives: consumers (with leases) and the pending-ack set are in
the metadata store (:mod:`cursorops.core.store.dispatch_state`). Every dispatch,
acknowledgement and consumer change is one transaction under the
subscription's row lock: dispatch picks the next deliverable messages, records
them pending, commits, and only then hands them over. So consumers of one
subscription in different processes behave as Pulsar's consumers of one
broker. Reads are lazy and start at the partition's stored read position
(Pulsar's ``readPosition``: everything before it is acknowledged or held), so
a dispatch costs what it delivers, not the backlog or the pending set: the
pending runs are looked up per record batch read, the cursor is loaded
incrementally (only the journal deltas this dispatcher has not seen), and so
is the segment list (only segments added since). Releasing a message rewinds
the read position to it.

A dispatch works on columns: each record batch read is judged with numpy
masks (acknowledged entry or batch index, pending elsewhere, delayed, another
consumer's key), the chosen rows are taken into one :class:`MessageBatch`,
and they are recorded pending as runs (:mod:`cursorops.core.store.pending_runs`: a row
per stretch of a ledger, not per message). Python runs per record batch and
per entry, not per message; ``receive_many`` turns the batch into
:class:`Message` objects, ``receive_batch`` hands it over as is.

Size: one module on purpose. The dispatch transaction (choose, record pending,
move the read positions) and the per-type delivery rules it applies are one
algorithm whose invariants span both; the stream picking has no other user.
"""

from __future__ import annotations

import atexit
import contextlib
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.ack_words import AckWords
from cursorops.core.domain.acks.cursor import AckColumns, AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.delivery.chunk_dispatch import ChunkVerdicts, judge_chunks, undecided
from cursorops.core.domain.delivery.key_hash import HashRanges, HashRing, in_ranges, sticky_key_hash
from cursorops.core.domain.delivery.redelivery import Release
from cursorops.core.domain.delivery.unacked_rows import acked_rows
from cursorops.core.domain.errors import ConflictError, ConsumerBusyError, InvalidArgumentError
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.position_match import match_positions
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.reading.message import MESSAGE_COLUMNS, Message, MessageBatch
from cursorops.core.store.checks import check_label
from cursorops.core.store.cursor_door import COMPACT_AFTER_DELTAS
from cursorops.core.store.cursor_state import replay_since
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.dispatch_state import (
    ConsumerInfo,
    DispatchedColumns,
    JournalSince,
    PendingColumns,
    PendingKey,
    ReadPosition,
    SubscriptionTransaction,
)
from cursorops.core.store.metadata import MetadataStore
from cursorops.core.store.pending_runs import Members
from cursorops.core.store.values import SegmentInfo

DEFAULT_LEASE_MS = 30_000

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]

_NOT_DELAYED = np.iinfo(np.int64).min
_MIN_READ_ROWS = 1024
"""The fewest rows a dispatch reads per record batch (the segment reader's default)."""
_CHUNK_READ_AHEAD = 8
"""Record batches a dispatch reads on, at most, for the last chunk of a chunked message
(past them, the message waits as if it were incomplete)."""


@dataclass
class PartitionSource:
    """One topic partition as the dispatcher reads it."""

    topic_partition: str
    partition: int
    layout: Callable[[], LedgerLayout]
    """The partition's ledgers now."""
    read_after: Callable[[Position], Iterator[pa.RecordBatch]]
    """Record batches of the partition's rows strictly after a position, in order, lazily."""
    read_segments: (
        Callable[[Sequence[SegmentInfo], Position, int], Iterator[pa.RecordBatch]] | None
    ) = None
    """``read_after`` over a given segment list, in record batches of a given number of rows:
    a dispatcher lists new segments only, and reads as many rows as it means to deliver."""


def _read_rows(permits: int, streams: int) -> int:
    """Rows per record batch a dispatch reads from each partition.

    A quarter more than the partition's share of the permits, so that a
    dispatch usually judges one batch per partition (each batch costs a
    pending lookup and a dozen numpy calls whatever its size), and never fewer
    than :data:`_MIN_READ_ROWS`.
    """
    share = -(-permits // max(streams, 1))
    return max(_MIN_READ_ROWS, share + share // 4)


def _pending_rows(
    ledger: Ints, entry: Ints, index: Ints, starts: Ints, pending: PendingColumns
) -> Ints:
    """For each pending row, the row of these rows holding that message (-1: none)."""
    which = match_positions(pending.ledger_id, pending.entry_id, ledger[starts], entry[starts])
    ok = which >= 0
    at = np.where(ok, which, 0)
    begin = starts[at]
    end = np.append(starts[1:], len(ledger))[at]
    # Batch indexes of an entry are consecutive: the index says the row.
    row = begin + (pending.batch_index - index[begin])
    ok &= (row >= begin) & (row < end)
    row = np.where(ok, row, 0)
    ok &= index[row] == pending.batch_index
    return np.where(ok, row, -1)


class _Columns:
    """Growable aligned arrays (amortised O(1) per appended row)."""

    def __init__(self, dtypes: dict[str, npt.DTypeLike]) -> None:
        self.count = 0
        self._data = {name: np.empty(64, dtype=dtype) for name, dtype in dtypes.items()}

    def append(self, values: dict[str, npt.NDArray[np.generic]]) -> None:
        added = len(next(iter(values.values())))
        needed = self.count + added
        for name, column in self._data.items():
            if needed > len(column):
                grown = np.empty(max(needed, 2 * len(column)), dtype=column.dtype)
                grown[: self.count] = column[: self.count]
                self._data[name] = column = grown
            column[self.count : needed] = values[name]
        self.count = needed

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        return self._data[name][: self.count]


class _Stream:
    """One partition read on from a position in a dispatch: its candidates, as columns.

    A candidate is an unacknowledged message nobody holds (a released one
    included), in position order; the judge says whether it may go now. Record
    batches are read lazily, one at a time, as the dispatch asks for more.
    ``before`` of a candidate is the position of the last row read before its
    entry: how far the read position may move when the dispatch stops there.
    """

    def __init__(
        self,
        source: PartitionSource,
        state: CursorState,
        start: Position,
        pending: Callable[[str, Position, Position], PendingColumns] | None,
        judge: _Deliverable | None,
        read_after: Callable[[Position], Iterator[pa.RecordBatch]] | None = None,
    ) -> None:
        self.source = source
        self.state = state
        self.start = start
        self.exhausted = False
        self.batches: list[pa.RecordBatch] = []
        self.candidates = _Columns(
            {
                "chunk": np.int64,
                "row": np.int64,
                "ledger": np.int64,
                "entry": np.int64,
                "index": np.int64,
                "redelivery": np.int64,
                "eligible": np.bool_,
                "key_hash": np.int64,
                "before_ledger": np.int64,
                "before_entry": np.int64,
                "has_before": np.bool_,
                "follows": np.int64,
            }
        )
        self.last_read: Position | None = None
        """The position of the last row read."""
        self._last_before: Position | None = None
        self._pending = pending
        self._judge = judge
        self._reader = (source.read_after if read_after is None else read_after)(start)
        self._completed: set[str] = set()
        """The uuids of the chunked messages completed in the rows read so far."""

    def _next_batch(self) -> pa.RecordBatch | None:
        """The next record batch; a dispatch's reads on while a chunked message in it may
        still be completed by later rows
        (:func:`~cursorops.core.domain.delivery.chunk_dispatch.undecided`),
        so that every chunked message is judged whole."""
        batch = next(self._reader, None)
        if batch is None or self._judge is None:
            return batch
        ahead = 0
        while batch.num_rows and undecided(batch, self._completed):
            more = None if ahead == _CHUNK_READ_AHEAD else next(self._reader, None)
            if more is None:
                break
            batch = pa.concat_batches([batch, more])
            ahead += 1
        return batch

    def read_more(self) -> None:
        """Read the next record batch (or find the partition exhausted)."""
        batch = self._next_batch()
        if batch is None:
            self.exhausted = True
            return
        if batch.num_rows == 0:
            return
        ledger = _ints(batch.column("ledger_id"))
        entry = _ints(batch.column("entry_id"))
        index = _ints(batch.column("batch_index"))
        n = len(ledger)
        change = np.empty(n, dtype=np.bool_)
        change[1:] = (ledger[1:] != ledger[:-1]) | (entry[1:] != entry[:-1])
        change[0] = self.last_read is None or self.last_read != (int(ledger[0]), int(entry[0]))
        starts_at = np.where(change, np.arange(n), -1)
        entry_start = np.maximum.accumulate(starts_at)
        # Rows continuing the previous batch's last entry share that entry's "before".
        previous = np.maximum(entry_start - 1, 0)
        before_ledger = ledger[previous].copy()
        before_entry = entry[previous].copy()
        has_before = entry_start >= 1
        for rows, carried in (
            (entry_start == 0, self.last_read),
            (entry_start == -1, self._last_before),
        ):
            if carried is not None:
                before_ledger[rows], before_entry[rows] = carried
            has_before[rows] = carried is not None
        starts = np.flatnonzero(change | (np.arange(n) == 0))
        live = ~acked_rows(self.state, ledger, entry, index, starts)
        held = np.zeros(n, dtype=np.bool_)
        redelivery = np.full(n, -1, dtype=np.int64)
        if self._pending is not None and live.any():
            pending = self._pending(
                self.source.topic_partition,
                Position(int(ledger[0]), int(entry[0])),
                Position(int(ledger[-1]), int(entry[-1])),
            )
            if len(pending.ledger_id):
                rows = _pending_rows(ledger, entry, index, starts, pending)
                found = rows >= 0
                held[rows[found & pending.held]] = True
                released = found & ~pending.held
                redelivery[rows[released]] = pending.redelivery_count[released]
        self.last_read = Position(int(ledger[-1]), int(entry[-1]))
        self._last_before = (
            Position(int(before_ledger[-1]), int(before_entry[-1])) if has_before[-1] else None
        )
        chunks = None if self._judge is None else judge_chunks(batch, live, held, self._completed)
        if chunks is not None:
            self._completed |= chunks.completed
            live &= ~chunks.passed
        rows = np.flatnonzero(live & ~held)
        chunk = len(self.batches)
        self.batches.append(batch)
        if not len(rows):
            return
        if self._judge is None:
            eligible, key_hash = np.ones(len(rows), dtype=np.bool_), None
        else:
            eligible, key_hash = self._judge(batch, rows)
        follows = np.full(len(rows), -1, dtype=np.int64)
        if chunks is not None:
            eligible, follows = _whole_chunks(chunks, rows, eligible, self.candidates.count)
        self.candidates.append(
            {
                "chunk": np.full(len(rows), chunk, dtype=np.int64),
                "row": rows,
                "ledger": ledger[rows],
                "entry": entry[rows],
                "index": index[rows],
                "redelivery": redelivery[rows],
                "eligible": eligible,
                "key_hash": np.full(len(rows), -1, np.int64) if key_hash is None else key_hash,
                "before_ledger": before_ledger[rows],
                "before_entry": before_entry[rows],
                "has_before": has_before[rows],
                "follows": follows,
            }
        )

    def before(self, candidate: int) -> Position | None:
        c = self.candidates
        if not c["has_before"][candidate]:
            return None
        return Position(int(c["before_ledger"][candidate]), int(c["before_entry"][candidate]))


def _ints(column: pa.Array | pa.ChunkedArray) -> Ints:
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)


def _whole_chunks(
    chunks: ChunkVerdicts, rows: Ints, eligible: Flags, first: int
) -> tuple[Flags, Ints]:
    """A batch's candidates (``rows``, the first numbered ``first``) with each chunked
    message whole: its chunks eligible only together (and only when it may go now), each
    but its first following that one (``follows``: the candidate number it comes with)."""
    leader = chunks.leader[rows]
    eligible = eligible & ~chunks.waiting[rows]
    follows = np.full(len(rows), -1, dtype=np.int64)
    mine = np.flatnonzero(leader >= 0)
    if mine.size:
        # Candidate number of each chunk's first chunk (rows are sorted: a search finds it).
        lead = np.searchsorted(rows, leader[mine])
        together = np.ones(int(lead.max()) + 1, dtype=np.bool_)
        np.logical_and.at(together, lead, eligible[mine])
        eligible[mine] = together[lead]
        behind = lead != mine
        follows[mine[behind]] = first + lead[behind]
    return eligible, follows


@dataclass(frozen=True)
class _Picked:
    """A dispatch's choice: stream and candidate of each message, in delivery order."""

    stream: Ints
    candidate: Ints
    last_turn: tuple[int, int] | None
    """(round, stream) of the last message taken when the permits ran out; None: all read."""


def _pick(streams: Sequence[_Stream], permits: int, whole_entries: bool = False) -> _Picked:
    """The first ``permits`` eligible candidates, the streams taken round-robin.

    ``whole_entries`` (one stream only): past the permits, the eligible candidates
    left in the entry of the last one taken come too, as Pulsar's dispatchers send
    whole entries whatever the permits say.

    As Pulsar's round-robin over partitions: one candidate of each stream in
    turn, a stream leaving once exhausted; an ineligible candidate (delayed,
    another consumer's key) uses its stream's turn. Turn ``(round, stream)``
    thus comes in ``round * len(streams) + stream`` order, and rounds are
    decided in blocks as far as every unexhausted stream has been read.
    """
    width = len(streams)
    done = 0
    chosen_keys: list[Ints] = []
    taken = 0
    while taken < permits:
        for stream in streams:
            while not stream.exhausted and stream.candidates.count <= done:
                stream.read_more()
        open_counts = [s.candidates.count for s in streams if not s.exhausted]
        reach = (
            min(open_counts)
            if open_counts
            else max((s.candidates.count for s in streams), default=0)
        )
        if reach <= done:
            break
        keys = []
        for i, stream in enumerate(streams):
            stop = min(reach, stream.candidates.count)
            if stop > done:
                c = stream.candidates
                leads = c["eligible"][done:stop] & (c["follows"][done:stop] < 0)
                rounds = np.flatnonzero(leads) + done
                keys.append(rounds * width + i)
        block = np.sort(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
        block = block[: permits - taken]
        chosen_keys.append(block)
        taken += len(block)
        done = reach
    picked = np.concatenate(chosen_keys) if chosen_keys else np.zeros(0, np.int64)
    if whole_entries and width == 1 and taken >= permits and len(picked):
        picked = np.concatenate([picked, _rest_of_entry(streams[0], int(picked[-1]))])
    last = None
    if taken >= permits and len(picked):
        last = (int(picked[-1]) // width, int(picked[-1]) % width)
    picked = _with_followers(streams, picked)
    return _Picked(picked % width, picked // width, last)


def _with_followers(streams: Sequence[_Stream], picked: Ints) -> Ints:
    """``picked`` (turn keys, sorted) with the other chunks of each chunked message whose
    first chunk is picked, in their places: a chunked message goes whole, past the permits,
    as a batch does."""
    width = len(streams)
    extra = []
    for i, stream in enumerate(streams):
        follows = stream.candidates["follows"]
        if not (follows >= 0).any():
            continue
        leaders = picked[picked % width == i] // width
        extra.append(np.flatnonzero(np.isin(follows, leaders)) * width + i)
    return np.sort(np.concatenate([picked, *extra])) if extra else picked


def _rest_of_entry(stream: _Stream, candidate: int) -> Ints:
    """The eligible candidates after ``candidate`` in its entry (reading on as needed)."""
    c = stream.candidates
    entry = (int(c["ledger"][candidate]), int(c["entry"][candidate]))
    rest: list[int] = []
    k = candidate + 1
    while True:
        while k >= stream.candidates.count and not stream.exhausted:
            stream.read_more()
        c = stream.candidates
        if k >= c.count or (int(c["ledger"][k]), int(c["entry"][k])) != entry:
            return np.asarray(rest, dtype=np.int64)
        if c["eligible"][k]:
            rest.append(k)
        k += 1


def _settled_through(stream: _Stream, i: int, last: tuple[int, int] | None) -> Position | None:
    """How far the read position may move after a dispatch over ``stream`` (number ``i``).

    Every message up to the returned position is acknowledged or held; it stops
    before the entry of the first candidate that stays deliverable, and before
    the entry of the last candidate examined when the dispatch stopped early.
    """
    count = stream.candidates.count
    if last is None:
        examined, drained = count, True
    else:
        turn = last[0] + (1 if i <= last[1] else 0)
        examined = min(count, turn)
        drained = stream.exhausted and (count < last[0] or (count == last[0] and i < last[1]))
    refused = np.flatnonzero(~stream.candidates["eligible"][:examined])
    if len(refused):
        return stream.before(int(refused[0]))
    if drained:
        return stream.last_read
    return stream.before(examined - 1) if examined else None


def _message_batch(
    streams: Sequence[_Stream], picked: _Picked, epoch: int
) -> tuple[MessageBatch, list[tuple[int, Ints]]]:
    """The picked messages as one batch, and which rows of it each stream gave."""
    size = len(picked.stream)
    ledger = np.empty(size, np.int64)
    entry = np.empty(size, np.int64)
    index = np.empty(size, np.int64)
    redelivery = np.empty(size, np.int64)
    partition = np.empty(size, np.int64)
    parts: list[pa.RecordBatch] = []
    order: list[Ints] = []
    by_stream: list[tuple[int, Ints]] = []
    for i, stream in enumerate(streams):
        rows = np.flatnonzero(picked.stream == i)
        if not len(rows):
            continue
        by_stream.append((i, rows))
        which = picked.candidate[rows]
        c = stream.candidates
        ledger[rows], entry[rows], index[rows] = (
            c["ledger"][which],
            c["entry"][which],
            c["index"][which],
        )
        redelivery[rows] = np.maximum(c["redelivery"][which], 0)
        partition[rows] = stream.source.partition
        chunks = c["chunk"][which]
        for chunk in np.unique(chunks).tolist():
            mine = chunks == chunk
            source = stream.batches[chunk].select(list(MESSAGE_COLUMNS))
            taken = c["row"][which[mine]]
            first, count = int(taken[0]), len(taken)
            if int(taken[-1]) - first + 1 == count:
                # Rows in order without a gap (nothing acknowledged among them): a view.
                parts.append(source.slice(first, count))
            else:
                parts.append(source.take(pa.array(taken, pa.int64())))
            order.append(rows[mine])
    if not parts:
        return MessageBatch.empty(epoch), by_stream
    columns = parts[0] if len(parts) == 1 else pa.concat_batches(parts)
    where = np.concatenate(order)
    if len(parts) > 1 and np.any(np.diff(where) < 0):
        columns = columns.take(pa.array(np.argsort(where, kind="stable"), pa.int64()))
    return (
        MessageBatch(
            tuple(s.source.topic_partition for s in streams),
            picked.stream.astype(np.int64),
            partition,
            ledger,
            entry,
            index,
            redelivery,
            columns,
            epoch,
        ),
        by_stream,
    )


def peek(
    sources: Sequence[PartitionSource],
    states: Sequence[CursorState],
    count: int,
    pending: Mapping[str, Members] | None = None,
) -> list[Message]:
    """The next ``count`` unacknowledged messages, delayed and pending ones included.

    ``pending``: the subscription's pending messages per partition, with their redelivery
    counts (:meth:`~cursorops.core.store.metadata.MetadataStore.pending_members`); a message
    among them is peeked with its count, the number a consumer would receive it with.
    """
    batch = _unacknowledged(sources, states, count)
    for code, topic in enumerate(batch.topics):
        found = (pending or {}).get(topic)
        if found is not None and len(found.ledger):
            rows = np.flatnonzero(batch.topic_index == code)
            batch.redelivery_count[rows] = _counts_of(
                found, batch.ledger_id[rows], batch.entry_id[rows], batch.batch_index[rows]
            )
    return batch.messages()


def unacknowledged(source: PartitionSource, state: CursorState) -> MessageBatch:
    """Every message of one partition ``state`` has not acknowledged, in position order, as
    a peek reads them: delayed and pending ones included, batch indexes, individual
    acknowledgements and skips honoured, each chunk of a chunked message a row of its own.
    Cost: one read of the partition from the mark-delete position on.
    """
    return _unacknowledged([source], [state], None)


def _unacknowledged(
    sources: Sequence[PartitionSource], states: Sequence[CursorState], count: int | None
) -> MessageBatch:
    """The first ``count`` unacknowledged messages (None: all), partitions round-robin."""
    streams = [
        _Stream(source, state, state.mark_delete, None, None)
        for source, state in zip(sources, states, strict=True)
    ]
    permits = np.iinfo(np.int64).max if count is None else count
    batch, _ = _message_batch(streams, _pick(streams, int(permits)), -1)
    return batch


def _counts_of(pending: Members, ledger: Ints, entry: Ints, index: Ints) -> Ints:
    """The redelivery count of each message (ledger, entry, batch index) among ``pending``;
    0 for one that is not pending. Only the pending messages of these entries are looked at
    (a peek is a few entries)."""
    near = match_positions(pending.ledger, pending.entry, ledger, entry) >= 0
    counts = {
        (led, ent, ind): count
        for led, ent, ind, count in zip(
            pending.ledger[near].tolist(),
            pending.entry[near].tolist(),
            pending.index[near].tolist(),
            pending.redelivery[near].tolist(),
            strict=True,
        )
    }
    return np.fromiter(
        (
            counts.get(key, 0)
            for key in zip(ledger.tolist(), entry.tolist(), index.tolist(), strict=True)
        ),
        dtype=np.int64,
        count=len(ledger),
    )


def _fallback_keys(
    batch: pa.RecordBatch, rows: pa.Array, keys: list[str | bytes | None]
) -> list[str | bytes | None]:
    """Pulsar 4's sticky key of a message without a key: its entry's producer name and
    sequence id (``producer-sequence``), so keyless messages spread over the consumers
    while a batch stays together. The entry's sequence id is its first message's."""
    producers = batch.column("producer_name").take(rows).to_pylist()
    sequences = batch.column("sequence_id").take(rows).to_pylist()
    indexes = batch.column("batch_index").take(rows).to_pylist()
    return [
        key if key is not None else f"{producer}-{sequence - max(index, 0)}"
        for key, producer, sequence, index in zip(keys, producers, sequences, indexes, strict=True)
    ]


@dataclass(frozen=True)
class _Deliverable:
    """The judge of a dispatch: which candidate rows may go to the consumer now."""

    now: int
    honour_delay: bool
    me: str
    ring: HashRing | None
    """Key_Shared: the live consumers' ring."""
    draining: set[int]
    """Key_Shared: hashes still pending at another consumer (PIP-379)."""
    ranges: HashRanges | None = None
    """Key_Shared sticky: the hashes this consumer owns (none else: the ring is unused)."""

    @property
    def key_shared(self) -> bool:
        return self.ring is not None

    def __call__(self, batch: pa.RecordBatch, rows: Ints) -> tuple[Flags, Ints | None]:
        eligible = np.ones(len(rows), dtype=np.bool_)
        if self.honour_delay:
            deliver = batch.column("deliver_at")
            if deliver.null_count < len(deliver):
                at = _ints(pc.fill_null(deliver, _NOT_DELAYED))[rows]
                eligible &= at <= self.now
        if self.ring is None:
            return eligible, None
        taken = pa.array(rows, pa.int64())
        keys: list[str | bytes | None] = batch.column("key").take(taken).to_pylist()
        ordering = batch.column("ordering_key")
        if ordering.null_count < len(ordering):
            # Pulsar's sticky key: the ordering key when the message has one, else its key.
            ordered = ordering.take(taken).to_pylist()
            keys = [k if o is None else o for k, o in zip(keys, ordered, strict=True)]
        if None in keys:
            keys = _fallback_keys(batch, taken, keys)
        hashes = np.fromiter((sticky_key_hash(k) for k in keys), dtype=np.int64, count=len(keys))
        ring, me, draining, ranges = self.ring, self.me, self.draining, self.ranges
        mine = np.fromiter(
            (
                (ring.select(h) == me if ranges is None else in_ranges(h, ranges))
                and h not in draining
                for h in hashes.tolist()
            ),
            dtype=np.bool_,
            count=len(keys),
        )
        return eligible & mine, hashes


class Consumer:
    """A consumer on a subscription (pulsar-client habits).

    Two ways to receive: ``receive_many`` returns :class:`Message` objects,
    ``receive_batch`` the same messages as one columnar :class:`MessageBatch`
    (no Python object per message). Both read from one buffer, so they mix.
    """

    def __init__(
        self, dispatcher: Dispatcher, name: str, receiver_queue_size: int, priority: int = 0
    ) -> None:
        self.dispatcher = dispatcher
        self.name = name
        self.consumer_id = uuid.uuid4().hex
        """Identity in the consumer registry: names may repeat, as in Pulsar."""
        self.priority = priority
        self.receiver_queue_size = receiver_queue_size
        self.epoch = 0 if dispatcher.subscription_type.uses_consumer_epoch else -1
        self._incoming: deque[MessageBatch] = deque()
        self._incoming_count = 0
        self.wire: deque[MessageBatch] = deque()
        """Dispatches the dispatcher has sent that the client has not taken in yet."""
        self.closed = False
        self.hash_ranges: HashRanges | None = None
        """Key_Shared sticky mode: the hashes it owns; None: auto-split (the ring)."""
        self.chunked: dict[PendingKey, tuple[PendingKey, ...]] = {}
        """Per chunk it was given and holds, every chunk of that chunked message: what a
        release of any of them releases (a client names only one, its message's last)."""

    def _buffered(self) -> int:
        return self._incoming_count + sum(len(batch) for batch in self.wire)

    def _refill(self, permits: int | None = None) -> bool:
        """Whether anything is buffered: taken from the wire, else after asking the
        dispatcher for ``permits`` messages (None: a whole receiver queue)."""
        if not self._incoming:
            self._take_from_wire()
        if not self._incoming:
            self.dispatcher.flow(self, self.receiver_queue_size if permits is None else permits)
            self._take_from_wire()
        return bool(self._incoming)

    def receive_many(self, max_messages: int, *, prefetch: bool = True) -> list[Message]:
        """Up to ``max_messages`` messages available now (never waits); a chunked message
        all its chunks, past ``max_messages`` if it must.

        ``prefetch``: keep the receiver queue filled ahead, as a client does, for the
        receives to come. Without, ask the dispatcher only for the messages still
        wanted: a one-off receive leaves nothing dispatched that it did not return."""
        received: list[Message] = []
        if not prefetch:
            while len(received) < max_messages and self._refill(max_messages - len(received)):
                received += self._take(max_messages - len(received)).messages()
            return received
        dry = False
        half = self.receiver_queue_size // 2
        while len(received) < max_messages:
            if not self._refill():
                break
            buffered = self._buffered()
            # Messages taken before the buffer falls to half the queue, one flow check after.
            take = max_messages - len(received)
            if not dry:
                take = min(take, max(buffered - half, 1))
            received += self._take(take).messages()
            buffered = self._buffered()
            if not dry and buffered <= half:
                # Like the client's flow permits: ask for more before running dry; once
                # the dispatcher had nothing more, drain the buffer before asking again.
                self.dispatcher.flow(self, half)
                dry = self._buffered() == buffered
        return received

    def receive_batch(self, max_messages: int) -> MessageBatch:
        """Up to ``max_messages`` messages available now, as columns (never waits); a
        chunked message all its chunks, past ``max_messages`` if it must.

        When the buffer is empty it asks for a whole receiver queue in one
        dispatch (one metadata transaction), so a queue of 1,000 costs one
        commit per 1,000 messages.
        """
        if max_messages < 1:
            raise InvalidArgumentError("max_messages must be at least 1")
        parts: list[MessageBatch] = []
        count = 0
        while count < max_messages:
            if not self._refill():
                break
            part = self._take(max_messages - count)
            parts.append(part)
            count += len(part)
        return MessageBatch.concat(parts) if parts else MessageBatch.empty(self.epoch)

    def _take(self, most: int) -> MessageBatch:
        """Up to ``most`` messages of the first buffered dispatch; more when ``most`` would
        cut a chunked message: never some of its chunks without the others."""
        first = self._incoming[0]
        if len(first) > most:
            most = _uncut(first, most)
        if len(first) <= most:
            self._incoming.popleft()
            self._incoming_count -= len(first)
            return first
        self._incoming[0] = first.slice(most, len(first))
        self._incoming_count -= most
        return first.slice(0, most)

    def receive(self) -> Message | None:
        got = self.receive_many(1)
        return got[0] if got else None

    def _take_from_wire(self) -> None:
        while self.wire:
            batch = self.wire.popleft()
            # PIP-84: drop what was read for an older epoch (-1 = unknown: kept).
            if batch.consumer_epoch != -1 and batch.consumer_epoch < self.epoch:
                continue
            if len(batch):
                self._incoming.append(batch)
                self._incoming_count += len(batch)

    def acknowledge(self, messages: Message | Sequence[Message] | MessageBatch) -> None:
        """Individual acknowledgement; durable when it returns."""
        if isinstance(messages, MessageBatch):
            self.dispatcher.acknowledge_batch(self, messages)
            return
        batch = [messages] if isinstance(messages, Message) else list(messages)
        self.dispatcher.acknowledge(self, batch)

    def acknowledge_cumulative(self, message: Message) -> None:
        """Everything up to this message on its partition (Exclusive and Failover only)."""
        self.dispatcher.acknowledge_cumulative(self, message)

    def negative_acknowledge(self, message: Message) -> None:
        self.dispatcher.negative_acknowledge(self, message)

    def redeliver_unacknowledged_messages(self) -> None:
        if self.epoch >= 0:
            self.epoch += 1
        self._incoming.clear()
        self._incoming_count = 0
        self.dispatcher.redeliver_unacknowledged(self)

    def close(self) -> None:
        _OPEN_CONSUMERS.discard(self)
        if not self.closed:
            self.dispatcher.remove_consumer(self)
        self._incoming.clear()
        self._incoming_count = 0
        self.wire.clear()
        self.chunked.clear()
        self.closed = True


_OPEN_CONSUMERS: weakref.WeakSet[Consumer] = weakref.WeakSet()
"""Consumers of this process not closed yet."""


@atexit.register
def _close_open_consumers() -> None:
    """A clean exit closes the consumers the program left open: their pending messages
    go to the other consumers and an Exclusive or Failover slot is free at once, as when
    Pulsar's broker sees a client's connection close, instead of after the lease."""
    for consumer in list(_OPEN_CONSUMERS):
        with contextlib.suppress(Exception):
            consumer.close()


@dataclass
class _CachedCursor:
    """A cursor's state as this dispatcher last read it, to read only newer deltas."""

    cursor_id: int
    snapshot_version: int
    version: int
    state: CursorState
    last_reset: int
    """Version of the last replacing delta read after the snapshot (0: none)."""
    layout: LedgerLayout
    """The ledgers the state was last normalised against."""


class Dispatcher:
    """Serves one subscription's messages to its consumers, in any number of processes."""

    def __init__(
        self,
        subscription_type: SubscriptionType,
        store: MetadataStore,
        topic: str,
        subscription: str,
        sources: Sequence[PartitionSource],
        clock: Callable[[], int],
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> None:
        if lease_ms < 1:
            raise InvalidArgumentError("The consumer lease must be at least 1 ms")
        self.subscription_type = subscription_type
        self.store = store
        self.topic = topic
        self.subscription = subscription
        self.clock = clock
        self.lease_ms = lease_ms
        self._sources = list(sources)
        self._by_topic = {source.topic_partition: source for source in sources}
        self._cursors: dict[str, _CachedCursor] = {}
        self._segments: dict[str, list[SegmentInfo]] = {}
        self._layouts: dict[str, LedgerLayout] = {}
        """Each partition's ledgers as of the segments in ``_segments``."""

    def _transaction(
        self, *, flushed: bool = True
    ) -> AbstractContextManager[SubscriptionTransaction]:
        return self.store.subscription_transaction(
            self.topic, self.subscription, self.clock(), flushed=flushed
        )

    def entry_rows(self, topic_partition: str, position: Position) -> pa.RecordBatch | None:
        """Every row of the entry at ``position`` (its :data:`MESSAGE_COLUMNS` and
        ``batch_index``), read from the partition; None when there is no such entry.

        For a consumer given part of a batch: it is sent the whole entry as its
        client wrote it, with the indexes not delivered marked in the ``ack_set``.
        """
        source = self._by_topic[topic_partition]
        wanted = (position.ledger_id, position.entry_id)
        parts = []
        for batch in source.read_after(Position(position.ledger_id, position.entry_id - 1)):
            ledger = _ints(batch.column("ledger_id"))
            entry = _ints(batch.column("entry_id"))
            mine = (ledger == wanted[0]) & (entry == wanted[1])
            if mine.any():
                parts.append(batch.filter(pa.array(mine)).select([*MESSAGE_COLUMNS, "batch_index"]))
            if len(mine) and not mine[-1]:
                break
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else pa.concat_batches(parts)

    # -- consumers ------------------------------------------------------------

    def subscribe(
        self,
        name: str,
        receiver_queue_size: int = 1000,
        priority: int = 0,
        *,
        consumer_id: str | None = None,
        epoch: int | None = None,
        hash_ranges: HashRanges | None = None,
    ) -> Consumer:
        """Join the subscription's consumers.

        ``consumer_id``: the identity in the consumer registry (default: a new
        one). Consumers given the same id are one consumer to the subscription
        (the binary protocol's consumer of a partitioned topic is one consumer
        per partition). ``epoch``: the consumer epoch to start at (PIP-84: a
        reconnecting client sends its own), for Exclusive and Failover.
        ``hash_ranges`` (Key_Shared sticky mode, validated by
        :func:`~cursorops.core.domain.delivery.key_hash.sticky_ranges`): the hashes it alone gets; a
        hash no consumer's ranges hold waits, as in Pulsar.
        """
        if receiver_queue_size < 1:
            raise InvalidArgumentError("receiver_queue_size must be at least 1")
        # Stored in the consumer registry: no NUL (PostgreSQL) nor undecodable text.
        check_label("consumer name", name)
        consumer = Consumer(self, name, receiver_queue_size, priority)
        if consumer_id is not None:
            check_label("consumer id", consumer_id)
            consumer.consumer_id = consumer_id
        if epoch is not None and consumer.epoch >= 0:
            consumer.epoch = max(epoch, 0)
        if hash_ranges is not None:
            if self.subscription_type is not SubscriptionType.KEY_SHARED:
                raise InvalidArgumentError("Sticky hash ranges are for Key_Shared subscriptions")
            consumer.hash_ranges = hash_ranges
        with self._transaction() as txn:
            self._join(txn, consumer)
        _OPEN_CONSUMERS.add(consumer)
        return consumer

    def _join(self, txn: SubscriptionTransaction, consumer: Consumer) -> list[ConsumerInfo]:
        """Register or renew ``consumer``; the live consumers after it joined."""
        txn.expire_leases()
        if self.subscription_type is SubscriptionType.EXCLUSIVE:
            others = [c for c in txn.consumers() if c.consumer_id != consumer.consumer_id]
            if others:
                raise ConsumerBusyError("Exclusive consumer is already connected")
        txn.upsert_consumer(
            consumer.consumer_id, consumer.name, consumer.priority, consumer.epoch, self.lease_ms
        )
        return txn.consumers()

    def remove_consumer(self, consumer: Consumer) -> None:
        """The consumer leaves (closed): what it holds is deliverable again, counts unchanged."""
        with self._transaction() as txn:
            txn.remove_consumer(consumer.consumer_id, Release.CLOSE)

    def renew(self, consumer: Consumer) -> bool:
        """Extend the consumer's lease (a connection that is still there); False when
        its registration lapsed meanwhile."""
        with self._transaction() as txn:
            return txn.renew_lease(consumer.consumer_id, self.lease_ms)

    def release(self, consumer: Consumer, keys: Sequence[PendingKey], reason: Release) -> None:
        """Make these messages held by ``consumer`` deliverable again, for ``reason`` (which
        says whether their redelivery counts are bumped): the binary protocol's redeliver
        of given message ids, or a seek's release. A chunk releases its whole message
        (:meth:`whole_messages`)."""
        if not keys:
            return
        whole = self.whole_messages(consumer, keys)
        with self._transaction() as txn:
            txn.renew_lease(consumer.consumer_id, self.lease_ms)
            txn.release(consumer.consumer_id, whole, reason=reason)
        _forget_chunks(consumer, whole)

    @staticmethod
    def whole_messages(consumer: Consumer, keys: Sequence[PendingKey]) -> list[PendingKey]:
        """``keys`` and, after them, the other chunks of each chunked message one of them is
        a chunk of, as ``consumer`` was given them (each once): a chunked message is
        released whole, so that it is delivered again whole, never a chunk alone."""
        if not consumer.chunked:
            return list(keys)
        whole = dict.fromkeys(keys)
        for key in keys:
            for chunk in consumer.chunked.get(key, ()):
                whole.setdefault(chunk)
        return list(whole)

    # -- dispatching ----------------------------------------------------------

    def known_layout(self, topic_partition: str) -> LedgerLayout | None:
        """The partition's ledger layout as this dispatcher last read it (None: not yet)."""
        return self._layouts.get(topic_partition)

    def known_state(self, topic_partition: str) -> CursorState | None:
        """The partition's cursor state as this dispatcher last replayed it (None: not yet)."""
        cached = self._cursors.get(topic_partition)
        return None if cached is None else cached.state

    def flow(self, consumer: Consumer, permits: int, *, whole_entries: bool = False) -> None:
        """Send up to ``permits`` messages to ``consumer``'s wire, as one :class:`MessageBatch`.

        ``whole_entries`` (a dispatcher of one partition): the rest of the last
        entry comes too, past the permits, as Pulsar's dispatchers send whole
        entries (the binary protocol: a batch is never split between consumers).

        One transaction under the subscription's lock: choose, record pending,
        move the read positions, commit; the messages reach the wire only once
        they are recorded. The commit does not wait for the disk (``flushed``
        False): what it records is bookkeeping that a power loss may undo
        without losing anything acknowledged (the messages become deliverable
        again, as when their consumer goes); acknowledgements are flushed, and
        flush every dispatch before them.
        """
        if consumer.closed or permits < 1:
            return
        compact: list[tuple[str, CursorState, int]] = []
        with self._transaction(flushed=False) as txn:
            live = self._join(txn, consumer)
            served = self._served(consumer, live)
            if self.subscription_type is SubscriptionType.FAILOVER:
                self._take_over(txn, consumer, served)
            read_rows = _read_rows(permits, len(served))
            # The cursors in the order of their partitions' names: every writer's lock order.
            cursors = {}
            for source in sorted(served, key=lambda s: s.topic_partition):
                reader, layout = self._reader(txn, source, read_rows)
                state, journal, start = self._cursor(txn, source.topic_partition, layout)
                cursors[source.topic_partition] = (reader, state, journal, start)
                if journal.version - journal.snapshot_version >= COMPACT_AFTER_DELTAS:
                    compact.append((source.topic_partition, state, journal.version))
            sources, states, starts, versions, readers = [], [], [], [], []
            for source in served:
                reader, state, journal, start = cursors[source.topic_partition]
                sources.append(source)
                readers.append(reader)
                states.append(state)
                starts.append(start)
                versions.append(journal.version)
            judge = self._judge(txn, consumer, live, sources, states)
            streams = [
                _Stream(source, state, start, txn.pending_columns, judge, reader)
                for source, state, start, reader in zip(
                    sources, states, starts, readers, strict=True
                )
            ]
            picked = _pick(streams, permits, whole_entries)
            batch, by_stream = _message_batch(streams, picked, consumer.epoch)
            for i, rows in by_stream:
                stream = streams[i]
                which = picked.candidate[rows]
                c = stream.candidates
                txn.record_dispatched(
                    stream.source.topic_partition,
                    DispatchedColumns(
                        consumer.consumer_id,
                        batch.ledger_id[rows],
                        batch.entry_id[rows],
                        batch.batch_index[rows],
                        batch.redelivery_count[rows],
                        c["redelivery"][which] >= 0,
                        c["key_hash"][which] if judge.key_shared else None,
                    ),
                )
            for i, (stream, version) in enumerate(zip(streams, versions, strict=True)):
                settled = _settled_through(stream, i, picked.last_turn)
                if settled is not None and settled > stream.start:
                    txn.set_read_position(
                        stream.source.topic_partition, ReadPosition(settled, version)
                    )
            # A long journal folded into a snapshot of the state this dispatch replayed.
            for topic, state, version in compact:
                txn.compact(
                    topic,
                    self.subscription,
                    cursor_codec.encode(state),
                    version,
                    ticket=Ticket.not_a_move("a journal folded into the state it replays"),
                )
        if len(batch):
            _remember_chunks(consumer, batch)
            consumer.wire.append(batch)

    def _reader(
        self, txn: SubscriptionTransaction, source: PartitionSource, rows: int
    ) -> tuple[Callable[[Position], Iterator[pa.RecordBatch]], LedgerLayout]:
        """How this dispatch reads the partition, and its ledgers now.

        Over its segment list, read on from the last one this dispatcher knows
        (committed segments never change nor go away). The ledgers are read
        again only when new segments were listed: a ledger appears, and its
        entries grow, only in the transaction that commits a segment of it.
        """
        read_segments = source.read_segments
        if read_segments is None:
            return source.read_after, LedgerLayout.of(txn.ledgers(source.topic_partition))
        known = self._segments.setdefault(source.topic_partition, [])
        last = None if not known else (known[-1].ledger_id, known[-1].first_entry)
        added = txn.segments_after(source.topic_partition, last)
        known += added
        layout = self._layouts.get(source.topic_partition)
        if layout is None or added:
            layout = self._layouts[source.topic_partition] = LedgerLayout.of(
                txn.ledgers(source.topic_partition)
            )
        return (lambda after: read_segments(known, after, rows)), layout

    def _cursor(
        self, txn: SubscriptionTransaction, topic: str, layout: LedgerLayout
    ) -> tuple[CursorState, JournalSince, Position]:
        """The cursor's state now, its journal read, and where this dispatch reads on from.

        Only deltas this dispatcher has not seen are read and merged. Pending
        rows through mark-delete are dropped when it moves (acknowledged by
        other means, such as a skip). The read position counts only when no
        reset can have happened since it was set.
        """
        cached = self._cursors.get(topic)
        known = (
            None if cached is None else (cached.cursor_id, cached.snapshot_version, cached.version)
        )
        journal = txn.cursor_since(topic, known)
        before = None if cached is None else cached.state.mark_delete
        if journal.reloaded or cached is None:
            state, last_reset = replay_since(None, None, journal.snapshot, journal.deltas, layout)
        else:
            state, last_reset = replay_since(
                cached.state, cached.last_reset, None, journal.deltas, layout
            )
            if not journal.deltas and layout != cached.layout:
                # New ledgers may let mark-delete advance; an empty merge costs no sweep.
                state.merge(CursorState(), layout)
        self._cursors[topic] = _CachedCursor(
            journal.cursor_id, journal.snapshot_version, journal.version, state, last_reset, layout
        )
        if before is None or state.mark_delete != before:
            txn.drop_pending_through(topic, state.mark_delete, -1)
        start = state.mark_delete
        read = journal.read_position
        if (
            read is not None
            and read.cursor_version >= journal.snapshot_version
            and read.cursor_version >= last_reset
            and read.settled_through > start
        ):
            start = read.settled_through
        return state, journal, start

    def _served(self, consumer: Consumer, live: Sequence[ConsumerInfo]) -> list[PartitionSource]:
        """The partitions ``consumer`` may read: all, or on Failover those it is active on."""
        if self.subscription_type is not SubscriptionType.FAILOVER:
            return self._sources
        # Only the highest priority level (the lowest value) is active; lower levels
        # take over when it is gone, as in Pulsar.
        top = min(c.priority for c in live)
        ordered = [c.consumer_id for c in live if c.priority == top]
        return [
            source
            for source in self._sources
            if ordered[max(source.partition, 0) % len(ordered)] == consumer.consumer_id
        ]

    @staticmethod
    def _take_over(
        txn: SubscriptionTransaction, consumer: Consumer, served: Sequence[PartitionSource]
    ) -> None:
        """Failover: what a former active consumer of these partitions holds comes to this one."""
        for source in served:
            for holder in sorted(txn.holders(source.topic_partition) - {consumer.consumer_id}):
                txn.release(
                    holder, reason=Release.TAKE_OVER, topic_partition=source.topic_partition
                )

    @staticmethod
    def _draining(
        txn: SubscriptionTransaction,
        consumer: Consumer,
        sources: Sequence[PartitionSource],
        states: Sequence[CursorState],
    ) -> set[int]:
        """PIP-379: hashes still pending at another consumer are blocked for this one.

        A held message acknowledged by other means (a skip) no longer blocks its
        hash: its pending row is dropped.
        """
        by_topic = {
            source.topic_partition: state for source, state in zip(sources, states, strict=True)
        }
        held = txn.held_elsewhere(consumer.consumer_id)
        done = [
            key
            for key in held
            if key[0] in by_topic and by_topic[key[0]].is_acked(Position(key[1], key[2]), key[3])
        ]
        if done:
            txn.drop_pending(done)
            for key in done:
                del held[key]
        return set(held.values())

    def _judge(
        self,
        txn: SubscriptionTransaction,
        consumer: Consumer,
        live: Sequence[ConsumerInfo],
        sources: Sequence[PartitionSource],
        states: Sequence[CursorState],
    ) -> _Deliverable:
        """Which candidates may go to ``consumer`` now: not delayed, and its keys on Key_Shared."""
        key_shared = self.subscription_type is SubscriptionType.KEY_SHARED
        return _Deliverable(
            now=self.clock(),
            honour_delay=self.subscription_type.honours_delayed_delivery,
            me=consumer.consumer_id,
            ring=HashRing([c.consumer_id for c in live]) if key_shared else None,
            draining=self._draining(txn, consumer, sources, states) if key_shared else set(),
            ranges=consumer.hash_ranges,
        )

    # -- acknowledgements -----------------------------------------------------

    def acknowledge(self, consumer: Consumer, messages: Sequence[Message]) -> None:
        """Acknowledge these messages, in one transaction. Where the namespace requires
        approval, only messages delivered to ``consumer`` and pending for it
        (:meth:`SubscriptionTransaction.acknowledge_delivered`)."""
        by_topic: dict[str, list[AckTarget]] = {}
        keys: list[PendingKey] = []
        for message in messages:
            key = self._key_of(message)
            keys.append(key)
            mid = message.message_id
            by_topic.setdefault(key[0], []).append(
                AckTarget(mid.position, mid.batch_index, mid.batch_size)
            )
        self._acknowledge(consumer, by_topic, keys)
        _forget_chunks(consumer, keys)

    def acknowledge_batch(self, consumer: Consumer, batch: MessageBatch) -> None:
        """Acknowledge every message of a :class:`MessageBatch` in one transaction.

        From the batch's columns: each partition's cursor delta is built as
        arrays (:class:`AckColumns`, the bytes ``ack_delta`` would encode) and
        its messages leave the pending runs as arrays, with no object per message.
        """
        for topic in batch.topics:
            if topic not in self._by_topic:
                raise InvalidArgumentError(f"Messages of {topic} are not from this subscription")
        if not len(batch):
            return
        sizes = batch.batch_sizes
        parts = []
        for code in sorted(range(len(batch.topics)), key=lambda c: batch.topics[c]):
            rows = np.flatnonzero(batch.topic_index == code)
            if not len(rows):
                continue
            ledger, entry, index = (
                batch.ledger_id[rows],
                batch.entry_id[rows],
                batch.batch_index[rows],
            )
            # Built before the transaction: a bad batch index is refused with nothing written.
            delta = AckColumns.of(ledger, entry, index, sizes[rows])
            parts.append(
                (
                    batch.topics[code],
                    cursor_codec.encode_columns(delta),
                    ledger,
                    entry,
                    index,
                    sizes[rows],
                )
            )
        ticket = Ticket.delivered_to(consumer.consumer_id)
        with self._transaction() as txn:
            txn.renew_lease(consumer.consumer_id, self.lease_ms)
            for topic, payload, ledger, entry, index, size in parts:
                txn.acknowledge_delivered(
                    topic, ledger, entry, index, _known(size), payload, ticket=ticket
                )
        for topic, _, ledger, entry, index, _ in parts:
            _forget_chunk_columns(consumer, topic, ledger, entry, index)

    def acknowledge_words(self, consumer: Consumer, topic: str, acks: AckWords) -> None:
        """Acknowledge message ids of one partition as a ``CommandAck`` carries them, in one
        transaction: the cursor delta is made of the ack sets' words, and the pending
        messages leave as arrays (:class:`AckWords`), with no object per batch index."""
        if topic not in self._by_topic:
            raise InvalidArgumentError(f"Messages of {topic} are not from this subscription")
        if not len(acks):
            return
        # Built before the transaction: a bad acknowledgement is refused with nothing written.
        payload = cursor_codec.encode_columns(acks.delta())
        ledger, entry, index = acks.acked()
        ticket = Ticket.delivered_to(consumer.consumer_id)
        with self._transaction() as txn:
            txn.renew_lease(consumer.consumer_id, self.lease_ms)
            txn.acknowledge_delivered(
                topic,
                ledger,
                entry,
                index,
                lambda: _sizes_of(acks, ledger, entry),
                payload,
                ticket=ticket,
            )
        _forget_chunk_columns(consumer, topic, ledger, entry, index)

    def _acknowledge(
        self, consumer: Consumer, by_topic: dict[str, list[AckTarget]], keys: list[PendingKey]
    ) -> None:
        if not keys:
            return
        ticket = Ticket.delivered_to(consumer.consumer_id)
        with self._transaction() as txn:
            txn.renew_lease(consumer.consumer_id, self.lease_ms)
            for topic in sorted(by_topic):
                targets = by_topic[topic]
                payload = cursor_codec.encode(CursorState.ack_delta(targets))
                sizes = np.array([t.batch_size for t in targets], np.int64)
                txn.acknowledge_delivered(
                    topic,
                    np.array([t.position.ledger_id for t in targets], np.int64),
                    np.array([t.position.entry_id for t in targets], np.int64),
                    np.array([t.batch_index for t in targets], np.int64),
                    _known(sizes),
                    payload,
                    ticket=ticket,
                )

    def acknowledge_cumulative(self, consumer: Consumer, message: Message) -> None:
        if not self.subscription_type.uses_consumer_epoch:
            raise ConflictError(
                f"Cumulative acknowledgement is not supported on a {self.subscription_type.value}"
                " subscription"
            )
        topic = self._key_of(message)[0]
        mid = message.message_id
        layout = self._by_topic[topic].layout()
        delta = CursorState().acknowledge_cumulative(
            mid.position, layout, mid.batch_index, mid.batch_size
        )
        ticket = Ticket.delivered_to(consumer.consumer_id)
        with self._transaction() as txn:
            txn.renew_lease(consumer.consumer_id, self.lease_ms)
            txn.acknowledge_delivered_through(
                topic,
                mid.position,
                mid.batch_index,
                cursor_codec.encode(delta),
                self._batch_sizes(topic),
                ticket=ticket,
            )
        _forget_chunks(
            consumer, [k for k in consumer.chunked if k[0] == topic and k[1:3] <= mid.position]
        )

    def _batch_sizes(self, topic: str) -> Callable[[Ints, Ints, Ints], Ints]:
        """The batch size of each message's entry, as stored: read from the partition, once
        per batched entry; 0 where the batch index is -1. A cumulative acknowledgement on an
        approval namespace acknowledges the consumer's pending messages one by one, and the
        pending set keeps no entry's size."""

        def sizes(ledger: Ints, entry: Ints, index: Ints) -> Ints:
            found: dict[tuple[int, int], int] = {}
            out = np.zeros(len(ledger), np.int64)
            for i, key in enumerate(zip(ledger.tolist(), entry.tolist(), strict=True)):
                if index[i] < 0:
                    continue
                if key not in found:
                    rows = self.entry_rows(topic, Position(*key))
                    found[key] = 0 if rows is None else int(rows.column("batch_size")[0].as_py())
                out[i] = found[key]
            return out

        return sizes

    def negative_acknowledge(self, consumer: Consumer, message: Message) -> None:
        """Deliver the message again, later (a chunk: its whole chunked message); its
        redelivery count is bumped."""
        self.release(consumer, [self._key_of(message)], Release.NEGATIVE_ACK)

    def redeliver_unacknowledged(self, consumer: Consumer) -> None:
        """Release everything the consumer holds; on Exclusive/Failover it reads again in order."""
        consumer.chunked.clear()
        with self._transaction() as txn:
            txn.release(consumer.consumer_id, reason=Release.REDELIVER)
            if txn.renew_lease(consumer.consumer_id, self.lease_ms):
                txn.upsert_consumer(
                    consumer.consumer_id,
                    consumer.name,
                    consumer.priority,
                    consumer.epoch,
                    self.lease_ms,
                )

    def _key_of(self, message: Message) -> PendingKey:
        if message.topic not in self._by_topic:
            raise InvalidArgumentError(
                f"Message {message.message_id} is not from this subscription"
            )
        mid = message.message_id
        return (message.topic, mid.ledger_id, mid.entry_id, mid.batch_index)


def _known(sizes: Ints) -> Callable[[], Ints]:
    """Batch sizes at hand, as :meth:`SubscriptionTransaction.acknowledge_delivered` asks."""
    return lambda: sizes


def _sizes_of(acks: AckWords, ledger: Ints, entry: Ints) -> Ints:
    """The batch size ``acks`` gives the entry of each message (ledger, entry)."""
    size = dict(
        zip(
            zip(acks.ledger_ids.tolist(), acks.entry_ids.tolist(), strict=True),
            acks.batch_sizes.tolist(),
            strict=True,
        )
    )
    keys = zip(ledger.tolist(), entry.tolist(), strict=True)
    return np.array([size[key] for key in keys], np.int64)


def _uncut(batch: MessageBatch, most: int) -> int:
    """``most``, or past the last row of each chunked message among the first ``most`` rows
    of ``batch`` (a dispatch holds a chunked message's chunks together, other messages
    perhaps between them)."""
    uuid = batch.columns.column("uuid")
    if uuid.null_count == len(batch):
        return most
    names = uuid.to_pylist()
    topics = batch.topic_index.tolist()
    taken = {(topics[row], names[row]) for row in range(most) if names[row] is not None}
    cut = most
    for row in range(most, len(batch)):
        if names[row] is not None and (topics[row], names[row]) in taken:
            cut = row + 1
    return cut


def _remember_chunks(consumer: Consumer, batch: MessageBatch) -> None:
    """Note, for each chunk of a chunked message in ``batch``, all of that message's chunks
    the consumer now holds (a dispatch gives a chunked message whole)."""
    uuid = batch.columns.column("uuid")
    if uuid.null_count == len(batch):
        return
    groups: dict[tuple[int, str], list[PendingKey]] = {}
    topics = batch.topic_index.tolist()
    ledgers, entries = batch.ledger_id.tolist(), batch.entry_id.tolist()
    indexes = batch.batch_index.tolist()
    for row, name in enumerate(uuid.to_pylist()):
        if name is not None:
            key = (batch.topics[topics[row]], ledgers[row], entries[row], indexes[row])
            groups.setdefault((topics[row], name), []).append(key)
    for keys in groups.values():
        whole = tuple(keys)
        consumer.chunked.update(dict.fromkeys(whole, whole))


def _forget_chunks(consumer: Consumer, keys: Sequence[PendingKey]) -> None:
    """Forget the chunks among ``keys`` (acknowledged or released)."""
    if consumer.chunked:
        for key in keys:
            consumer.chunked.pop(key, None)


def _forget_chunk_columns(
    consumer: Consumer, topic: str, ledger: Ints, entry: Ints, index: Ints
) -> None:
    """:func:`_forget_chunks` of one partition's messages given as aligned arrays."""
    if consumer.chunked:
        _forget_chunks(
            consumer,
            [
                (topic, led, ent, ind)
                for led, ent, ind in zip(
                    ledger.tolist(), entry.tolist(), index.tolist(), strict=True
                )
            ],
        )


__all__ = ["Consumer", "Dispatcher", "Message", "MessageBatch", "PartitionSource", "peek"]

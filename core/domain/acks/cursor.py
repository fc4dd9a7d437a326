"""Cursor state: what a subscription has acknowledged on one topic partition.

Pulsar's ``ManagedCursorImpl`` keeps three things, and so does :class:`CursorState`:

- ``mark_delete``: every entry **at or before** it is acknowledged (inclusive).
- ``individually_deleted``: entries acknowledged after mark-delete
  (a :class:`~cursorops.core.domain.acks.range_set.RangeSet`, one roaring bitmap per ledger).
- ``batch_acks``: per partly acknowledged batch entry, an ack set where a set
  bit is an index still **unacknowledged** (:mod:`cursorops.core.domain.acks.ack_set`). An entry
  whose set becomes empty moves into ``individually_deleted``.

Batch-index acknowledgement is always on (PIP-391). After every change the
state is normalised against a :class:`~cursorops.core.domain.acks.ledger_layout.LedgerLayout`:
mark-delete auto-advances through acknowledged entries, also across ledger
boundaries, and everything at or before it is dropped.

This module is pure and in memory; :mod:`cursorops.core.store.cursor_state` stores it (a snapshot
and a journal of deltas) inside the transactions that change cursors.
Every operation also returns the *delta* it applied (a small ``CursorState``),
which is what gets persisted: deltas merge by union, so concurrent writers
never lose each other's acknowledgements.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.errors import InvalidBatchIndexError
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.core.domain.ids.position_match import match_positions


@dataclass(frozen=True, slots=True)
class AckTarget:
    """One acknowledgement: a whole entry (``batch_index == -1``) or one index of a batch."""

    position: Position
    batch_index: int = -1
    batch_size: int = 0
    """Messages in the entry; 0 for a non-batched entry. Needed for batch-index acks."""


@dataclass(frozen=True, eq=False)
class AckColumns:
    """Individual acknowledgements as arrays: :meth:`CursorState.ack_delta`'s delta
    without a Python object per message (a skip acknowledges 100,000s at once).

    ``entries`` holds the whole entries acknowledged, batches with every index
    acknowledged here included. The partly acknowledged batches are the rows of
    ``batch_ledger_ids`` / ``batch_entry_ids``, ascending by position; row ``i``'s
    ack set is ``words[word_starts[i]:word_starts[i + 1]]``, laid out as
    :func:`cursorops.core.domain.acks.ack_set.to_words` lays it (trailing zero words dropped).
    :func:`cursorops.core.domain.acks.cursor_codec.encode_columns` writes the bytes
    :func:`cursorops.core.domain.acks.cursor_codec.encode` writes for :meth:`to_state`.
    """

    entries: RangeSet
    batch_ledger_ids: npt.NDArray[np.int64]
    batch_entry_ids: npt.NDArray[np.int64]
    word_starts: npt.NDArray[np.int64]
    words: npt.NDArray[np.uint64]

    @classmethod
    def of(
        cls,
        ledger_ids: npt.ArrayLike,
        entry_ids: npt.ArrayLike,
        batch_indexes: npt.ArrayLike,
        batch_sizes: npt.ArrayLike,
    ) -> AckColumns:
        """The acknowledgement of each ``(ledger, entry, batch index, batch size)`` row.

        The same rules as :meth:`CursorState.ack_delta` of one target per row:
        batch index -1 is the whole entry; an index outside ``[0, batch size)``
        raises InvalidBatchIndexError (the first such row, the same message);
        the first row of an entry sets its batch size. Cost: O(n log n) for n
        rows, in numpy.
        """
        ledgers = np.asarray(ledger_ids, dtype=np.int64)
        entries = np.asarray(entry_ids, dtype=np.int64)
        indexes = np.asarray(batch_indexes, dtype=np.int64)
        sizes = np.asarray(batch_sizes, dtype=np.int64)
        batched = indexes >= 0
        bad = np.flatnonzero(batched & (indexes >= np.maximum(sizes, 0)))
        if bad.size:
            row = int(bad[0])
            raise InvalidBatchIndexError(
                f"Invalid batchIndex: {indexes[row]}, batchSize={sizes[row]}"
            )
        rows = np.flatnonzero(batched)
        # By entry, each entry's rows in the order given: its first row sets the size.
        rows = rows[np.lexsort((rows, entries[rows], ledgers[rows]))]
        row_ledgers, row_entries = ledgers[rows], entries[rows]
        starts = np.ones(rows.size, dtype=np.bool_)
        starts[1:] = (row_ledgers[1:] != row_ledgers[:-1]) | (row_entries[1:] != row_entries[:-1])
        group = np.cumsum(starts) - 1
        size = sizes[rows[starts]]
        word_count = (size + 63) >> 6
        word_starts = np.zeros(size.size + 1, dtype=np.int64)
        np.cumsum(word_count, out=word_starts[1:])
        words = np.full(int(word_starts[-1]), np.uint64(2**64 - 1), dtype=np.uint64)
        partial = (size & 63) != 0
        words[word_starts[1:][partial] - 1] = np.left_shift(
            np.uint64(1), (size[partial] & 63).astype(np.uint64)
        ) - np.uint64(1)
        index = indexes[rows]
        # An index beyond the size its entry's first row gave clears nothing, as in ack_delta.
        inside = index < size[group]
        cleared = np.zeros(words.size, dtype=np.uint64)
        np.bitwise_or.at(
            cleared,
            word_starts[group[inside]] + (index[inside] >> 6),
            np.left_shift(np.uint64(1), (index[inside] & 63).astype(np.uint64)),
        )
        words &= ~cleared
        # Trailing zero words dropped; an entry left with none is acknowledged whole.
        last = np.zeros(size.size, dtype=np.int64)
        if words.size:
            numbered = np.where(words != 0, np.arange(1, words.size + 1, dtype=np.int64), 0)
            last = np.maximum.reduceat(numbered, word_starts[:-1])
        kept_count = np.maximum(last - word_starts[:-1], 0)
        ordinal = np.arange(words.size, dtype=np.int64) - np.repeat(word_starts[:-1], word_count)
        kept_words = words[ordinal < np.repeat(kept_count, word_count)]
        partly = kept_count > 0
        kept_starts = np.zeros(int(partly.sum()) + 1, dtype=np.int64)
        np.cumsum(kept_count[partly], out=kept_starts[1:])
        group_ledgers, group_entries = row_ledgers[starts], row_entries[starts]
        whole = RangeSet()
        whole.add_positions(
            np.concatenate((ledgers[~batched], group_ledgers[~partly])),
            np.concatenate((entries[~batched], group_entries[~partly])),
        )
        return cls(whole, group_ledgers[partly], group_entries[partly], kept_starts, kept_words)

    def __len__(self) -> int:
        """Entries touched: whole entries plus partly acknowledged batches."""
        return len(self.entries) + int(self.batch_ledger_ids.size)

    def to_state(self) -> CursorState:
        """The same delta as a :class:`CursorState` (one Python int per partly acked batch)."""
        data = self.words.astype("<u8").tobytes()
        starts = self.word_starts.tolist()
        sets = BatchAckSets(
            {
                Position(ledger_id, entry_id): int.from_bytes(data[8 * start : 8 * stop], "little")
                for ledger_id, entry_id, start, stop in zip(
                    self.batch_ledger_ids.tolist(),
                    self.batch_entry_ids.tolist(),
                    starts[:-1],
                    starts[1:],
                    strict=True,
                )
            }
        )
        return CursorState(individually_deleted=self.entries.copy(), batch_acks=sets)


class BatchAckSets(dict[Position, int]):
    """Partly acknowledged batch entries -> ack set (a set bit = still unacknowledged).

    A dict with a min-heap of its positions beside it, so that dropping every
    entry at or before mark-delete costs O(log n) per dropped entry instead of a
    sweep of all of them each time mark-delete moves. Write with ``[]=`` only.
    """

    __slots__ = ("_heap",)

    def __init__(self, items: Mapping[Position, int] | None = None) -> None:
        super().__init__(items or {})
        self._heap: list[Position] = list(self)
        heapq.heapify(self._heap)

    def __setitem__(self, position: Position, bits: int) -> None:
        if position not in self:
            heapq.heappush(self._heap, position)
        super().__setitem__(position, bits)

    def drop_through(self, position: Position) -> None:
        """Forget every entry at or before ``position``."""
        heap = self._heap
        while heap and heap[0] <= position:
            self.pop(heapq.heappop(heap), None)
        if len(heap) > 2 * len(self) + 64:
            # Entries folded into individually deleted leave stale heap slots.
            self._heap = list(self)
            heapq.heapify(self._heap)


@dataclass
class CursorState:
    mark_delete: Position = EARLIEST
    individually_deleted: RangeSet = field(default_factory=RangeSet)
    batch_acks: BatchAckSets = field(default_factory=BatchAckSets)

    def __post_init__(self) -> None:
        if not isinstance(self.batch_acks, BatchAckSets):
            self.batch_acks = BatchAckSets(self.batch_acks)

    def copy(self) -> CursorState:
        return CursorState(
            self.mark_delete, self.individually_deleted.copy(), BatchAckSets(self.batch_acks)
        )

    # -- queries -------------------------------------------------------------

    def is_entry_acked(self, position: Position) -> bool:
        """True when the whole entry is acknowledged."""
        return position <= self.mark_delete or self.individually_deleted.contains(*position)

    def is_acked(self, position: Position, batch_index: int = -1) -> bool:
        """True when the entry, or (``batch_index >= 0``) that index of it, is acknowledged."""
        if self.is_entry_acked(position):
            return True
        if batch_index < 0:
            return False
        bits = self.batch_acks.get(position)
        return bits is not None and ack_set.is_acked(bits, batch_index)

    def acked_many(
        self,
        ledger_ids: npt.ArrayLike,
        entry_ids: npt.ArrayLike,
        batch_indexes: npt.ArrayLike,
    ) -> npt.NDArray[np.bool_]:
        """:meth:`is_acked` of each ``(ledger_ids[i], entry_ids[i])`` and batch index, as arrays.

        The same answer per message as :meth:`is_acked`, computed over arrays:
        at or before mark-delete (a lexicographic compare), individually deleted
        (:meth:`RangeSet.contains_many`), or, for a batch index >= 0 of a partly
        acknowledged entry, its bit clear in the entry's ack set (an index beyond
        the set reads as acknowledged, as :func:`cursorops.core.domain.acks.ack_set.is_acked` says).
        Cost: O(n log n) for n messages, plus one Python step per partly
        acknowledged entry of the cursor to list the ack sets.
        """
        ledgers = np.asarray(ledger_ids, dtype=np.int64)
        entries = np.asarray(entry_ids, dtype=np.int64)
        indexes = np.asarray(batch_indexes, dtype=np.int64)
        mark_ledger, mark_entry = self.mark_delete
        acked: npt.NDArray[np.bool_] = (ledgers < mark_ledger) | (
            (ledgers == mark_ledger) & (entries <= mark_entry)
        )
        acked |= self.individually_deleted.contains_many(ledgers, entries)
        asked = np.flatnonzero(~acked & (indexes >= 0))
        if asked.size == 0 or not self.batch_acks:
            return acked
        positions = list(self.batch_acks)
        rows = match_positions(
            ledgers[asked],
            entries[asked],
            np.fromiter((p.ledger_id for p in positions), np.int64, len(positions)),
            np.fromiter((p.entry_id for p in positions), np.int64, len(positions)),
        )
        partly = rows >= 0
        asked, rows = asked[partly], rows[partly]
        if asked.size == 0:
            return acked
        # The ack sets asked about, as little-endian 64-bit words laid end to end.
        used, slot = np.unique(rows, return_inverse=True)
        sets = [self.batch_acks[positions[row]] for row in used.tolist()]
        lengths = np.array([(bits.bit_length() + 63) // 64 for bits in sets], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        words = np.frombuffer(
            b"".join(
                bits.to_bytes(8 * n, "little")
                for bits, n in zip(sets, lengths.tolist(), strict=True)
            ),
            dtype="<u8",
        )
        index = indexes[asked]
        word = index >> 6
        inside = word < lengths[slot]
        at = np.where(inside, offsets[slot] + word, 0)
        clear: npt.NDArray[np.bool_] = np.ones(asked.size, dtype=np.bool_)
        if words.size:
            clear = ((words[at] >> (index & 63).astype(np.uint64)) & np.uint64(1)) == 0
        acked[asked] = ~inside | clear
        return acked

    def unacked_in_entry(self, position: Position, batch_size: int) -> int:
        """Messages of this entry still unacknowledged (``batch_size`` 0 = not batched)."""
        if self.is_entry_acked(position):
            return 0
        bits = self.batch_acks.get(position)
        if bits is None:
            return max(batch_size, 1)
        return ack_set.unacked_count(bits)

    # -- mutations (each returns the delta it applied) -------------------------

    @staticmethod
    def ack_delta(targets: Iterable[AckTarget]) -> CursorState:
        """The delta acknowledging ``targets`` (entries and batch indexes), not yet merged.

        Cost: O(k) for k targets. Raises InvalidBatchIndexError for an index
        outside ``[0, batch_size)``.
        """
        by_ledger: dict[int, list[int]] = {}
        sets: dict[Position, int] = {}
        for target in targets:
            position = target.position
            index = target.batch_index
            if index < 0:
                entries = by_ledger.get(position[0])
                if entries is None:
                    entries = by_ledger[position[0]] = []
                entries.append(position[1])
                continue
            size = target.batch_size
            if not 0 <= index < max(size, 0):
                raise InvalidBatchIndexError(f"Invalid batchIndex: {index}, batchSize={size}")
            bits = sets.get(position)
            # ack_set.ack(ack_set.full(size), index) inline: one call per target adds up
            # over a skip of a million ids. The entry's first target sets its size.
            sets[position] = ((1 << size) - 1 if bits is None else bits) & ~(1 << index)
        partly: dict[Position, int] = {}
        for position, bits in sets.items():
            if bits:
                partly[position] = bits
            else:
                by_ledger.setdefault(position[0], []).append(position[1])
        delta = CursorState(batch_acks=BatchAckSets(partly))
        for ledger_id, entries in by_ledger.items():
            delta.individually_deleted.add_many(ledger_id, entries)
        return delta

    def acknowledge(self, targets: Sequence[AckTarget], layout: LedgerLayout) -> None:
        """Individual acknowledgement of entries and batch indexes.

        Already acknowledged targets are no-ops. Cost: O(k) plus one auto-advance;
        a single whole entry takes a shorter path (no delta is built), since
        consumers that do not group their acknowledgements send one at a time.
        Durable callers use :meth:`ack_delta` and :meth:`merge` instead.
        """
        if len(targets) == 1 and targets[0].batch_index < 0:
            position = targets[0].position
            start = self.mark_delete
            if position <= start:
                return
            self.individually_deleted.add(position.ledger_id, position.entry_id)
            if self.batch_acks:
                self.batch_acks.pop(position, None)
            self._advance(layout, start)
            return
        self.merge(self.ack_delta(targets), layout)

    def acknowledge_cumulative(
        self, position: Position, layout: LedgerLayout, batch_index: int = -1, batch_size: int = 0
    ) -> CursorState:
        """Cumulative acknowledgement: everything up to ``position`` inclusive.

        With a batch index, mark-delete becomes the entry *before* the batch and
        the batch keeps the indexes after ``batch_index`` unacknowledged, as Pulsar does.
        """
        delta = CursorState()
        if batch_index < 0:
            delta.mark_delete = position
        else:
            if not 0 <= batch_index < batch_size:
                raise InvalidBatchIndexError(
                    f"Invalid batchIndex: {batch_index}, batchSize={batch_size}"
                )
            delta.mark_delete = layout.previous_position(position)
            bits = ack_set.full(batch_size) & ~((1 << (batch_index + 1)) - 1)
            if bits:
                delta.batch_acks[position] = bits
            else:
                delta.individually_deleted.add(*position)
        self.merge(delta, layout)
        return delta

    def merge(self, delta: CursorState, layout: LedgerLayout | None) -> None:
        """Union of acknowledgements: max mark-delete, union of entries, AND of ack sets.

        Merging is commutative and idempotent. With ``layout`` None the state is
        left unnormalised, so that a journal replays in one normalisation. With a
        layout the work is proportional to the delta, not to the state: only the
        delta's batch sets are folded, and the state's batch sets are swept only
        when mark-delete moves.
        """
        start = self.mark_delete
        if delta.mark_delete > self.mark_delete:
            self.mark_delete = delta.mark_delete
        deleted = self.individually_deleted
        deleted.union_update(delta.individually_deleted)
        batch_acks = self.batch_acks
        mark_delete = self.mark_delete
        for position, bits in delta.batch_acks.items():
            if layout is not None and (position <= mark_delete or deleted.contains(*position)):
                continue
            current = batch_acks.get(position)
            merged = bits if current is None else ack_set.merge(current, bits)
            if merged == 0 and layout is not None:
                batch_acks.pop(position, None)
                deleted.add(*position)
            else:
                batch_acks[position] = merged
        if layout is None:
            return
        if batch_acks and delta.individually_deleted:
            if len(delta.individually_deleted) < len(batch_acks):
                for ledger_id, entry_id in delta.individually_deleted:
                    batch_acks.pop(Position(ledger_id, entry_id), None)
            else:
                for covered in [p for p in batch_acks if deleted.contains(*p)]:
                    del batch_acks[covered]
        self._advance(layout, start)

    def normalize(self, layout: LedgerLayout) -> None:
        """Fold empty ack sets into entries, auto-advance mark-delete, drop what it covers.

        Auto-advance follows Pulsar: while the entry right after mark-delete is
        individually deleted, mark-delete jumps to the end of that run, across
        ledger boundaries. Cost: O(runs crossed + batch sets).
        """
        for position in [p for p, bits in self.batch_acks.items() if bits == 0]:
            del self.batch_acks[position]
            self.individually_deleted.add(*position)
        deleted = self.individually_deleted
        if self.batch_acks and deleted:
            # One vectorised look-up for every partly acknowledged entry: a cursor that
            # random skips left with many of them is normalized on each replay.
            positions = list(self.batch_acks)
            covered = deleted.contains_many(
                np.fromiter((p.ledger_id for p in positions), np.int64, len(positions)),
                np.fromiter((p.entry_id for p in positions), np.int64, len(positions)),
            )
            if covered.any():
                acks = self.batch_acks
                kept = zip(positions, covered.tolist(), strict=True)
                self.batch_acks = BatchAckSets({p: acks[p] for p, gone in kept if not gone})
        self._advance(layout, None)

    def _advance(self, layout: LedgerLayout, start: Position | None) -> None:
        """Auto-advance mark-delete and drop what it covers.

        Batch sets are swept only when mark-delete moved past ``start`` (always
        when ``start`` is None).
        """
        deleted = self.individually_deleted
        mark_delete = self.mark_delete
        while True:
            following = layout.next_position(mark_delete)
            if following is None:
                break
            run_end = deleted.run_end(*following)
            if run_end is None:
                break
            mark_delete = Position(following.ledger_id, run_end)
        self.mark_delete = mark_delete
        if mark_delete >= (0, 0) and deleted:
            deleted.remove_through(*mark_delete)
        if self.batch_acks and mark_delete != start:
            self.batch_acks.drop_through(mark_delete)

    def reset(self, position: Position, layout: LedgerLayout) -> CursorState:
        """Reset so that ``position`` is the next entry read; forgets every later ack.

        Like Pulsar's ``resetCursor``: mark-delete becomes the entry before
        ``position`` and the individually deleted set is cleared.
        """
        self.mark_delete = layout.previous_position(position) if position > EARLIEST else EARLIEST
        self.individually_deleted = RangeSet()
        self.batch_acks = BatchAckSets()
        self.normalize(layout)
        return self.copy()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CursorState):
            return NotImplemented
        return (
            self.mark_delete == other.mark_delete
            and self.individually_deleted == other.individually_deleted
            and self.batch_acks == other.batch_acks
        )

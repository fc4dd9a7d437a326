"""Acknowledgements as the wire carries them: per message id, an entry and its ack set's words.

A ``CommandAck`` names entries; a batched entry's ``ack_set`` is the ``long[]`` of
``java.util.BitSet.toLongArray()``, with Pulsar's polarity: a set bit is an index
still unacknowledged. That is the polarity and the layout of the cursor's own ack
sets (:mod:`cursorops.core.domain.acks.ack_set`), so the client's words are the cursor delta as they
stand: masked to the batch, ANDed where one entry is named twice, and laid out as
:class:`~cursorops.core.domain.acks.cursor.AckColumns` (whose bytes
:func:`cursorops.core.domain.acks.cursor_codec.encode_columns`
writes). Nothing here makes a Python object per batch index: acknowledging a batch
of a thousand messages costs its words, not a thousand ints.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks.cursor import AckColumns
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.errors import InvalidArgumentError

MAX_BATCH_SIZE = 1 << 20
"""More messages than any entry holds: a batch is read whole from one frame of at most
5 MiB, and each of its messages takes at least a few bytes of it. A larger batch size
names no entry, and would cost its size in memory to acknowledge."""

_ONES = np.uint64(2**64 - 1)
_WORD_MIN = -(1 << 63)
_WORD_LIMIT = 1 << 64


@dataclass(frozen=True, eq=False)
class AckWords:
    """Row ``i`` acknowledges entry ``(ledger_ids[i], entry_ids[i])``.

    ``batch_sizes[i]`` is 0 for an entry that is not a batch: the whole entry. A batch
    with no words (``word_starts[i] == word_starts[i + 1]``) is acknowledged whole, as a
    client with batch-index acks off sends it once every message of it is. Otherwise
    row ``i``'s ack set is ``words[word_starts[i]:word_starts[i + 1]]``: a clear bit
    is acknowledged, and so is every index past the last word (``toLongArray`` drops
    trailing zero words).
    """

    ledger_ids: npt.NDArray[np.int64]
    entry_ids: npt.NDArray[np.int64]
    batch_sizes: npt.NDArray[np.int64]
    word_starts: npt.NDArray[np.int64]
    words: npt.NDArray[np.uint64]

    @classmethod
    def of(
        cls,
        ledger_ids: Sequence[int],
        entry_ids: Sequence[int],
        batch_sizes: Sequence[int],
        word_counts: Sequence[int],
        words: Sequence[int],
    ) -> AckWords:
        """From the message ids' fields: ``word_counts[i]`` of the flat ``words`` (signed or
        unsigned 64-bit, as decoded) are row ``i``'s.

        A batch size below 0 or above :data:`MAX_BATCH_SIZE`, or a word outside 64 bits,
        raises :class:`~cursorops.core.domain.errors.InvalidArgumentError`. Cost: O(rows + words).
        """
        sizes = np.asarray(batch_sizes, dtype=np.int64)
        bad = np.flatnonzero((sizes < 0) | (sizes > MAX_BATCH_SIZE))
        if bad.size:
            raise InvalidArgumentError(
                f"Invalid batch size {int(sizes[bad[0]])}: a batch holds 0 to "
                f"{MAX_BATCH_SIZE} messages"
            )
        if words and (min(words) < _WORD_MIN or max(words) >= _WORD_LIMIT):
            raise InvalidArgumentError("ack set words must be 64-bit")
        starts = np.zeros(len(word_counts) + 1, dtype=np.int64)
        np.cumsum(np.asarray(word_counts, dtype=np.int64), out=starts[1:])
        # Signed words as their two's complement: the same 64 bits.
        flat = np.fromiter((w & 0xFFFFFFFFFFFFFFFF for w in words), np.uint64, len(words))
        ledgers = np.asarray(ledger_ids, dtype=np.int64)
        entries = np.asarray(entry_ids, dtype=np.int64)
        # An entry named by several rows takes its first row's batch size in all of them.
        group, heads = _first_rows(ledgers, entries)
        return cls(ledgers, entries, sizes[heads][group], starts, flat)

    def __len__(self) -> int:
        return int(self.ledger_ids.size)

    def _masked(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
        """Each row's ack set as ``ceil(size / 64)`` words, bits past the batch clear
        (acknowledged), as it counts for the cursor: ``(starts, words)``. A row with no
        words has them all clear."""
        given = np.diff(self.word_starts)
        starts, out = _batch_words(self.batch_sizes)
        count = np.diff(starts)
        row = np.repeat(np.arange(len(self), dtype=np.int64), given)
        first = np.repeat(self.word_starts[:-1], given)
        ordinal = np.arange(self.words.size, dtype=np.int64) - first
        kept = ordinal < count[row]
        taken = np.zeros(out.size, dtype=np.uint64)
        taken[starts[row[kept]] + ordinal[kept]] = self.words[kept]
        return starts, out & taken

    @functools.cached_property
    def _merged(self) -> _Entries:
        """The rows merged per entry: each entry's ack set, the AND of its rows'."""
        ledgers, entries = self.ledger_ids, self.entry_ids
        group, heads = _first_rows(ledgers, entries)
        size = self.batch_sizes[heads]
        starts, full = _batch_words(size)
        row_starts, row_words = self._masked()
        row_count = np.diff(row_starts)
        word_row = np.repeat(np.arange(len(self), dtype=np.int64), row_count)
        ordinal = np.arange(row_words.size, dtype=np.int64) - np.repeat(row_starts[:-1], row_count)
        words = full.copy()
        np.bitwise_and.at(words, starts[group[word_row]] + ordinal, row_words)
        whole = np.zeros(size.size, dtype=np.bool_)
        whole[group[(self.batch_sizes == 0) | (np.diff(self.word_starts) == 0)]] = True
        return _Entries(ledgers[heads], entries[heads], size, starts, full, words, whole)

    def delta(self) -> AckColumns:
        """The cursor delta these acknowledgements make.

        An entry named by several rows takes the AND of their ack sets; one row
        acknowledging it whole makes it whole. A batch left with no set bit is a whole
        entry; one whose rows acknowledge nothing is left out. Cost: O(n log n) for n
        rows, plus the words, in numpy.
        """
        e = self._merged
        count = np.diff(e.starts)
        word_entry = np.repeat(np.arange(e.sizes.size, dtype=np.int64), count)
        # Per entry: how many words up to its last one with a set bit (0: acknowledged whole).
        kept_count = np.zeros(e.sizes.size, dtype=np.int64)
        holding = np.flatnonzero(e.words)
        np.maximum.at(kept_count, word_entry[holding], holding - e.starts[word_entry[holding]] + 1)
        whole = e.whole | (kept_count == 0)
        # A batch none of whose indexes is acknowledged here changes nothing.
        changed = np.zeros(e.sizes.size, dtype=np.bool_)
        changed[word_entry[e.words != e.full]] = True
        partly = ~whole & changed
        ordinal = np.arange(e.words.size, dtype=np.int64) - e.starts[word_entry]
        keep = partly[word_entry] & (ordinal < kept_count[word_entry])
        kept_starts = np.zeros(int(partly.sum()) + 1, dtype=np.int64)
        np.cumsum(kept_count[partly], out=kept_starts[1:])
        acked_whole = RangeSet()
        acked_whole.add_positions(e.ledger_ids[whole], e.entry_ids[whole])
        return AckColumns(
            acked_whole, e.ledger_ids[partly], e.entry_ids[partly], kept_starts, e.words[keep]
        )

    def acked(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Every message these rows acknowledge, once each, as ``(ledger, entry, batch
        index)`` arrays: an entry that is not a batch as batch index -1, a batch as each
        index it acknowledges. For the dispatcher's pending messages, which are kept per
        batch index. Cost: O(entries + their batch sizes), in numpy."""
        e = self._merged
        sizes = e.sizes
        plain = np.flatnonzero(sizes == 0)
        # A batch acknowledged whole: every index, with no bit to read.
        whole = np.flatnonzero(e.whole & (sizes > 0))
        whole_entries = np.repeat(whole, sizes[whole])
        whole_index = np.arange(whole_entries.size, dtype=np.int64) - np.repeat(
            np.cumsum(sizes[whole]) - sizes[whole], sizes[whole]
        )
        # Any other batch: the clear bits of its ack set, within the batch.
        count = np.where(e.whole, 0, np.diff(e.starts))
        bits = np.unpackbits(
            e.words[np.repeat(~e.whole, np.diff(e.starts))].astype("<u8").view(np.uint8),
            bitorder="little",
        )
        bit_entries = np.repeat(np.arange(sizes.size, dtype=np.int64), 64 * count)
        index = np.arange(bits.size, dtype=np.int64) - np.repeat(
            64 * (np.cumsum(count) - count), 64 * count
        )
        taken = (bits == 0) & (index < sizes[bit_entries])
        chosen = np.concatenate((plain, whole_entries, bit_entries[taken]))
        return (
            e.ledger_ids[chosen],
            e.entry_ids[chosen],
            np.concatenate((np.full(plain.size, -1, dtype=np.int64), whole_index, index[taken])),
        )


@dataclass(frozen=True)
class _Entries:
    """:class:`AckWords`' rows merged per entry, ascending by position."""

    ledger_ids: npt.NDArray[np.int64]
    entry_ids: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    full: npt.NDArray[np.uint64]
    """Each batch's ack set with nothing acknowledged."""
    words: npt.NDArray[np.uint64]
    """Each batch's ack set: the AND of its rows'."""
    whole: npt.NDArray[np.bool_]
    """A row acknowledges the entry whole."""


def _batch_words(
    sizes: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """``(starts, words)``: each batch's ack set with none of it acknowledged (bits
    ``0 .. size - 1`` set), ``ceil(size / 64)`` words each, laid end to end."""
    count = (sizes + 63) >> 6
    starts = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(count, out=starts[1:])
    words = np.full(int(starts[-1]), _ONES, dtype=np.uint64)
    partial = (sizes & 63) != 0
    words[starts[1:][partial] - 1] = np.left_shift(
        np.uint64(1), (sizes[partial] & 63).astype(np.uint64)
    ) - np.uint64(1)
    return starts, words


def _first_rows(
    ledgers: npt.NDArray[np.int64], entries: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(group, heads)``: each row's entry, numbered in position order, and each entry's
    first row."""
    order = np.lexsort((np.arange(ledgers.size), entries, ledgers))
    first = np.ones(order.size, dtype=np.bool_)
    first[1:] = (ledgers[order][1:] != ledgers[order][:-1]) | (
        entries[order][1:] != entries[order][:-1]
    )
    group = np.empty(order.size, dtype=np.int64)
    group[order] = np.cumsum(first) - 1
    return group, order[first]


__all__ = ["MAX_BATCH_SIZE", "AckWords"]

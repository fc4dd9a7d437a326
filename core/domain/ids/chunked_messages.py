"""A chunked message is one message: which entries hold it, and whether all of it is there.

Pulsar stores a message larger than the maximum message size as chunks, one
entry each, which the client joins; another producer's entries may come
between them. Every operation takes a chunked message whole or not at all
(skip, skip N, clear-backlog, undo, redrive, dispatch, redelivery), so all of
them ask this module which entries are one message: the chunk entries of a
partition with one ``uuid``, as Pulsar's Shared dispatcher pins them by uuid.

The message is *complete* once a last chunk (``chunk_id ==
num_chunks_from_msg - 1``) is stored; it is counted once, at its first last
chunk (:attr:`cursorops.core.store.ledger.EntryColumns.chunk_rest` counts the chunks
before it 0). One whose last chunk is not stored is not a message yet: no
consumer can receive it. What counts messages counts a chunked message once: over
entries by :func:`chunk_rest`, over a plan's ids by :meth:`ChunkedMessages.groups`
and :func:`count_once`.

Pure: arrays in, arrays out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cursorops.core.domain.ids.position_match import match_positions

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]
Groups = tuple[tuple[int, ...], ...]
"""Indexes into a list of message ids, one tuple per chunked message whose chunks are
among them (:meth:`ChunkedMessages.groups`)."""

CHUNK_COLUMNS = ("ledger_id", "entry_id", "uuid", "chunk_id", "num_chunks_from_msg")
"""The ledger columns :meth:`ChunkedMessages.of_rows` reads."""


@dataclass(frozen=True)
class ChunkedMessages:
    """The chunk entries of some rows of one partition, grouped into their messages.

    ``ledger_id``, ``entry_id``: the chunk entries, in position order;
    ``message``: each one's message, numbered ``0 .. count - 1`` in the order of
    their first chunks; ``last``: per message, the index (into the chunk entries)
    of its first last chunk, -1 while none is stored.
    """

    ledger_id: Ints
    entry_id: Ints
    message: Ints
    last: Ints

    def __len__(self) -> int:
        return int(self.ledger_id.size)

    @property
    def count(self) -> int:
        """How many chunked messages."""
        return int(self.last.size)

    @property
    def complete(self) -> Flags:
        """Per message: its last chunk is stored."""
        return self.last >= 0

    @classmethod
    def of(
        cls,
        ledger_id: npt.ArrayLike,
        entry_id: npt.ArrayLike,
        uuid: Sequence[str | None] | pa.Array | pa.ChunkedArray,
        chunk_id: npt.ArrayLike,
        num_chunks: npt.ArrayLike,
    ) -> ChunkedMessages:
        """Group aligned rows (any order; a row without a ``uuid`` is not a chunk and is left
        out). Cost: O(n log n) for n rows."""
        uuids = uuid.to_pylist() if isinstance(uuid, pa.Array | pa.ChunkedArray) else list(uuid)
        keep = np.fromiter((u is not None for u in uuids), np.bool_, len(uuids))
        ledgers = np.asarray(ledger_id, dtype=np.int64)[keep]
        entries = np.asarray(entry_id, dtype=np.int64)[keep]
        chunk = np.asarray(chunk_id, dtype=np.int64)[keep]
        chunks = np.asarray(num_chunks, dtype=np.int64)[keep]
        order = np.lexsort((entries, ledgers))
        ledgers, entries = ledgers[order], entries[order]
        chunk, chunks = chunk[order], chunks[order]
        kept = [u for u, k in zip(uuids, keep.tolist(), strict=True) if k]
        names = np.asarray([kept[i] for i in order.tolist()], dtype=object)
        if not names.size:
            none = np.zeros(0, np.int64)
            return cls(none, none, none, none)
        _, first, code = np.unique(names, return_index=True, return_inverse=True)
        # Numbered by first chunk: message k's first chunk comes before message k + 1's.
        rank = np.empty(first.size, np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(first.size, dtype=np.int64)
        message = rank[code]
        unset = np.iinfo(np.int64).max
        last = np.full(first.size, unset, np.int64)
        ends = np.flatnonzero(chunk == chunks - 1)
        np.minimum.at(last, message[ends], ends)
        last[last == unset] = -1
        return cls(ledgers, entries, message, last)

    @classmethod
    def of_rows(cls, rows: pa.Table | pa.RecordBatch) -> ChunkedMessages:
        """:meth:`of` the :data:`CHUNK_COLUMNS` of ledger rows (any other columns ignored)."""
        import pyarrow.compute as pc

        uuid = rows.column("uuid")
        if uuid.null_count:
            rows = rows.filter(pc.is_valid(uuid))
        return cls.of(
            _ints(rows.column("ledger_id")),
            _ints(rows.column("entry_id")),
            rows.column("uuid"),
            _ints(rows.column("chunk_id")),
            _ints(rows.column("num_chunks_from_msg")),
        )

    def index_of(self, ledger_ids: npt.ArrayLike, entry_ids: npt.ArrayLike) -> Ints:
        """Each position's index among the chunk entries; -1 where it is not one."""
        return match_positions(
            np.asarray(ledger_ids, np.int64),
            np.asarray(entry_ids, np.int64),
            self.ledger_id,
            self.entry_id,
        )

    def message_at(self, ledger_ids: npt.ArrayLike, entry_ids: npt.ArrayLike) -> Ints:
        """Each position's message; -1 where it is not a chunk."""
        at = self.index_of(ledger_ids, entry_ids)
        return np.where(at >= 0, self.message[np.maximum(at, 0)], -1) if len(self) else at

    def whole(self, ledger_ids: npt.ArrayLike, entry_ids: npt.ArrayLike) -> tuple[Ints, Ints]:
        """The positions of every chunk of each message one of these positions is a chunk of,
        in position order, each once (positions that are no chunk name none)."""
        at = self.index_of(ledger_ids, entry_ids)
        named = np.zeros(self.count, np.bool_)
        named[self.message[at[at >= 0]]] = True
        mine = named[self.message]
        return self.ledger_id[mine], self.entry_id[mine]

    def groups(self, ledger_ids: npt.ArrayLike, entry_ids: npt.ArrayLike) -> Groups:
        """Which of these positions are chunks of one message: per chunked message two or
        more of them are chunks of, their indexes (into the positions), ascending; ordered by
        first index. A position that is no chunk, or its message's only one here, is in none.
        :func:`count_once` counts by them."""
        at = self.message_at(ledger_ids, entry_ids) if len(self) else np.zeros(0, np.int64)
        found: dict[int, list[int]] = {}
        for index in np.flatnonzero(at >= 0).tolist():
            found.setdefault(int(at[index]), []).append(index)
        return tuple(tuple(group) for group in found.values() if len(group) > 1)


def count_once(flags: npt.ArrayLike, groups: Groups) -> int:
    """How many messages the flagged ids are, a chunked message once: ``flags`` has one
    flag per id, ``groups`` says which ids are chunks of one message; a message counts 1
    when any of its chunks is flagged."""
    flagged = np.asarray(flags, np.bool_)
    total = int(np.count_nonzero(flagged))
    if not groups:
        return total
    members = np.fromiter((i for group in groups for i in group), np.int64)
    label = np.repeat(np.arange(len(groups)), [len(group) for group in groups])
    hits = np.bincount(label, weights=flagged[members], minlength=len(groups))
    return total - int(hits.sum()) + int(np.count_nonzero(hits))


def check_groups(groups: object, ids: int) -> Groups:
    """``groups`` as read from a plan's JSON, in the one spelling :meth:`ChunkedMessages.groups`
    gives (lists of two or more ascending indexes below ``ids``, no index twice, ordered by
    first index); ValueError naming what is wrong otherwise."""
    if not isinstance(groups, list):
        raise ValueError("chunked messages must be a list")
    out: list[tuple[int, ...]] = []
    seen: set[int] = set()
    for n, group in enumerate(groups):
        if (
            not isinstance(group, list)
            or len(group) < 2
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in group)
        ):
            raise ValueError(f"chunked message {n} must be a list of two or more indexes")
        if any(i < 0 or i >= ids for i in group):
            raise ValueError(f"chunked message {n} names an index outside 0..{ids - 1}")
        if any(b <= a for a, b in zip(group, group[1:], strict=False)):
            raise ValueError(f"chunked message {n}: indexes must be ascending")
        if seen.intersection(group):
            raise ValueError(f"chunked message {n} names an id of another one")
        if out and group[0] < out[-1][0]:
            raise ValueError("chunked messages must be ordered by their first index")
        seen.update(group)
        out.append(tuple(group))
    return tuple(out)


def chunk_rest(chunk_id: npt.ArrayLike, num_chunks: npt.ArrayLike) -> Flags:
    """Per entry, whether it is a chunk before its message's last (a chunk id of -1 and 0
    chunks, what nulls are read as, are no chunk): such an entry counts 0, and its
    message counts once, at its last chunk."""
    chunks = np.asarray(num_chunks, dtype=np.int64)
    return (chunks > 1) & (np.asarray(chunk_id, dtype=np.int64) < chunks - 1)


def _ints(column: pa.Array | pa.ChunkedArray) -> Ints:
    """A column of chunk rows (no nulls there) as int64."""
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)


__all__ = [
    "CHUNK_COLUMNS",
    "ChunkedMessages",
    "Groups",
    "check_groups",
    "chunk_rest",
    "count_once",
]

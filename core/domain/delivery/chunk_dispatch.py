"""A dispatch's chunked messages: which rows go together, which wait, which are passed over.

A chunked message goes to one consumer, all its unacknowledged chunks in one
dispatch and in position order, or not at all (:mod:`cursorops.core.domain.ids.chunked_messages`
says which rows are one message). Per message read in a dispatch:

- *complete* (its last chunk is stored, read here or earlier in the dispatch):
  its chunks go together, unless one of them is held by a consumer (it waits
  for it to be released: never half of it to someone else);
- *incomplete*, its producer still sending it: it waits, and the read position
  stops before it, as for any message that may not go yet;
- *abandoned*: incomplete, and its producer has gone on to another message (a
  producer sends a message's chunks before its next message, so the rest never
  comes): it is no message, never delivered, and passed over like an
  acknowledged one, so that it does not hold the read position back forever.

Pure: one record batch of a partition (rows in position order) in, row masks
out. The dispatcher reads on until no message of the batch is incomplete and
undecided (:func:`undecided`), so every message is judged whole.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cursorops.core.domain.ids.chunked_messages import ChunkedMessages

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ChunkVerdicts:
    """Per row of a record batch; rows that are no chunk are False / -1 throughout."""

    passed: Flags
    """A chunk of an abandoned message: never a candidate."""
    waiting: Flags
    """A chunk of a message that may not go now (incomplete, or a chunk held)."""
    leader: Ints
    """For a chunk of a message that may go: the row of its first chunk to deliver (its
    own row for that one); -1 otherwise."""
    completed: frozenset[str]
    """The uuids of the messages complete in these rows."""


def _messages(
    batch: pa.RecordBatch, completed: Set[str]
) -> tuple[ChunkedMessages, Ints, list[str], Flags, Flags]:
    """The batch's chunked messages, each chunk row's message (-1: no chunk), each
    message's uuid, and per message whether it is complete and whether it is abandoned."""
    chunks = ChunkedMessages.of_rows(batch)
    ledger = np.asarray(batch.column("ledger_id").to_numpy(), np.int64)
    entry = np.asarray(batch.column("entry_id").to_numpy(), np.int64)
    message = chunks.message_at(ledger, entry)
    uuids: list[str] = [""] * chunks.count
    names = batch.column("uuid").to_pylist()
    for row in np.flatnonzero(message >= 0).tolist():
        uuids[int(message[row])] = names[row]
    complete = chunks.complete | np.fromiter(
        (u in completed for u in uuids), np.bool_, chunks.count
    )
    abandoned = np.zeros(chunks.count, np.bool_)
    if not complete.all():
        producers = batch.column("producer_name").to_pylist()
        for m in np.flatnonzero(~complete).tolist():
            rows = np.flatnonzero(message == m)
            last, producer = int(rows[-1]), producers[int(rows[-1])]
            abandoned[m] = any(
                producers[row] == producer and names[row] != uuids[m]
                for row in range(last + 1, len(names))
            )
    return chunks, message, uuids, complete, abandoned


def undecided(batch: pa.RecordBatch, completed: Set[str]) -> bool:
    """Whether a chunked message of ``batch`` may still be completed by rows after it:
    the dispatcher reads on before judging."""
    if batch.column("uuid").null_count == batch.num_rows:
        return False
    _, _, _, complete, abandoned = _messages(batch, completed)
    return bool((~complete & ~abandoned).any())


def judge_chunks(
    batch: pa.RecordBatch, live: Flags, held: Flags, completed: Set[str]
) -> ChunkVerdicts | None:
    """The chunked messages of ``batch`` (``live``: rows not acknowledged; ``held``: rows
    pending at a consumer; ``completed``: uuids completed earlier in the dispatch); None
    when the batch holds no chunk."""
    if batch.column("uuid").null_count == batch.num_rows:
        return None
    chunks, message, uuids, complete, abandoned = _messages(batch, completed)
    chunk = message >= 0
    of = np.where(chunk, message, 0)
    held_any = np.zeros(chunks.count, np.bool_)
    held_any[message[chunk & live & held]] = True
    goes = complete & ~held_any
    passed = chunk & abandoned[of]
    waiting = chunk & ~passed & ~goes[of]
    leader = np.full(len(message), -1, np.int64)
    free = np.flatnonzero(chunk & goes[of] & live & ~held)
    if free.size:
        first = np.full(chunks.count, len(message), np.int64)
        np.minimum.at(first, message[free], free)
        leader[free] = first[message[free]]
    done = frozenset(u for u, c in zip(uuids, complete.tolist(), strict=True) if c)
    return ChunkVerdicts(passed, waiting, leader, done)


__all__ = ["ChunkVerdicts", "judge_chunks", "undecided"]

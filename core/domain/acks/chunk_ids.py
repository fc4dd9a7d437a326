"""A chunked message is one message: a skip of any of its chunks skips them all.

Pulsar stores a message larger than the maximum message size as chunks, one
entry each, which the client joins; the id a client prints for it may be any
of them. Skipping one chunk and not the others would leave a message no
consumer can assemble, so the ids of a skip grow to every chunk of each
chunked message they name (:class:`~cursorops.core.domain.ids.chunked_messages.ChunkedMessages`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from cursorops.core.domain.acks.skip import IdArrays, SkipLookup
from cursorops.core.domain.ids.chunked_messages import ChunkedMessages


def whole_chunked_messages(
    ids: IdArrays,
    owners: Mapping[int, tuple[str, int]],
    facts: Mapping[str, SkipLookup],
    chunks_of: Callable[[str], ChunkedMessages],
) -> IdArrays:
    """``ids`` and, after them, the other chunks of each chunked message they name (each
    once, not already among ``ids``, in position order per partition).

    ``chunks_of(partition)``: the partition's chunked messages; read only for a
    partition that holds one.
    """
    ledgers, entries, partitions = [], [], []
    asked = set(zip(ids.ledger_ids.tolist(), ids.entry_ids.tolist(), strict=True))
    for name, lookup in facts.items():
        if lookup.chunk_rest is None:
            continue
        mine = np.fromiter(
            (owners.get(ledger, ("", -1))[0] == name for ledger in ids.ledger_ids.tolist()),
            np.bool_,
            len(ids.ledger_ids),
        )
        if not mine.any():
            continue
        chunks = chunks_of(name)
        named = chunks.index_of(ids.ledger_ids[mine], ids.entry_ids[mine])
        if not (named >= 0).any():
            continue
        partition = int(ids.partitions[mine][named >= 0][0])
        for ledger, entry in zip(
            *(a.tolist() for a in chunks.whole(ids.ledger_ids[mine], ids.entry_ids[mine])),
            strict=True,
        ):
            if (ledger, entry) not in asked:
                asked.add((ledger, entry))
                ledgers.append(ledger)
                entries.append(entry)
                partitions.append(partition)
    if not ledgers:
        return ids
    return IdArrays(
        np.concatenate([ids.ledger_ids, np.asarray(ledgers, np.int64)]),
        np.concatenate([ids.entry_ids, np.asarray(entries, np.int64)]),
        np.concatenate([ids.partitions, np.asarray(partitions, np.int64)]),
        np.concatenate([ids.batch_indexes, np.full(len(ledgers), -1, np.int64)]),
    )

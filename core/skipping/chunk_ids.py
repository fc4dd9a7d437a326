"""A chunked message is one message: a skip of any of its chunks skips them all.

Pulsar stores a message larger than the maximum message size as chunks, one
entry each, which the client joins; the id a client prints for it may be any
of them. Skipping one chunk and not the others would leave a message no
consumer can assemble, so the ids of a skip grow to every chunk of each
chunked message they name (found by the chunks' ``uuid``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa

from core.skipping.skip import IdArrays, SkipLookup


def whole_chunked_messages(
    ids: IdArrays,
    owners: Mapping[int, tuple[str, int]],
    facts: Mapping[str, SkipLookup],
    chunks_of: Callable[[str], pa.Table],
) -> IdArrays:
    """``ids`` and, after them, the other chunks of each chunked message they name (each
    once, not already among ``ids``).

    ``chunks_of(partition)``: the ``ledger_id``, ``entry_id`` and ``uuid`` of the
    partition's chunks; read only for a partition that holds a chunked message.
    """
    ledgers, entries, partitions = [], [], []
    asked = set(zip(ids.ledger_ids.tolist(), ids.entry_ids.tolist(), strict=True))
    added: set[tuple[int, int]] = set()
    for name, lookup in facts.items():
        if lookup.chunk_rest is None:
            continue
        mine = [
            i
            for i, ledger in enumerate(ids.ledger_ids.tolist())
            if owners.get(ledger, ("", -1))[0] == name
        ]
        if not mine:
            continue
        table = chunks_of(name)
        positions = list(
            zip(
                table.column("ledger_id").to_pylist(),
                table.column("entry_id").to_pylist(),
                strict=True,
            )
        )
        uuids = table.column("uuid").to_pylist()
        of_uuid: dict[str, list[tuple[int, int]]] = {}
        for position, uuid in zip(positions, uuids, strict=True):
            of_uuid.setdefault(uuid, []).append(position)
        uuid_at = dict(zip(positions, uuids, strict=True))
        for i in mine:
            uuid = uuid_at.get((int(ids.ledger_ids[i]), int(ids.entry_ids[i])))
            for sibling in of_uuid.get(uuid, []) if uuid is not None else []:
                if sibling in asked or sibling in added:
                    continue
                added.add(sibling)
                ledgers.append(sibling[0])
                entries.append(sibling[1])
                partitions.append(int(ids.partitions[i]))
    if not ledgers:
        return ids
    return IdArrays(
        np.concatenate([ids.ledger_ids, np.asarray(ledgers, np.int64)]),
        np.concatenate([ids.entry_ids, np.asarray(entries, np.int64)]),
        np.concatenate([ids.partitions, np.asarray(partitions, np.int64)]),
        np.concatenate([ids.batch_indexes, np.full(len(ledgers), -1, np.int64)]),
    )

"""Rows of chunked messages a redrive republishes: which go together, and what is written.

A chunked message is one message (:mod:`cursorops.core.domain.ids.chunked_messages`): a redrive
plans it whole, publishes all its chunks or none, and writes them as their
client sent them, with the redrive's fields in their metadata
(:mod:`cursorops.core.domain.redriven_metadata`). Rows are ledger rows (a partition's,
or several partitions' named in a ``topic_partition`` column), in any order
within a partition.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.chunked_messages import ChunkedMessages, Groups


def _chunked(rows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Per row, its chunked message (numbered across the partitions of ``rows``, which
    name them in ``topic_partition`` or are all of one; -1: not a chunk), and per message
    whether it is complete
    (:class:`~cursorops.core.domain.ids.chunked_messages.ChunkedMessages`)."""
    message = np.full(rows.num_rows, -1, np.int64)
    complete: list[np.ndarray] = []
    uuid = rows.column("uuid")
    if uuid.null_count == rows.num_rows:
        return message, np.zeros(0, np.bool_)
    names = (
        np.asarray(rows.column("topic_partition").to_pylist(), dtype=object)
        if "topic_partition" in rows.column_names
        else np.zeros(rows.num_rows, dtype=object)
    )
    ledgers = np.asarray(rows.column("ledger_id").to_numpy(), np.int64)
    entries = np.asarray(rows.column("entry_id").to_numpy(), np.int64)
    found = 0
    for name in dict.fromkeys(names.tolist()):
        mine = np.flatnonzero(names == name)
        chunks = ChunkedMessages.of_rows(rows.take(pa.array(mine)))
        at = chunks.message_at(ledgers[mine], entries[mine])
        message[mine] = np.where(at >= 0, at + found, -1)
        complete.append(chunks.complete)
        found += chunks.count
    return message, np.concatenate(complete)


def whole_messages(rows: pa.Table, chosen: np.ndarray, *, complete_only: bool = True) -> np.ndarray:
    """``chosen`` (a mask of ``rows``) with each chunked message whole: every chunk of a
    message one of whose chunks is chosen, and (``complete_only``) none of a message whose
    last chunk is not among ``rows``: it is no message yet."""
    message, complete = _chunked(rows)
    chunk = message >= 0
    if not chunk.any():
        return chosen
    taken = np.zeros(complete.size, np.bool_)
    taken[message[chunk & chosen]] = True
    if complete_only:
        taken &= complete
    whole = chosen.copy()
    whole[chunk] = taken[message[chunk]]
    return whole


def groups(rows: pa.Table) -> Groups:
    """Which rows of one partition are chunks of one message
    (:meth:`~cursorops.core.domain.ids.chunked_messages.ChunkedMessages.groups`): a plan's
    ``chunked_messages``."""
    if rows.column("uuid").null_count == rows.num_rows:
        return ()
    return ChunkedMessages.of_rows(rows).groups(
        rows.column("ledger_id").to_numpy(), rows.column("entry_id").to_numpy()
    )


def first_rows(rows: pa.Table) -> np.ndarray:
    """Per row, the row of its chunked message's first chunk among ``rows`` (its own when it
    is not a chunk)."""
    message, complete = _chunked(rows)
    first = np.arange(rows.num_rows, dtype=np.int64)
    chunk = np.flatnonzero(message >= 0)
    if chunk.size:
        start = np.full(complete.size, rows.num_rows, np.int64)
        np.minimum.at(start, message[chunk], chunk)
        first[chunk] = start[message[chunk]]
    return first


def chunk_columns(
    rows: pa.Table,
    first: np.ndarray,
    properties: list[list[tuple[str, str]]],
    producer_name: str,
    uuid_prefix: str,
    at_ms: int,
) -> dict[str, pa.Array]:
    """The columns of the redriven chunks (none when ``rows`` holds no chunk): each chunk's
    place in its message, its payload and its client's metadata as sent, the redrive's
    fields in it (:func:`~cursorops.core.domain.redriven_metadata.redriven_metadata`): its producer
    ``producer_name``, and the
    uuid ``<uuid_prefix>-<at_ms>-<sequence id>`` its message's chunks share."""
    import pyarrow.compute as pc

    from cursorops.core.domain.redriven_metadata import redriven_metadata

    uuid = rows.column("uuid")
    encrypted = rows.column("encrypted").to_pylist()
    if uuid.null_count == rows.num_rows and not any(encrypted):
        return {}
    sent = rows.column("metadata").to_pylist()
    is_chunk = [u is not None for u in uuid.to_pylist()]
    # An encrypted payload cannot be written again from the analysis columns either (the
    # broker never reads it): it goes as sent, as a chunk does.
    chunk = [c or bool(e) for c, e in zip(is_chunk, encrypted, strict=True)]
    uuids = [
        f"{uuid_prefix}-{at_ms}-{int(f)}" if c else None
        for c, f in zip(is_chunk, first.tolist(), strict=True)
    ]
    metadata = [
        redriven_metadata(
            m,
            producer_name=producer_name,
            sequence_id=int(f),
            publish_time=at_ms,
            properties=p,
            uuid=u,
        )
        if c and m is not None
        else None
        for c, m, f, p, u in zip(chunk, sent, first.tolist(), properties, uuids, strict=True)
    ]
    kept = pa.array(chunk)

    def of_chunks(name: str) -> pa.Array:
        column = rows.column(name).combine_chunks()
        return pc.if_else(kept, column, pa.nulls(len(column), column.type))

    return {
        "uuid": pa.array(uuids, pa.string()),
        "metadata": pa.array(metadata, pa.binary()),
        **{
            name: of_chunks(name)
            for name in (
                "chunk_id",
                "num_chunks_from_msg",
                "total_chunk_msg_size",
                "entry_payload",
                "encrypted",
                "encryption_keys",
                "schema_version",
            )
        },
    }


def refuse_sealed_batches(rows: pa.Table, name: str) -> None:
    """Refuse messages of an encrypted batch: their payloads and metadata are sealed in one
    payload the broker cannot read, so no message of it can be published on its own, and the
    whole batch again would repeat the messages already handled."""
    if not rows.num_rows:
        return
    sealed = np.asarray(rows.column("encrypted").to_numpy(zero_copy_only=False), np.bool_)
    batched = np.asarray(rows.column("batch_size").to_numpy(), np.int64) > 0
    found = np.flatnonzero(sealed & batched)
    if found.size:
        first = rows.slice(int(found[0]), 1)
        where = f"{first.column('ledger_id')[0]}:{first.column('entry_id')[0]}"
        raise InvalidArgumentError(
            f"Cannot redrive {found.size} message(s) of an encrypted batch on {name} "
            f"(entry {where}): the broker cannot read them one by one; consume them with "
            "the key, or skip them. Nothing planned"
        )


__all__ = ["chunk_columns", "first_rows", "groups", "refuse_sealed_batches", "whole_messages"]

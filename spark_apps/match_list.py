"""Match lists: the messages find_messages matched, as a Parquet file apply_skip_plan reads.

One row per matched message: where it is (topic partition, ledger, entry, batch
index) and what it looks like (key, publish time, deliver-at, properties, size
and the start of its payload), so a person can review the matches before a
skip plan is made of them. Only the id columns matter to apply; a match list
may also be built from a list of ids (:func:`match_list_from_ids`), with the
preview columns empty. It is not a skip plan
(:class:`cursorops.core.domain.acks.skip_plan.SkipPlan`):
nothing in it is validated until the Broker plans a skip of its ids.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cursorops.core.domain.analysis.topic_scan import MESSAGE_SCHEMA
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.message_id import MessageId

EXCERPT_BYTES = 120
"""Payload bytes in a match list's ``payload_excerpt`` (decoded as UTF-8, bad bytes replaced)."""

MATCH_LIST_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("subscription", pa.string(), nullable=False),
        pa.field("topic_partition", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("ledger_id", pa.int64(), nullable=False),
        pa.field("entry_id", pa.int64(), nullable=False),
        pa.field("batch_index", pa.int32(), nullable=False),
        pa.field("batch_size", pa.int32(), nullable=False),
        pa.field("message_id", pa.string(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("publish_time", pa.int64()),
        pa.field("deliver_at", pa.int64()),
        pa.field("properties", MESSAGE_SCHEMA.field("properties").type),
        pa.field("payload_size", pa.int32()),
        pa.field("payload_excerpt", pa.string()),
        pa.field("uuid", pa.string()),
    ]
)
"""A match list's columns; ``message_id`` is the triplet ``ledger:entry[:batchIndex]``;
``uuid`` names a chunk's message (null when not chunked): a chunked message is one
match however many of its chunks matched, and a plan made of the list takes all its
chunks (:mod:`cursorops.core.domain.acks.chunk_ids`)."""

SORT_KEYS = ("partition", "ledger_id", "entry_id", "batch_index")


def match_list_rows(
    rows: pa.Table | pa.RecordBatch,
    topic: str,
    subscription: str,
    topic_partition: str,
) -> pa.Table:
    """Matched message rows of one topic partition as match-list rows (vectorised)."""
    n = rows.num_rows
    ledger = rows.column("ledger_id")
    entry = rows.column("entry_id")
    batch = rows.column("batch_index")
    triplet = pc.binary_join_element_wise(
        pc.cast(ledger, pa.string()), pc.cast(entry, pa.string()), ":"
    )
    batched = pc.greater_equal(batch, 0)
    with_index = pc.binary_join_element_wise(triplet, pc.cast(batch, pa.string()), ":")
    payload = rows.column("payload")
    excerpt = [
        None if value is None else value[:EXCERPT_BYTES].decode("utf-8", "replace")
        for value in pc.binary_slice(payload, 0, EXCERPT_BYTES).to_pylist()
    ]
    return pa.table(
        {
            "topic": pa.array([topic] * n, pa.string()),
            "subscription": pa.array([subscription] * n, pa.string()),
            "topic_partition": pa.array([topic_partition] * n, pa.string()),
            "partition": rows.column("partition"),
            "ledger_id": ledger,
            "entry_id": entry,
            "batch_index": batch,
            "batch_size": rows.column("batch_size"),
            "message_id": pc.if_else(batched, with_index, triplet),
            "key": rows.column("key"),
            "publish_time": rows.column("publish_time"),
            "deliver_at": rows.column("deliver_at"),
            "properties": rows.column("properties"),
            "payload_size": pc.cast(pc.binary_length(payload), pa.int32()),
            "payload_excerpt": pa.array(excerpt, pa.string()),
            "uuid": rows.column("uuid") if "uuid" in rows.column_names else pa.nulls(n, pa.utf8()),
        },
        schema=MATCH_LIST_SCHEMA,
    )


def matched_messages(matches: pa.Table) -> dict[str, int]:
    """Messages per topic partition of a match list: a row each, but a chunked message
    (one ``uuid`` in a partition) once. A list written without ``uuid`` counts rows."""
    import pyarrow.compute as pc

    partitions = matches.column("topic_partition")
    if "uuid" not in matches.column_names:
        return dict(Counter(partitions.to_pylist()))
    uuid = matches.column("uuid")
    plain = Counter(partitions.filter(pc.is_null(uuid)).to_pylist())
    chunked = Counter(
        name
        for name, _ in set(
            zip(
                partitions.filter(pc.is_valid(uuid)).to_pylist(),
                uuid.drop_null().to_pylist(),
                strict=True,
            )
        )
    )
    return dict(plain + chunked)


def match_list_from_ids(topic: str, subscription: str, ids: Sequence[MessageId]) -> pa.Table:
    """A match list of bare ids: partition and preview unknown (-1 / null) until validated."""
    n = len(ids)
    ledger = np.array([m.ledger_id for m in ids], dtype=np.int64)
    entry = np.array([m.entry_id for m in ids], dtype=np.int64)
    batch = np.array([m.batch_index for m in ids], dtype=np.int32)
    return pa.table(
        {
            "topic": pa.array([topic] * n, pa.string()),
            "subscription": pa.array([subscription] * n, pa.string()),
            "topic_partition": pa.array([""] * n, pa.string()),
            "partition": pa.array([m.partition for m in ids], pa.int32()),
            "ledger_id": ledger,
            "entry_id": entry,
            "batch_index": batch,
            "batch_size": pa.array([m.batch_size for m in ids], pa.int32()),
            "message_id": pa.array([m.triplet() for m in ids], pa.string()),
            "key": pa.nulls(n, pa.string()),
            "publish_time": pa.nulls(n, pa.int64()),
            "deliver_at": pa.nulls(n, pa.int64()),
            "properties": pa.nulls(n, MATCH_LIST_SCHEMA.field("properties").type),
            "payload_size": pa.nulls(n, pa.int32()),
            "payload_excerpt": pa.nulls(n, pa.string()),
            "uuid": pa.nulls(n, pa.string()),
        },
        schema=MATCH_LIST_SCHEMA,
    )


def read_match_list(path: str) -> pa.Table:
    """A match list written by find_messages (a Parquet file, or Spark's folder of part files)."""
    if not os.path.exists(path):
        raise InvalidArgumentError(f"Invalid match list {path}: no such file or folder")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise InvalidArgumentError(
            f"Invalid match list {path}: not a readable Parquet match list: {exc}"
        ) from exc
    missing = [
        name
        for name in ("topic", "ledger_id", "entry_id", "batch_index")
        if name not in table.column_names
    ]
    if missing:
        raise InvalidArgumentError(
            f"Invalid match list {path}: missing column(s) {', '.join(missing)}"
        )
    return table


def match_list_ids(matches: pa.Table) -> list[MessageId]:
    """The message ids of a match list (partition left to validation, which routes by ledger)."""
    ledger = matches.column("ledger_id").to_pylist()
    entry = matches.column("entry_id").to_pylist()
    batch = matches.column("batch_index").to_pylist()
    if any(value is None for column in (ledger, entry, batch) for value in column):
        raise InvalidArgumentError(
            "Invalid match list: a ledger_id, entry_id or batch_index is null"
        )
    return [
        MessageId(lid, eid, -1, bid) for lid, eid, bid in zip(ledger, entry, batch, strict=True)
    ]

"""The ledger's message row: one row per message, as the ledger store writes it and as
analysis, the predicates, the Spark jobs and users' own SQL read it.

A value of the domain, not of the store: what a message row holds is the contract the
readers share (the backlog as a relation), and the store is one of them
(:mod:`cursorops.core.store.ledger` writes and reads segments of this schema).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["MESSAGE_SCHEMA"]

MESSAGE_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("ledger_id", pa.int64(), nullable=False),
        pa.field("entry_id", pa.int64(), nullable=False),
        pa.field("batch_index", pa.int32(), nullable=False),
        pa.field("batch_size", pa.int32(), nullable=False),
        pa.field("publish_time", pa.int64(), nullable=False),
        pa.field("deliver_at", pa.int64(), nullable=True),
        pa.field("key", pa.string(), nullable=True),
        pa.field("properties", pa.map_(pa.string(), pa.string()), nullable=False),
        pa.field("payload", pa.binary(), nullable=False),
        pa.field("producer_name", pa.string(), nullable=False),
        pa.field("sequence_id", pa.int64(), nullable=False),
        pa.field("event_time", pa.int64(), nullable=True),
        pa.field("ordering_key", pa.binary(), nullable=True),
        pa.field("null_value", pa.bool_(), nullable=True),
        pa.field("encrypted", pa.bool_(), nullable=True),
        pa.field("encryption_keys", pa.list_(pa.string()), nullable=True),
        pa.field("uuid", pa.string(), nullable=True),
        pa.field("chunk_id", pa.int32(), nullable=True),
        pa.field("num_chunks_from_msg", pa.int32(), nullable=True),
        pa.field("total_chunk_msg_size", pa.int64(), nullable=True),
        pa.field("schema_version", pa.binary(), nullable=True),
        pa.field("metadata", pa.binary(), nullable=True),
        pa.field("entry_payload", pa.binary(), nullable=True),
        pa.field("single_metadata", pa.binary(), nullable=True),
    ]
)
"""One row per message; ``partition`` -1 for a non-partitioned topic; ``batch_index``
-1 and ``batch_size`` 0 for an entry that is not batched; ``deliver_at`` null when
the message is not delayed; ``event_time`` (epoch ms, the producer's) and
``ordering_key`` (Pulsar's Key_Shared ordering key, bytes) null when the producer
set none.

Entries a client sent over the binary protocol also keep what it sent, verbatim:
``metadata`` (its ``MessageMetadata`` bytes, on the entry's first row only, null on
the others), ``single_metadata`` (a batched message's ``SingleMessageMetadata``
bytes) and ``entry_payload`` (the entry's payload as sent, on the first row, only
when it cannot be rebuilt from ``single_metadata`` and ``payload``: compressed,
encrypted or a chunk). The other columns are what analysis reads: ``payload`` is
the message's own bytes, decompressed, and empty when the broker cannot read it
(``encrypted``, with the names of its ``encryption_keys``; or a compressed chunk);
``null_value`` marks a message sent as a null value; ``uuid``, ``chunk_id``,
``num_chunks_from_msg`` and ``total_chunk_msg_size`` are a chunk's place in its
message (null when not chunked); ``schema_version`` the producer's. All null in
segments written before they existed and for entries not built by a client.

A segment's file holds only the later columns
(:data:`cursorops.core.store.ledger.LATER_COLUMNS`) that have a value on one of its rows;
every reader reads one the file lacks as null."""

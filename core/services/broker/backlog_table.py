"""The backlog as a table: one row per unacknowledged message of a subscription
(:mod:`cursorops.core.domain.analysis.backlog_rows`), and users' SQL over it
(:mod:`cursorops.core.services.broker.backlog_sql`).

The rows come from the dispatcher's read path (:func:`cursorops.core.services.reading.
dispatch.unacknowledged`, what a peek reads), the chunked messages from the entry index
analyze-backlog counts by, the holders and redelivery counts from the subscription's
pending runs: no second reading of the cursor.

Authorized as GET_STATS, as the exact backlog in topic stats and the backlog ages are:
a produce-only role reads the metadata, positions and states. The content columns need
PEEK_MESSAGES (:func:`cursorops.core.domain.content.may_read`); for anyone else they are
null.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.analysis import backlog_rows
from cursorops.core.domain.analysis.backlog_rows import BacklogSnapshot, PartitionMark
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.content import may_read
from cursorops.core.domain.ids.position_match import match_positions
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker.backlog_sql import (
    DEFAULT_ROW_LIMIT,
    check_limit,
    checked,
)
from cursorops.core.services.broker.backlog_sql import run as run_sql
from cursorops.core.services.broker.context import BrokerContext, Collaborator
from cursorops.core.services.broker.read import Reading
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.pending_runs import HeldRun
from cursorops.core.store.values import SubscriptionInfo

# The read path and Arrow's compute functions load on the first relation read, not with
# the Broker (as in cursorops.core.services.broker.read).
if TYPE_CHECKING:
    from cursorops.core.services.reading.message import MessageBatch


@dataclass(frozen=True)
class BacklogRelation:
    """The backlog at one snapshot: its rows, and whether their content is shown."""

    table: pa.Table
    snapshot: BacklogSnapshot
    content: bool
    """False: the content columns are null (the reader may not peek)."""


@dataclass(frozen=True)
class BacklogQueryResult:
    """A query's rows over a relation, and what the relation was read at."""

    table: pa.Table
    truncated: bool
    limit: int
    snapshot: BacklogSnapshot
    content: bool


@dataclass(frozen=True)
class _Pending:
    """One partition's pending messages: what each is held by (or None), its count."""

    ledger: np.ndarray
    entry: np.ndarray
    index: np.ndarray
    redelivery: np.ndarray
    holder: list[str | None]


class BacklogTable(Collaborator):
    """The backlog relation of a subscription, and SQL over it. Reads only."""

    def __init__(self, context: BrokerContext, reading: Reading) -> None:
        super().__init__(context)
        self.reading = reading

    def relation(self, role: str, topic: str | TopicName, subscription: str) -> BacklogRelation:
        """Every message of ``subscription`` not acknowledged now, one row each
        (:data:`~cursorops.core.domain.analysis.backlog_rows.BACKLOG_SCHEMA`).

        Cost: per partition, one read from its mark-delete position on (the backlog's
        segments, every column), its cursor and ledger list, and where it has chunked
        messages its entry index and its chunks' payloads; one read of the pending runs;
        per message, its id built in Python in its three forms.
        """
        from cursorops.core.services.reading import dispatch

        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        sub = self.metadata.get_subscription(info.name, subscription)
        content = may_read(self.access.authorized_topic, role, [info.name])
        as_of = self.clock()
        pending = self._pending(self.metadata.pending_holders(info.name, subscription), as_of)
        marks: list[PartitionMark] = []
        parts: list[pa.Table] = []
        for source in self.reading.sources(info):
            name = source.topic_partition
            layout = self.context.layout(name)
            record = self.metadata.load_cursor(name, subscription)
            last = layout.last_position
            marks.append(PartitionMark(name, record.version, f"{last.ledger_id}:{last.entry_id}"))
            batch = dispatch.unacknowledged(source, replay(record, layout))
            parts.append(self._rows(name, batch, layout, sub, pending.get(name), as_of))
        table = pa.concat_tables(parts) if parts else backlog_rows.BACKLOG_SCHEMA.empty_table()
        snapshot = BacklogSnapshot(
            info.name,
            subscription,
            as_of,
            tuple(marks),
            backlog_rows.pending_digest(_pending_messages(pending)),
            backlog_rows.delayed_digest(table.column("state").to_pylist()),
        )
        return BacklogRelation(table if content else backlog_rows.masked(table), snapshot, content)

    def query(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        sql: str,
        limit: int = DEFAULT_ROW_LIMIT,
    ) -> BacklogQueryResult:
        """``sql`` over the subscription's backlog relation as the view ``backlog``, on an
        embedded DuckDB that reads nothing else (:mod:`~cursorops.core.services.broker.
        backlog_sql`); at most ``limit`` rows. Authorized as :meth:`relation`; the SQL and
        the limit are checked before anything is read."""
        self.access.authorized_topic(role, Operation.GET_STATS, topic)
        check_limit(limit)
        checked(sql)
        relation = self.relation(role, topic, subscription)
        answer = run_sql(relation.table, sql, limit)
        return BacklogQueryResult(
            answer.table, answer.truncated, limit, relation.snapshot, relation.content
        )

    def _pending(self, runs: Iterable[HeldRun], as_of: int) -> dict[str, _Pending]:
        """Each partition's pending messages; a run whose holder's lease lapsed is released
        (the next dispatch releases it, without counting a redelivery)."""
        found: dict[str, list[tuple[HeldRun, str | None]]] = {}
        for run in runs:
            live = run.holder is not None and (run.lease_expires_ms or 0) > as_of
            found.setdefault(run.topic_partition, []).append((run, run.holder if live else None))
        out = {}
        for name, held in found.items():
            members = [run.members for run, _ in held]
            out[name] = _Pending(
                np.concatenate([m.ledger for m in members]),
                np.concatenate([m.entry for m in members]),
                np.concatenate([m.index for m in members]),
                np.concatenate([m.redelivery for m in members]),
                [holder for run, holder in held for _ in range(len(run.members))],
            )
        return out

    def _rows(
        self,
        name: str,
        batch: MessageBatch,
        layout: LedgerLayout,
        sub: SubscriptionInfo,
        pending: _Pending | None,
        as_of: int,
    ) -> pa.Table:
        """One partition's rows: the messages read, cut at the last entry the snapshot
        names, a chunked message kept at its last chunk only."""
        import pyarrow.compute as pc

        last = layout.last_position
        ledger, entry = batch.ledger_id, batch.entry_id
        keep = (ledger < last.ledger_id) | ((ledger == last.ledger_id) & (entry <= last.entry_id))
        columns = batch.columns
        chunked = np.asarray(pc.is_valid(columns.column("uuid")), dtype=np.bool_)
        if chunked.any():
            facts = self.context.entry_arrays(name, layout)
            if facts.chunk_rest is not None:
                at = match_positions(ledger, entry, facts.ledger_ids, facts.entry_ids)
                rest = np.zeros(len(ledger), np.bool_)
                found = at >= 0
                rest[found] = facts.chunk_rest[at[found]]
                keep &= ~rest
        picked = np.flatnonzero(keep)
        if len(picked) < len(batch):
            batch = _take(batch, picked)
            chunked = chunked[picked]
        count = len(batch)
        redelivery = np.zeros(count, np.int64)
        holders: list[str | None] = [None] * count
        if pending is not None and len(pending.ledger) and count:
            near = np.flatnonzero(
                match_positions(batch.ledger_id, batch.entry_id, pending.ledger, pending.entry) >= 0
            )
            if len(near):
                where = {
                    key: k
                    for k, key in enumerate(
                        zip(
                            pending.ledger.tolist(),
                            pending.entry.tolist(),
                            pending.index.tolist(),
                            strict=True,
                        )
                    )
                }
                for row in near.tolist():
                    k = where.get(
                        (
                            int(batch.ledger_id[row]),
                            int(batch.entry_id[row]),
                            int(batch.batch_index[row]),
                        )
                    )
                    if k is not None:
                        redelivery[row] = pending.redelivery[k]
                        holders[row] = pending.holder[k]
        columns = batch.columns
        deliver = columns.column("deliver_at")
        deliver_at = np.asarray(
            pc.fill_null(deliver, np.iinfo(np.int64).min).to_numpy(zero_copy_only=False),
            dtype=np.int64,
        )
        held = np.fromiter((h is not None for h in holders), np.bool_, count)
        ids = batch.message_ids()
        payload = columns.column("payload")
        if chunked.any():
            payload = self._chunk_payloads(name, batch, chunked)
        encrypted = pc.fill_null(columns.column("encrypted"), False)
        stored = pc.binary_length(pc.coalesce(columns.column("entry_payload"), payload))
        size = pc.if_else(
            pc.is_valid(columns.column("total_chunk_msg_size")),
            columns.column("total_chunk_msg_size"),
            pc.if_else(encrypted, stored, pc.binary_length(payload)),
        )
        data = {
            "topic_partition": pa.array([name] * count, pa.string()),
            "partition": pa.array(batch.partition, pa.int32()),
            "ledger_id": pa.array(batch.ledger_id, pa.int64()),
            "entry_id": pa.array(batch.entry_id, pa.int64()),
            "batch_index": pa.array(batch.batch_index, pa.int32()),
            "batch_size": columns.column("batch_size"),
            "message_id": pa.array([m.client_text() for m in ids], pa.string()),
            "triplet": pa.array([m.triplet() for m in ids], pa.string()),
            "message_id_base64": pa.array([m.to_base64() for m in ids], pa.string()),
            "key": columns.column("key"),
            "ordering_key": columns.column("ordering_key"),
            "properties": columns.column("properties"),
            "publish_time": columns.column("publish_time"),
            "event_time": columns.column("event_time"),
            "deliver_at": deliver,
            "producer_name": columns.column("producer_name"),
            "sequence_id": columns.column("sequence_id"),
            "size": pc.cast(size, pa.int64()),
            "chunks": pc.fill_null(columns.column("num_chunks_from_msg"), 0),
            "encrypted": encrypted,
            "redelivery_count": pa.array(redelivery, pa.int64()),
            "state": pa.array(
                backlog_rows.states(held, deliver_at, as_of, sub.type.honours_delayed_delivery),
                pa.string(),
            ),
            "held_by": pa.array(holders, pa.string()),
            "payload": payload,
        }
        schema = backlog_rows.BACKLOG_SCHEMA
        return pa.table([pc.cast(data[field.name], field.type) for field in schema], schema=schema)

    def _chunk_payloads(self, name: str, batch: MessageBatch, chunked: np.ndarray) -> pa.Array:
        """The payload column with each chunked message's row (its last chunk) holding the
        whole message: its chunks' payloads in chunk order, each chunk the latest stored at
        or before the last one (a producer that started a message again resent it)."""
        import pyarrow.compute as pc

        columns = batch.columns
        uuids = sorted(set(columns.column("uuid").filter(pa.array(chunked)).to_pylist()))
        rows = self.ledgers.read_table(
            TopicName.parse(name),
            columns=["ledger_id", "entry_id", "uuid", "chunk_id", "payload"],
            filter=pc.field("uuid").isin(uuids),
        ).to_pylist()
        rows.sort(key=lambda r: (r["ledger_id"], r["entry_id"]))
        payloads: list[bytes | None] = columns.column("payload").to_pylist()
        uuid_of = columns.column("uuid").to_pylist()
        for row in np.flatnonzero(chunked).tolist():
            at = (int(batch.ledger_id[row]), int(batch.entry_id[row]))
            parts: dict[int, bytes] = {}
            for chunk in rows:
                if chunk["uuid"] == uuid_of[row] and (chunk["ledger_id"], chunk["entry_id"]) <= at:
                    parts[chunk["chunk_id"]] = chunk["payload"] or b""
            payloads[row] = b"".join(parts[k] for k in sorted(parts))
        return pa.array(payloads, pa.binary())


def _take(batch: MessageBatch, rows: np.ndarray) -> MessageBatch:
    """The rows ``rows`` of ``batch``, in that order."""
    from cursorops.core.services.reading.message import MessageBatch

    return MessageBatch(
        batch.topics,
        batch.topic_index[rows],
        batch.partition[rows],
        batch.ledger_id[rows],
        batch.entry_id[rows],
        batch.batch_index[rows],
        batch.redelivery_count[rows],
        batch.columns.take(pa.array(rows, pa.int64())),
        batch.consumer_epoch,
    )


def _pending_messages(
    pending: dict[str, _Pending],
) -> Iterable[tuple[str, int, int, int, int, str | None]]:
    for name, one in pending.items():
        yield from zip(
            [name] * len(one.ledger),
            one.ledger.tolist(),
            one.entry.tolist(),
            one.index.tolist(),
            one.redelivery.tolist(),
            one.holder,
            strict=True,
        )


__all__ = ["BacklogQueryResult", "BacklogRelation", "BacklogTable"]

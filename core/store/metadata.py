"""The metadata store: tenants, namespaces, topics, subscriptions, ledgers, cursors, audit.

SQLAlchemy 2 models over SQLite (the embedded default: one file, WAL mode) or
PostgreSQL (``postgresql+psycopg://``). Every public method is one transaction
and returns plain frozen dataclasses, never ORM objects. Foreign exceptions are
translated in one place, :func:`cursorops.core.store.engine.translated_errors`, around
every :meth:`MetadataStore._session`: a unique-key clash
becomes :class:`~cursorops.core.domain.errors.AlreadyExistsError` where the caller named the
clash, anything else from SQLAlchemy becomes
:class:`~cursorops.core.domain.errors.MetadataStoreError`.

Locking. Writers that must be serialized take a row lock: the topic partition's
row for :meth:`MetadataStore.append_entries`, the cursor's row for the cursor
journal. On PostgreSQL that is ``SELECT ... FOR UPDATE`` (or the ``UPDATE``
itself); SQLite has one writer at a time, so every write transaction starts with
``BEGIN IMMEDIATE`` and waits up to the busy timeout for the write lock.

The tables are in :mod:`cursorops.core.store.tables`, the returned records in
:mod:`cursorops.core.store.values`, engine set-up in :mod:`cursorops.core.store.engine` and argument
checks in :mod:`cursorops.core.store.checks`; this module re-exports their public names.

Cursors are stored as a snapshot plus a journal of deltas (docs/architecture.md,
"Cursor durability"). The payloads are opaque bytes here;
``cursorops.core.domain.acks.cursor_codec`` owns their format.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from cursorops.core.domain.analysis.backlog_audit import BacklogSample
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    MetadataStoreError,
    SubscriptionNotFoundError,
)
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.store import audit_log
from cursorops.core.store.broker_registry import BrokerRegistry, check_fence
from cursorops.core.store.checks import (
    canonical_topic,
    check_bytes,
    check_int,
    check_label,
)
from cursorops.core.store.cursor_door import Hold, journal_sizes, load_record
from cursorops.core.store.cursor_state import missing
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.engine import (
    SQLITE_BUSY_TIMEOUT_S,
    WRITE_OPTION,
    create_store_engine,
    prepare_location,
    translated_errors,
)
from cursorops.core.store.ledger_index import LedgerIndex
from cursorops.core.store.pending_runs import HeldRun, Members
from cursorops.core.store.plan_records import PlanRecords
from cursorops.core.store.request_records import RequestRecords
from cursorops.core.store.schema import ensure_schema
from cursorops.core.store.schema_versions import SchemaVersions
from cursorops.core.store.statements import ConnectionStatements
from cursorops.core.store.tables import (
    AuditRow,
    BacklogHistoryRow,
    Base,
    ConsumerRow,
    CursorDeltaRow,
    CursorRow,
    LedgerRow,
    NamespacePolicyRow,
    NamespaceRow,
    PendingRunRow,
    PermissionRow,
    SegmentRow,
    SubscriptionRow,
    TenantRow,
    TopicPartitionRow,
    TopicRow,
)
from cursorops.core.store.tenancy import Tenancy
from cursorops.core.store.unit_of_work import UnitOfWork
from cursorops.core.store.values import (
    PERMISSION_ACTIONS,
    Allocation,
    AuditEntry,
    AuditRecord,
    CursorRecord,
    LedgerInfo,
    NamespaceInfo,
    SegmentInfo,
    SubscriptionInfo,
    TenantInfo,
    TopicInfo,
)

if TYPE_CHECKING:
    from cursorops.core.store.dispatch_state import SubscriptionTransaction

__all__ = [
    "Allocation",
    "AuditEntry",
    "AuditRecord",
    "AuditRow",
    "BacklogHistoryRow",
    "Base",
    "ConsumerRow",
    "CursorDeltaRow",
    "CursorRecord",
    "CursorRow",
    "LedgerInfo",
    "LedgerRow",
    "MetadataStore",
    "NamespaceInfo",
    "NamespacePolicyRow",
    "NamespaceRow",
    "PERMISSION_ACTIONS",
    "PendingRunRow",
    "PermissionRow",
    "SQLITE_BUSY_TIMEOUT_S",
    "SegmentInfo",
    "SegmentRow",
    "SubscriptionInfo",
    "SubscriptionRow",
    "TenantInfo",
    "TenantRow",
    "TopicInfo",
    "TopicPartitionRow",
    "TopicRow",
]


class MetadataStore(Tenancy, LedgerIndex, SchemaVersions, BrokerRegistry):
    """Tenants, namespaces, topics, subscriptions, ledgers, cursors and the audit log.

    Safe to share between threads; several stores (processes) may use one database.
    """

    def __init__(self, url: str) -> None:
        try:
            parsed = make_url(url)
            self.url = parsed
            self._engine = create_store_engine(parsed)
            self._write_engine = self._engine.execution_options(**{WRITE_OPTION: True})
            try:
                ensure_schema(self._engine, self._write_engine)
            except BaseException:
                self._engine.dispose()
                raise
            self._postgres = self._engine.dialect.name == "postgresql"
            self.plans = PlanRecords(self._session)
            self.requests = RequestRecords(self._session)
        except SQLAlchemyError as exc:
            raise MetadataStoreError(f"Cannot open the metadata store {url!r}: {exc}") from exc

    @classmethod
    def from_config(cls, config: Config) -> MetadataStore:
        """Open the store ``config.metadata_url`` names, creating the SQLite file's folder."""
        prepare_location(config)
        return cls(config.metadata_url)

    def close(self) -> None:
        self.release_life_lock()
        self._engine.dispose()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # Cursors: snapshot + journal, changed only through the cursor door
    # (:meth:`cursor_transaction`, :mod:`cursorops.core.store.cursor_door`).

    @contextmanager
    def transaction(self) -> Iterator[UnitOfWork]:
        """One write transaction the caller composes when it changes no cursor: a plan record
        with its audit records (:class:`~cursorops.core.store.unit_of_work.UnitOfWork`). All of it
        commits when the block ends, or none of it when it raises."""
        with self._session(write=True) as session:
            yield UnitOfWork(session)

    def load_cursor(self, topic_partition: str, subscription: str) -> CursorRecord:
        """The snapshot and every later delta, read consistently (a share lock on PostgreSQL)."""
        name = canonical_topic(topic_partition)
        check_label("subscription name", subscription)
        with self._session(write=False) as session:
            return load_record(ConnectionStatements.of(session), name, subscription)

    def append_cursor_delta(self, topic_partition: str, subscription: str, payload: bytes) -> int:
        """Append one delta to the cursor's journal in a transaction of its own (as
        :meth:`append_cursor_deltas`); durable when it returns.

        Bumps the cursor row's version under its row lock and stores the delta
        under the new version: concurrent writers are serialized and none is
        lost. Returns the new version.
        """
        return self.append_cursor_deltas([(topic_partition, subscription, payload)])[0]

    def append_cursor_deltas(self, items: Sequence[tuple[str, str, bytes]]) -> list[int]:
        """Append one delta to each of several cursors in ONE transaction: all or none.

        ``items`` are ``(topic_partition, subscription, payload)``, written in the
        lock order of every multi-cursor writer (topic partition, then
        subscription), so two of them cannot deadlock. Returns the new versions,
        in order. A cursor move no approval stands behind: refused (ApprovalRequiredError,
        audited) where the namespace requires approval.
        """
        checked = [
            (
                canonical_topic(tp),
                check_label("subscription name", sub),
                check_bytes("cursor delta", payload),
            )
            for tp, sub, payload in items
        ]
        order = sorted(range(len(checked)), key=lambda i: checked[i][:2])
        held = sorted({(str(TopicName.parse(tp).base), sub) for tp, sub, _ in checked})
        versions = [0] * len(checked)
        with self.cursor_transaction() as work:
            for topic, subscription in held:
                work.lock(topic, subscription, Hold.MOVE)
            for i in order:
                name, subscription, data = checked[i]
                version = work.append_to(
                    name, subscription, [data], ticket=Ticket.ungated("a cursor delta")
                )
                if version is None:
                    raise missing(name, subscription)
                versions[i] = version
        return versions

    def compact_cursor(
        self, topic_partition: str, subscription: str, snapshot: bytes, through_version: int
    ) -> None:
        """Store ``snapshot`` as the state as of ``through_version`` and drop the deltas it covers.

        Runs under the cursor's row lock; deltas after ``through_version`` stay. A
        snapshot older than the stored one is ignored: the stored one already
        includes everything it has. The snapshot given replaces the cursor's state: refused
        where the namespace requires approval, as any cursor move without one is.
        """
        name = canonical_topic(topic_partition)
        check_label("subscription name", subscription)
        data = check_bytes("cursor snapshot", snapshot)
        check_int("through_version", through_version, 0)
        with self.cursor_transaction() as work:
            work.lock(str(TopicName.parse(name).base), subscription, Hold.MOVE)
            work.compact(
                name,
                subscription,
                data,
                through_version,
                ticket=Ticket.ungated("a cursor's snapshot replaced"),
            )

    def cursor_sizes(self, topic_partition: str, subscription: str) -> tuple[int, int]:
        """``(snapshot bytes, total bytes of the journal's deltas)``."""
        name = canonical_topic(topic_partition)
        check_label("subscription name", subscription)
        with self._session(write=False) as session:
            return journal_sizes(ConnectionStatements.of(session), name, subscription)

    # The dispatcher's shared state: consumers and pending acknowledgements.

    @contextmanager
    def subscription_transaction(
        self, topic: str, subscription: str, now_ms: int, *, flushed: bool = True
    ) -> Iterator[SubscriptionTransaction]:
        """One write transaction holding the subscription's row lock.

        Every dispatch, acknowledgement and consumer change of the subscription
        runs inside one, from whichever process: they are serialized, and an
        acknowledgement's cursor delta commits with the removal of its pending
        entries, or neither does. Lock order: the subscription row, then cursor rows.
        A DBAPI connection of the write pool, not an ORM session: every statement
        of the transaction runs on its cursor (a dispatch is mostly this fixed cost).
        ``flushed`` False: the commit does not wait for the disk
        (:func:`~cursorops.core.store.dispatch_state.locked_transaction`).
        """
        from cursorops.core.store.dispatch_state import locked_transaction

        topic_name = canonical_topic(topic)
        check_label("subscription name", subscription)
        with translated_errors():
            raw = self._write_engine.raw_connection()
        try:
            with locked_transaction(
                raw, self._engine.dialect, topic_name, subscription, now_ms, flushed=flushed
            ) as txn:
                if self.fence is not None:
                    check_fence(txn.statements, self.fence)
                yield txn
        finally:
            raw.close()

    def pending_members(self, topic: str, subscription: str) -> dict[str, Members]:
        """The subscription's pending messages (held or released) per topic partition,
        with their redelivery counts (bumps applied).

        A plain read, no lock: a snapshot, which the next dispatch or acknowledgement
        may change. One statement; the runs are decoded as arrays.
        """
        from sqlalchemy import select

        from cursorops.core.store import pending_runs

        topic_name = canonical_topic(topic)
        check_label("subscription name", subscription)
        query = (
            select(
                PendingRunRow.topic_partition,
                PendingRunRow.ledger_id,
                PendingRunRow.bumps,
                PendingRunRow.members,
            )
            .join(SubscriptionRow, SubscriptionRow.id == PendingRunRow.subscription_id)
            .where(SubscriptionRow.topic == topic_name, SubscriptionRow.name == subscription)
        )
        parts: dict[str, list[Members]] = {}
        with self._session(write=False) as session:
            for partition, ledger, bumps, blob in session.execute(query):
                parts.setdefault(partition, []).append(pending_runs.decode(ledger, blob, bumps))
        return {name: Members.concat(found) for name, found in parts.items()}

    def pending_holders(self, topic: str, subscription: str) -> list[HeldRun]:
        """The subscription's pending runs with the name and lease of the consumer holding
        each (None for a released run): :meth:`pending_members` with who holds what.

        A plain read, no lock: a snapshot, as :meth:`pending_members`. One statement.
        """
        from sqlalchemy import and_, select

        from cursorops.core.store import pending_runs

        topic_name = canonical_topic(topic)
        check_label("subscription name", subscription)
        query = (
            select(
                PendingRunRow.topic_partition,
                PendingRunRow.ledger_id,
                PendingRunRow.bumps,
                PendingRunRow.members,
                PendingRunRow.consumer_id,
                ConsumerRow.name,
                ConsumerRow.lease_expires_ms,
            )
            .join(SubscriptionRow, SubscriptionRow.id == PendingRunRow.subscription_id)
            .outerjoin(
                ConsumerRow,
                and_(
                    ConsumerRow.subscription_id == PendingRunRow.subscription_id,
                    ConsumerRow.consumer_id == PendingRunRow.consumer_id,
                ),
            )
            .where(SubscriptionRow.topic == topic_name, SubscriptionRow.name == subscription)
        )
        with self._session(write=False) as session:
            return [
                pending_runs.HeldRun(
                    partition,
                    pending_runs.decode(ledger, blob, bumps),
                    None if consumer is None else (name or consumer),
                    None if consumer is None else lease,
                )
                for partition, ledger, bumps, blob, consumer, name, lease in session.execute(query)
            ]

    def consumer_acks(self, topic: str, subscription: str) -> dict[str, tuple[int, int, int]]:
        """The highest message (ledger, entry, batch index) a consumer acknowledged on each
        of the subscription's cursors: raised with every acknowledgement through the
        dispatcher, never by a skip, undo or redrive, cleared by a reset. A cursor with none
        known (nothing acknowledged by a consumer since it was created, reset or migrated)
        is left out. A plain read, no lock: a snapshot."""
        from sqlalchemy import select

        topic_name = canonical_topic(topic)
        check_label("subscription name", subscription)
        query = (
            select(
                CursorRow.topic_partition,
                CursorRow.consumer_ack_ledger_id,
                CursorRow.consumer_ack_entry_id,
                CursorRow.consumer_ack_batch_index,
            )
            .join(SubscriptionRow, SubscriptionRow.id == CursorRow.subscription_id)
            .where(
                SubscriptionRow.topic == topic_name,
                SubscriptionRow.name == subscription,
                CursorRow.consumer_ack_ledger_id.is_not(None),
            )
        )
        found: dict[str, tuple[int, int, int]] = {}
        with self._session(write=False) as session:
            for partition, ledger, entry, index in session.execute(query):
                # The three are set together: a row with a ledger has the other two.
                assert ledger is not None and entry is not None and index is not None
                found[str(partition)] = (int(ledger), int(entry), int(index))
        return found

    def release_consumers_with_prefix(self, prefix: str, now_ms: int) -> int:
        """Remove every registered consumer whose id starts with ``prefix``, in any
        subscription, releasing what each held (as a lapsed lease would, redelivery counts
        unchanged); how many.

        Each subscription's consumers go in that subscription's locked transaction.
        A consumer a live process registers meanwhile under another prefix is untouched.
        """
        from sqlalchemy import func, select

        from cursorops.core.domain.delivery.redelivery import Release

        check_label("consumer id prefix", prefix)
        query = (
            select(SubscriptionRow.topic, SubscriptionRow.name, ConsumerRow.consumer_id)
            .join(SubscriptionRow, SubscriptionRow.id == ConsumerRow.subscription_id)
            .where(func.substr(ConsumerRow.consumer_id, 1, len(prefix)) == prefix)
        )
        with self._session(write=False) as session:
            found = [(str(t), str(s), str(c)) for t, s, c in session.execute(query)]
        by_subscription: dict[tuple[str, str], list[str]] = {}
        for topic, subscription, consumer_id in found:
            by_subscription.setdefault((topic, subscription), []).append(consumer_id)
        released = 0
        for (topic, subscription), consumer_ids in sorted(by_subscription.items()):
            try:
                with self.subscription_transaction(topic, subscription, now_ms) as txn:
                    for consumer_id in consumer_ids:
                        txn.remove_consumer(consumer_id, Release.PROCESS_GONE)
                        released += 1
            except SubscriptionNotFoundError:
                continue
        return released

    # Audit log and backlog history (:mod:`cursorops.core.store.audit_log`).

    def record_audit(
        self,
        kind: str,
        topic: str,
        subscription: str | None,
        role: str,
        detail: Mapping[str, object],
        at_ms: int,
    ) -> int:
        """Append one audit record (``detail`` must be JSON-serializable); returns its id."""
        entry = AuditEntry(kind, topic, subscription, role, detail, at_ms)
        audit_log.check(entry)
        with self._session(write=True) as session:
            return audit_log.add_many(ConnectionStatements.of(session), [entry])[0]

    def audit_log(
        self,
        topic: str | None = None,
        limit: int | None = 100,
        *,
        kinds: Sequence[str] | None = None,
        subscription: str | None = None,
    ) -> list[AuditRecord]:
        """The newest ``limit`` records (of one topic, or all; of ``kinds`` only; of one
        subscription only), newest first; ``limit`` None: every one."""
        if limit is not None:
            check_int("limit", limit, 0)
        with self._session(write=False) as session:
            return audit_log.newest(session, topic, limit, kinds, subscription)

    def audit_record(self, audit_id: int) -> AuditRecord | None:
        """One audit record by its id, or None."""
        check_int("audit id", audit_id, 0)
        with self._session(write=False) as session:
            return audit_log.one(session, audit_id)

    def record_backlog_samples(self, run_id: str, samples: Sequence[BacklogSample]) -> int:
        """Insert one row per sample for ``run_id``; rows the run already wrote are kept.

        Returns how many rows were new. All in one transaction.
        """
        audit_log.check_samples(run_id, samples)
        with self._session(write=True) as session:
            return audit_log.add_samples(session, run_id, samples)

    def backlog_samples(
        self,
        topic: str,
        subscription: str | None = None,
        since_ms: int | None = None,
        limit: int = 10_000,
    ) -> list[BacklogSample]:
        """History rows of ``topic`` (one subscription or all), oldest first; the newest
        ``limit`` of them."""
        check_int("limit", limit, 0)
        with self._session(write=False) as session:
            return audit_log.samples(session, topic, subscription, since_ms, limit)

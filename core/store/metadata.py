"""The metadata store: tenants, namespaces, topics, subscriptions, ledgers, cursors, audit.

SQLAlchemy 2 models over SQLite (the embedded default: one file, WAL mode) or
PostgreSQL (``postgresql+psycopg://``). Every public method is one transaction
and returns plain frozen dataclasses, never ORM objects. Foreign exceptions are
translated in one place, :func:`core.store.engine.translated_errors`, around
every :meth:`MetadataStore._session`: a unique-key clash
becomes :class:`~core.errors.AlreadyExistsError` where the caller named the
clash, anything else from SQLAlchemy becomes :class:`~core.errors.MetadataStoreError`.

Locking. Writers that must be serialized take a row lock: the topic partition's
row for :meth:`MetadataStore.append_entries`, the cursor's row for the cursor
journal. On PostgreSQL that is ``SELECT ... FOR UPDATE`` (or the ``UPDATE``
itself); SQLite has one writer at a time, so every write transaction starts with
``BEGIN IMMEDIATE`` and waits up to the busy timeout for the write lock.

The tables are in :mod:`core.store.tables`, the returned records in
:mod:`core.store.records`, engine set-up in :mod:`core.store.engine` and argument
checks in :mod:`core.store.checks`; this module re-exports their public names.

Cursors are stored as a snapshot plus a journal of deltas (docs/architecture.md,
"Cursor durability"). The payloads are opaque bytes here; ``core.cursor_codec``
owns their format.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy import (
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from core.backlog_audit import BacklogSample
from core.config import Config
from core.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidTopicNameError,
    MetadataStoreError,
    NamespaceNotFoundError,
    SubscriptionNotFoundError,
    TenantNotFoundError,
    TopicNotFoundError,
)
from core.plan_record import MAX_APPROVALS, ApprovalPolicy
from core.store import audit_log
from core.store.checks import (
    canonical_topic,
    check_bytes,
    check_int,
    check_label,
    check_name,
    check_roles,
    check_string_map,
    check_text,
    split_namespace,
)
from core.store.cursor_state import ConnectionStatements, CursorStates, missing
from core.store.delta_journal import DeltaJournal
from core.store.engine import (
    SQLITE_BUSY_TIMEOUT_S,
    WRITE_OPTION,
    create_store_engine,
    prepare_location,
    translated_errors,
)
from core.store.group_commit import GroupCommit
from core.store.plan_records import PlanRecords
from core.store.read_view import ReadView, ledger_info, subscription_info
from core.store.records import (
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
from core.store.schema import ensure_schema
from core.store.tables import (
    ApprovalPolicyRow,
    AuditRow,
    BacklogHistoryRow,
    Base,
    ConsumerRow,
    CursorDeltaRow,
    CursorRow,
    LedgerRow,
    NamespacePolicyRow,
    NamespaceRow,
    PendingAckRow,
    PermissionRow,
    SegmentRow,
    SubscriptionRow,
    TenantRow,
    TopicPartitionRow,
    TopicRow,
)
from core.store.unit_of_work import UnitOfWork
from core.subscription import SubscriptionType
from core.topic_name import (
    TopicName,
)

if TYPE_CHECKING:
    from core.store.dispatch_state import SubscriptionTransaction

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
    "PendingAckRow",
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


class MetadataStore:
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
            self._journal = DeltaJournal(self._write_engine, missing)
            self._delta_commits = GroupCommit(self._commit_deltas)
            self.plans = PlanRecords(self._session)
        except SQLAlchemyError as exc:
            raise MetadataStoreError(f"Cannot open the metadata store {url!r}: {exc}") from exc

    @classmethod
    def from_config(cls, config: Config) -> MetadataStore:
        """Open the store ``config.metadata_url`` names, creating the SQLite file's folder."""
        prepare_location(config)
        return cls(config.metadata_url)

    def close(self) -> None:
        self._journal.close()
        self._engine.dispose()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _session(self, *, write: bool, conflict: str | None = None) -> Iterator[Session]:
        """One transaction; the one place SQLAlchemy errors become cursorops errors.

        ``conflict`` is the AlreadyExistsError message for a unique-key clash (a
        concurrent creator won the race). Errors raised by the caller pass through.
        """
        engine = self._write_engine if write else self._engine
        with (
            translated_errors(conflict),
            Session(engine, expire_on_commit=False) as session,
            session.begin(),
        ):
            yield session

    # Tenants and namespaces.

    def create_tenant(self, name: str, admin_roles: Iterable[str] = ()) -> TenantInfo:
        check_name("tenant", name)
        roles = check_roles("admin roles", admin_roles)
        message = f"Tenant '{name}' already exists"
        with self._session(write=True, conflict=message) as session:
            if session.get(TenantRow, name) is not None:
                raise AlreadyExistsError(message)
            session.add(TenantRow(name=name, admin_roles=sorted(roles)))
        return TenantInfo(name, roles)

    def get_tenant(self, name: str) -> TenantInfo:
        check_name("tenant", name)
        with self._session(write=False) as session:
            row = session.get(TenantRow, name)
            if row is None:
                raise TenantNotFoundError(f"Tenant '{name}' not found")
            return TenantInfo(row.name, frozenset(row.admin_roles))

    def list_tenants(self) -> list[str]:
        with self._session(write=False) as session:
            return list(session.scalars(select(TenantRow.name).order_by(TenantRow.name)))

    def create_namespace(self, namespace: str) -> NamespaceInfo:
        """Create ``tenant/namespace``; the tenant must exist."""
        tenant, _ = split_namespace(namespace)
        message = f"Namespace '{namespace}' already exists"
        with self._session(write=True, conflict=message) as session:
            if session.get(TenantRow, tenant) is None:
                raise TenantNotFoundError(f"Tenant '{tenant}' not found")
            if session.get(NamespaceRow, namespace) is not None:
                raise AlreadyExistsError(message)
            session.add(NamespaceRow(name=namespace, tenant=tenant))
        return NamespaceInfo(namespace, {})

    def get_namespace(self, namespace: str) -> NamespaceInfo:
        split_namespace(namespace)
        with self._session(write=False) as session:
            self._require_namespace(session, namespace)
            rows = session.scalars(
                select(PermissionRow).where(PermissionRow.namespace == namespace)
            )
            permissions = {row.role: frozenset(row.actions) for row in rows}
            return NamespaceInfo(namespace, permissions)

    def list_namespaces(self, tenant: str) -> list[str]:
        with self._session(write=False) as session:
            if session.get(TenantRow, tenant) is None:
                raise TenantNotFoundError(f"Tenant '{tenant}' not found")
            query = select(NamespaceRow.name).where(NamespaceRow.tenant == tenant)
            return list(session.scalars(query.order_by(NamespaceRow.name)))

    def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Grant ``actions`` to ``role``, replacing what the role had (like Pulsar)."""
        check_label("role", role)
        if isinstance(actions, str):
            raise InvalidArgumentError(
                f"Invalid actions {actions!r}: expected a collection such as ['consume']"
            )
        wanted = frozenset(actions)
        unknown = wanted - PERMISSION_ACTIONS
        if unknown or not wanted:
            allowed = ", ".join(sorted(PERMISSION_ACTIONS))
            shown = sorted(unknown, key=str) if unknown else "none"
            raise InvalidArgumentError(f"Invalid actions {shown}: grant one or more of {allowed}")
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            row = session.get(PermissionRow, (namespace, role))
            if row is None:
                session.add(PermissionRow(namespace=namespace, role=role, actions=sorted(wanted)))
            else:
                row.actions = sorted(wanted)

    def revoke_permission(self, namespace: str, role: str) -> None:
        """Remove every action granted to ``role``; a role without a grant is a no-op."""
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            session.execute(
                delete(PermissionRow).where(
                    PermissionRow.namespace == namespace, PermissionRow.role == role
                )
            )

    @staticmethod
    def _require_namespace(session: Session, namespace: str) -> None:
        if session.get(NamespaceRow, namespace) is None:
            raise NamespaceNotFoundError(f"Namespace '{namespace}' not found")

    # Topics.

    def create_topic(self, topic: str, partitions: int) -> TopicInfo:
        """Create a topic: ``partitions`` 0 = non-partitioned, else the partition count."""
        name = TopicName.parse(topic)
        if name.is_partition:
            raise InvalidTopicNameError(
                f"Invalid topic name '{name}': a topic name must not name a partition "
                "(-partition-N)"
            )
        check_int("partition count", partitions, 0)
        info = TopicInfo(str(name), partitions)
        message = f"Topic '{info.name}' already exists"
        with self._session(write=True, conflict=message) as session:
            self._require_namespace(session, name.namespace_name)
            if session.get(TopicRow, info.name) is not None:
                raise AlreadyExistsError(message)
            session.add(
                TopicRow(name=info.name, namespace=name.namespace_name, partitions=partitions)
            )
            session.flush()
            session.add_all(
                TopicPartitionRow(name=partition, topic=info.name, partition=index)
                for index, partition in enumerate(info.partition_names())
            )
        return info

    def get_topic(self, topic: str) -> TopicInfo:
        """The topic, with its namespace's approval flag read in the same statement."""
        name = canonical_topic(topic)
        query = (
            select(TopicRow.name, TopicRow.partitions, NamespacePolicyRow.skip_requires_approval)
            .outerjoin(NamespacePolicyRow, NamespacePolicyRow.namespace == TopicRow.namespace)
            .where(TopicRow.name == name)
        )
        with self._session(write=False) as session:
            row = session.execute(query).one_or_none()
        if row is None:
            raise TopicNotFoundError(f"Topic '{name}' not found")
        return TopicInfo(row[0], row[1], approval_required=bool(row[2]))

    def list_topics(self, namespace: str) -> list[TopicInfo]:
        with self._session(write=False) as session:
            self._require_namespace(session, namespace)
            query = select(TopicRow).where(TopicRow.namespace == namespace).order_by(TopicRow.name)
            return [TopicInfo(row.name, row.partitions) for row in session.scalars(query)]

    @staticmethod
    def _require_topic(session: Session, name: str) -> TopicInfo:
        row = session.get(TopicRow, name)
        if row is None:
            raise TopicNotFoundError(f"Topic '{name}' not found")
        return TopicInfo(row.name, row.partitions)

    @staticmethod
    def _require_partition(session: Session, name: str, *, lock: bool) -> None:
        query = select(TopicPartitionRow.name).where(TopicPartitionRow.name == name)
        if lock:
            query = query.with_for_update()
        if session.execute(query).first() is None:
            raise TopicNotFoundError(f"Topic partition '{name}' not found")

    # Subscriptions.

    def create_subscription(
        self,
        topic: str,
        name: str,
        type: SubscriptionType,
        properties: Mapping[str, str],
        initial_snapshots: Mapping[str, bytes],
    ) -> SubscriptionInfo:
        """Create a subscription and its cursor on every partition, in one transaction.

        ``initial_snapshots`` maps each of the topic's partition names
        (:meth:`TopicInfo.partition_names`) to the encoded initial cursor state.
        """
        topic_name = canonical_topic(topic)
        check_label("subscription name", name)
        if not isinstance(type, SubscriptionType):
            type = SubscriptionType.parse(check_text("subscription type", type))
        props = check_string_map("subscription properties", properties)
        if not isinstance(initial_snapshots, Mapping):
            raise InvalidArgumentError("Invalid initial snapshots: expected a mapping")
        snapshots = {
            canonical_topic(partition): check_bytes(f"initial snapshot of {partition}", snapshot)
            for partition, snapshot in initial_snapshots.items()
        }
        message = f"Subscription '{name}' already exists on topic '{topic_name}'"
        with self._session(write=True, conflict=message) as session:
            info = self._require_topic(session, topic_name)
            expected = info.partition_names()
            if sorted(snapshots) != sorted(expected) or len(initial_snapshots) != len(expected):
                raise InvalidArgumentError(
                    f"Initial snapshots must be given for exactly the partitions {expected}, "
                    f"got {sorted(initial_snapshots)}"
                )
            exists = select(SubscriptionRow.id).where(
                SubscriptionRow.topic == topic_name, SubscriptionRow.name == name
            )
            if session.execute(exists).first() is not None:
                raise AlreadyExistsError(message)
            row = SubscriptionRow(topic=topic_name, name=name, type=type.value, properties=props)
            session.add(row)
            session.flush()
            self._cursors(session).create(row.id, {p: snapshots[p] for p in expected})
        return SubscriptionInfo(topic_name, name, type, props)

    def get_subscription(self, topic: str, name: str) -> SubscriptionInfo:
        with self.reading() as view:
            return view.subscription(topic, name)

    def list_subscriptions(self, topic: str) -> list[SubscriptionInfo]:
        topic_name = canonical_topic(topic)
        with self._session(write=False) as session:
            self._require_topic(session, topic_name)
            query = (
                select(SubscriptionRow)
                .where(SubscriptionRow.topic == topic_name)
                .order_by(SubscriptionRow.name)
            )
            return [subscription_info(row) for row in session.scalars(query)]

    def delete_subscription(self, topic: str, name: str) -> None:
        """Delete the subscription with its cursors and their journals."""
        topic_name = canonical_topic(topic)
        check_label("subscription name", name)
        with self._session(write=True) as session:
            result = session.execute(
                delete(SubscriptionRow)
                .where(SubscriptionRow.topic == topic_name, SubscriptionRow.name == name)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount == 0:  # type: ignore[attr-defined]
                raise SubscriptionNotFoundError(
                    f"Subscription '{name}' not found on topic '{topic_name}'"
                )

    def update_subscription_properties(
        self, topic: str, name: str, properties: Mapping[str, str]
    ) -> SubscriptionInfo:
        """Replace the subscription's properties with ``properties`` (empty clears them)."""
        topic_name = canonical_topic(topic)
        check_label("subscription name", name)
        props = check_string_map("subscription properties", properties)
        with self._session(write=True) as session:
            row = session.scalars(
                select(SubscriptionRow)
                .where(SubscriptionRow.topic == topic_name, SubscriptionRow.name == name)
                .with_for_update()
            ).one_or_none()
            if row is None:
                raise SubscriptionNotFoundError(
                    f"Subscription '{name}' not found on topic '{topic_name}'"
                )
            row.properties = props
            return subscription_info(row)

    # Ledgers and segments.

    @contextmanager
    def append_entries(
        self, topic_partition: str, n_entries: int, max_entries_per_ledger: int
    ) -> Iterator[Allocation]:
        """Reserve up to ``n_entries`` entry ids at the end of the partition's current ledger.

        Holds the partition's lock until the ``with`` block ends. ``count`` is the
        room left in the current ledger (a new ledger, with a store-wide unique id,
        is started when it is full or there is none). The caller writes the segment
        file inside the block and sets ``path`` and ``messages``; on normal exit the
        segment is registered and the ledger's counts bumped in the same
        transaction. On an exception nothing is registered.
        """
        with self.append_entries_many([(topic_partition, n_entries)], max_entries_per_ledger) as (
            allocation,
        ):
            yield allocation

    @contextmanager
    def append_entries_many(
        self, requests: Sequence[tuple[str, int]], max_entries_per_ledger: int
    ) -> Iterator[list[Allocation]]:
        """:meth:`append_entries` for several partitions in ONE transaction.

        ``requests`` are ``(topic partition, n_entries)``, each partition once;
        the allocations come back in the same order. The partitions' locks are
        taken in name order (no deadlock between two such writers) and held
        until the block ends; on normal exit every segment is registered in one
        commit, on an exception none is.
        """
        names = [canonical_topic(topic_partition) for topic_partition, _ in requests]
        if len(set(names)) != len(names):
            raise InvalidArgumentError("append_entries_many: a partition is named twice")
        for _, n_entries in requests:
            check_int("number of entries", n_entries, 1)
        check_int("max entries per ledger", max_entries_per_ledger, 1)
        with self._session(write=True) as session:
            # One query locks every partition (in name order: rows are locked as the
            # sorted scan returns them) and one reads their latest ledgers.
            locked = session.scalars(
                select(TopicPartitionRow.name)
                .where(TopicPartitionRow.name.in_(names))
                .order_by(TopicPartitionRow.name)
                .with_for_update()
            ).all()
            missing = sorted(set(names) - set(locked))
            if missing:
                raise TopicNotFoundError(f"Topic partition '{missing[0]}' not found")
            latest = (
                select(func.max(LedgerRow.ledger_id))
                .where(LedgerRow.topic_partition.in_(names))
                .group_by(LedgerRow.topic_partition)
            )
            current: dict[str, LedgerRow | None] = dict.fromkeys(names)
            for row in session.scalars(select(LedgerRow).where(LedgerRow.ledger_id.in_(latest))):
                current[row.topic_partition] = row
            reserved: list[tuple[LedgerRow, Allocation]] = []
            # New ledgers in request order: the ids come out as from one append after another.
            for name, (_, n_entries) in zip(names, requests, strict=True):
                ledger = current[name]
                if ledger is None or ledger.entries >= max_entries_per_ledger:
                    ledger = LedgerRow(topic_partition=name, entries=0, messages=0)
                    session.add(ledger)
                    session.flush()
                count = min(n_entries, max_entries_per_ledger - ledger.entries)
                reserved.append((ledger, Allocation(ledger.ledger_id, ledger.entries, count)))
            yield [allocation for _, allocation in reserved]
            for _, allocation in reserved:
                if not isinstance(allocation.path, str) or not allocation.path:
                    raise InvalidArgumentError("append_entries: the segment path was not set")
                check_int("number of messages", allocation.messages, allocation.count)
            # Two statements for all partitions, not the ORM's flush of an object each.
            connection = session.connection()
            connection.execute(
                insert(SegmentRow),
                [
                    {
                        "ledger_id": ledger.ledger_id,
                        "first_entry": allocation.first_entry,
                        "last_entry": allocation.first_entry + allocation.count - 1,
                        "messages": allocation.messages,
                        "path": allocation.path,
                    }
                    for ledger, allocation in reserved
                ],
            )
            connection.execute(
                update(LedgerRow)
                .where(LedgerRow.ledger_id == bindparam("row_ledger_id"))
                .values(entries=bindparam("row_entries"), messages=bindparam("row_messages")),
                [
                    {
                        "row_ledger_id": ledger.ledger_id,
                        "row_entries": ledger.entries + allocation.count,
                        "row_messages": ledger.messages + allocation.messages,
                    }
                    for ledger, allocation in reserved
                ],
            )

    def ledgers(self, topic_partition: str) -> list[LedgerInfo]:
        """The partition's ledgers, ordered by ledger id."""
        name = canonical_topic(topic_partition)
        with self._session(write=False) as session:
            self._require_partition(session, name, lock=False)
            query = (
                select(LedgerRow)
                .where(LedgerRow.topic_partition == name)
                .order_by(LedgerRow.ledger_id)
            )
            return [ledger_info(row) for row in session.scalars(query)]

    def ledgers_of(self, topic_partitions: Sequence[str]) -> dict[str, list[LedgerInfo]]:
        """Each partition's ledgers, ordered by ledger id: :meth:`ledgers` of several in ONE
        statement (a skip routes its ids over every partition of the topic)."""
        with self.reading() as view:
            return view.ledgers_of(topic_partitions)

    def segments(self, topic_partition: str) -> list[SegmentInfo]:
        """The partition's committed segments, ordered by ``(ledger_id, first_entry)``."""
        name = canonical_topic(topic_partition)
        with self._session(write=False) as session:
            self._require_partition(session, name, lock=False)
            query = (
                select(SegmentRow)
                .join(LedgerRow, LedgerRow.ledger_id == SegmentRow.ledger_id)
                .where(LedgerRow.topic_partition == name)
                .order_by(SegmentRow.ledger_id, SegmentRow.first_entry)
            )
            return [
                SegmentInfo(row.ledger_id, row.first_entry, row.last_entry, row.messages, row.path)
                for row in session.scalars(query)
            ]

    def find_ledger(self, ledger_id: int) -> LedgerInfo | None:
        """The ledger with this id, whichever partition it belongs to."""
        with self._session(write=False) as session:
            row = session.get(LedgerRow, ledger_id)
            return None if row is None else ledger_info(row)

    @contextmanager
    def reading(self) -> Iterator[ReadView]:
        """One read transaction the caller composes (:class:`~core.store.read_view.ReadView`)."""
        with self._session(write=False) as session:
            yield ReadView(session)

    def access(
        self, tenant: str, namespace: str | None, role: str
    ) -> tuple[frozenset[str], frozenset[str]]:
        """What may authorize ``role``: the tenant's admin roles and the role's grant on
        ``namespace`` (empty when None), in ONE statement. Raises TenantNotFoundError, and
        NamespaceNotFoundError for a namespace that does not exist."""
        check_name("tenant", tenant)
        if namespace is None:
            query = select(TenantRow.admin_roles, None, None)
        else:
            split_namespace(namespace)
            exists = select(NamespaceRow.name).where(NamespaceRow.name == namespace)
            grant = select(PermissionRow.actions).where(
                PermissionRow.namespace == namespace, PermissionRow.role == role
            )
            query = select(TenantRow.admin_roles, exists.scalar_subquery(), grant.scalar_subquery())
        with self._session(write=False) as session:
            row = session.execute(query.where(TenantRow.name == tenant)).one_or_none()
        if row is None:
            raise TenantNotFoundError(f"Tenant '{tenant}' not found")
        if namespace is not None and row[1] is None:
            raise NamespaceNotFoundError(f"Namespace '{namespace}' not found")
        return frozenset(row[0]), frozenset(row[2] or ())

    # Cursors: snapshot + journal (:mod:`core.store.cursor_state` reads and writes them).

    @contextmanager
    def transaction(self) -> Iterator[UnitOfWork]:
        """One write transaction the caller composes: cursor reads and writes, audit records,
        a plan's claim (:class:`~core.store.unit_of_work.UnitOfWork`). All of it commits
        when the block ends, or none of it when it raises."""
        with self._session(write=True) as session:
            yield UnitOfWork(session, postgres=self._postgres)

    def load_cursor(self, topic_partition: str, subscription: str) -> CursorRecord:
        """The snapshot and every later delta, read consistently (a share lock on PostgreSQL)."""
        name = canonical_topic(topic_partition)
        check_label("subscription name", subscription)
        with self._session(write=False) as session:
            _, record = self._cursors(session).read(name, subscription, lock="share")
            return record

    def _cursors(self, session: Session) -> CursorStates:
        return CursorStates(ConnectionStatements.of(session), postgres=self._postgres)

    def append_cursor_delta(self, topic_partition: str, subscription: str, payload: bytes) -> int:
        """Append one delta to the cursor's journal; durable when it returns.

        Bumps the cursor row's version under its row lock and stores the delta
        under the new version: concurrent writers are serialized and none is
        lost. Returns the new version. Concurrent calls on this store, for one
        cursor or many, share one transaction (group commit,
        :mod:`core.store.group_commit`): each returns once its delta committed.
        """
        item = (
            canonical_topic(topic_partition),
            subscription,
            check_bytes("cursor delta", payload),
        )
        return self._delta_commits.submit(item)

    def _commit_deltas(self, items: list[tuple[str, str, bytes]]) -> list[int | BaseException]:
        """One group commit's batch: every delta in one transaction (:mod:`.delta_journal`).

        A cursor that does not exist fails only its own callers; anything else
        fails the whole batch (and nothing of it is committed).
        """
        return self._journal.append(items)

    def append_cursor_deltas(self, items: Sequence[tuple[str, str, bytes]]) -> list[int]:
        """Append one delta to each of several cursors in ONE transaction: all or none.

        ``items`` are ``(topic_partition, subscription, payload)``, written in the
        lock order of every multi-cursor writer (topic partition, then
        subscription), so two of them cannot deadlock. Returns the new versions,
        in order.
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
        versions = [0] * len(checked)
        with self.transaction() as work:
            for i in order:
                name, subscription, data = checked[i]
                version = work.cursors.append_to(name, subscription, [data])
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
        includes everything it has.
        """
        name = canonical_topic(topic_partition)
        check_label("subscription name", subscription)
        data = check_bytes("cursor snapshot", snapshot)
        check_int("through_version", through_version, 0)
        with self._session(write=True) as session:
            self._cursors(session).compact(name, subscription, data, through_version)

    def cursor_sizes(self, topic_partition: str, subscription: str) -> tuple[int, int]:
        """``(snapshot bytes, total bytes of the journal's deltas)``."""
        name = canonical_topic(topic_partition)
        check_label("subscription name", subscription)
        with self._session(write=False) as session:
            return self._cursors(session).sizes(name, subscription)

    # The dispatcher's shared state: consumers and pending acknowledgements.

    @contextmanager
    def subscription_transaction(
        self, topic: str, subscription: str, now_ms: int
    ) -> Iterator[SubscriptionTransaction]:
        """One write transaction holding the subscription's row lock.

        Every dispatch, acknowledgement and consumer change of the subscription
        runs inside one, from whichever process: they are serialized, and an
        acknowledgement's cursor delta commits with the removal of its pending
        entries, or neither does. Lock order: the subscription row, then cursor rows.
        A DBAPI connection of the write pool, not an ORM session: every statement
        of the transaction runs on its cursor (a dispatch is mostly this fixed cost).
        """
        from core.store.dispatch_state import locked_transaction

        topic_name = canonical_topic(topic)
        check_label("subscription name", subscription)
        with translated_errors():
            raw = self._write_engine.raw_connection()
        try:
            with locked_transaction(
                raw, self._engine.dialect, topic_name, subscription, now_ms
            ) as txn:
                yield txn
        finally:
            raw.close()

    # Audit log and backlog history (:mod:`core.store.audit_log`).

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
            return audit_log.add(session, entry)

    def audit_log(self, topic: str | None = None, limit: int = 100) -> list[AuditRecord]:
        """The newest ``limit`` records (of one topic, or all), newest first."""
        check_int("limit", limit, 0)
        with self._session(write=False) as session:
            return audit_log.newest(session, topic, limit)

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

    # Namespace policies of cursorops (not Pulsar's): whether skips need an approval.

    def set_skip_requires_approval(self, namespace: str, required: bool) -> None:
        """Record whether skips on ``namespace`` must go through an approval workflow."""
        split_namespace(namespace)
        if not isinstance(required, bool):
            raise InvalidArgumentError(f"Invalid skip approval flag {required!r}: expected a bool")
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            row = session.get(NamespacePolicyRow, namespace)
            if row is None:
                row = NamespacePolicyRow(namespace=namespace, skip_requires_approval=required)
                session.add(row)
            else:
                row.skip_requires_approval = required

    def set_approval_quorum(
        self, namespace: str, large_above_messages: int | None, large_approvals: int
    ) -> None:
        """Plans of more than ``large_above_messages`` messages need ``large_approvals``
        distinct approvers on ``namespace`` (None: every plan needs one)."""
        split_namespace(namespace)
        if large_above_messages is not None:
            check_int("large plan size", large_above_messages, 0)
        if isinstance(large_approvals, bool) or large_approvals not in range(1, MAX_APPROVALS + 1):
            raise InvalidArgumentError(
                f"Invalid number of approvals {large_approvals!r}: expected 1 to {MAX_APPROVALS}"
            )
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            row = session.get(ApprovalPolicyRow, namespace)
            if row is None:
                session.add(
                    ApprovalPolicyRow(
                        namespace=namespace,
                        large_above_messages=large_above_messages,
                        large_approvals=large_approvals,
                    )
                )
            else:
                row.large_above_messages = large_above_messages
                row.large_approvals = large_approvals

    def approval_policy(self, namespace: str) -> ApprovalPolicy:
        """The namespace's approval policy (the defaults when never set)."""
        split_namespace(namespace)
        with self._session(write=False) as session:
            self._require_namespace(session, namespace)
            flag = session.get(NamespacePolicyRow, namespace)
            quorum = session.get(ApprovalPolicyRow, namespace)
            return ApprovalPolicy(
                required=bool(flag is not None and flag.skip_requires_approval),
                large_above_messages=None if quorum is None else quorum.large_above_messages,
                large_approvals=2 if quorum is None else quorum.large_approvals,
            )

    def skip_requires_approval(self, namespace: str) -> bool:
        """Whether skips on ``namespace`` need an approval (False when never set)."""
        split_namespace(namespace)
        with self._session(write=False) as session:
            self._require_namespace(session, namespace)
            row = session.get(NamespacePolicyRow, namespace)
            return bool(row is not None and row.skip_requires_approval)

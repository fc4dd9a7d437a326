"""The metadata store: tenants, namespaces, topics, subscriptions, ledgers, cursors, audit.

SQLAlchemy 2 models over SQLite (the embedded default: one file, WAL mode) or
PostgreSQL (``postgresql+psycopg://``). Every public method is one transaction
and returns plain frozen dataclasses, never ORM objects. Foreign exceptions are
translated in one place, :meth:`MetadataStore._session`: a unique-key clash
becomes :class:`~core.errors.AlreadyExistsError` where the caller named the
clash, anything else from SQLAlchemy becomes :class:`~core.errors.MetadataStoreError`.

Locking. Writers that must be serialized take a row lock: the topic partition's
row for :meth:`MetadataStore.append_entries`, the cursor's row for the cursor
journal. On PostgreSQL that is ``SELECT ... FOR UPDATE`` (or the ``UPDATE``
itself); SQLite has one writer at a time, so every write transaction starts with
``BEGIN IMMEDIATE`` and waits up to the busy timeout for the write lock.

Cursors are stored as a snapshot plus a journal of deltas (docs/architecture.md,
"Cursor durability"). The payloads are opaque bytes here; ``core.cursor_codec``
owns their format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.pool import StaticPool

from core.authz import ACTIONS
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
from core.subscription import SubscriptionType
from core.topic_name import (
    MAX_NAME_CHARS,
    TopicName,
    is_valid_entity_name,
    label_problem,
    shown,
)

if TYPE_CHECKING:
    from core.store.dispatch_state import SubscriptionTransaction

PERMISSION_ACTIONS = ACTIONS
"""The namespace grant actions: :data:`core.authz.ACTIONS` (Pulsar's ``AuthAction``)."""

SQLITE_BUSY_TIMEOUT_S = 60.0
"""How long a SQLite writer waits for the database write lock before failing."""

_WRITE_OPTION = "cursorops_write"
_PG_SCHEMA_LOCK_KEY = 0x637572736F72
"""Advisory lock held while creating tables, so concurrent first starts do not race."""

# Integer on SQLite so that a single-column primary key is its ROWID (autoincrement).
_ID = BigInteger().with_variant(Integer(), "sqlite")


# Domain objects returned by the store.


@dataclass(frozen=True)
class TenantInfo:
    name: str
    admin_roles: frozenset[str]


@dataclass(frozen=True)
class NamespaceInfo:
    name: str
    """``tenant/namespace``."""
    permissions: dict[str, frozenset[str]]
    """Role -> granted actions (a subset of :data:`PERMISSION_ACTIONS`)."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    """The full base name, ``persistent://tenant/namespace/topic``."""
    partitions: int
    """Number of partitions; 0 = a non-partitioned topic."""

    def partition_names(self) -> list[str]:
        """The names cursors and ledgers are kept under: the topic itself, or each partition."""
        if self.partitions == 0:
            return [self.name]
        base = TopicName.parse(self.name)
        return [str(base.partition(i)) for i in range(self.partitions)]


@dataclass(frozen=True)
class SubscriptionInfo:
    topic: str
    name: str
    type: SubscriptionType
    properties: dict[str, str]


@dataclass(frozen=True)
class LedgerInfo:
    ledger_id: int
    topic_partition: str
    entries: int
    """Committed entries; they are numbered ``0..entries-1``."""
    messages: int
    """Committed messages (a batched entry holds several)."""


@dataclass(frozen=True)
class SegmentInfo:
    ledger_id: int
    first_entry: int
    last_entry: int
    """Inclusive."""
    messages: int
    path: str
    """As the ledger store registered it (relative to its root)."""


@dataclass(frozen=True)
class CursorRecord:
    snapshot: bytes | None
    snapshot_version: int
    """The journal version the snapshot includes (0 = the initial snapshot)."""
    deltas: list[bytes]
    """Every delta after the snapshot, in version order."""
    version: int
    """Version of the last delta (equal to ``snapshot_version`` when the journal is empty)."""


@dataclass(frozen=True)
class AuditRecord:
    id: int
    at_ms: int
    kind: str
    topic: str
    subscription: str | None
    role: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class AuditEntry:
    """An audit record to write, alone (:meth:`MetadataStore.record_audit`) or in the
    transaction of the change it records (:meth:`MetadataStore.append_cursor_deltas`)."""

    kind: str
    topic: str
    subscription: str | None
    role: str
    detail: Mapping[str, object]
    """JSON-serializable."""
    at_ms: int
    """Epoch ms, from the broker's clock."""


@dataclass
class Allocation:
    """Entries reserved by :meth:`MetadataStore.append_entries`.

    The caller sets ``path`` and ``messages`` before the ``with`` block ends.
    """

    ledger_id: int
    first_entry: int
    count: int
    path: str | None = None
    messages: int = 0

    @property
    def last_entry(self) -> int:
        """Inclusive."""
        return self.first_entry + self.count - 1


# Tables.


class Base(DeclarativeBase):
    pass


class TenantRow(Base):
    __tablename__ = "tenants"
    name: Mapped[str] = mapped_column(String, primary_key=True)
    admin_roles: Mapped[list[str]] = mapped_column(JSON)


class NamespaceRow(Base):
    __tablename__ = "namespaces"
    name: Mapped[str] = mapped_column(String, primary_key=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.name"), index=True)


class PermissionRow(Base):
    __tablename__ = "namespace_permissions"
    namespace: Mapped[str] = mapped_column(
        ForeignKey("namespaces.name", ondelete="CASCADE"), primary_key=True
    )
    role: Mapped[str] = mapped_column(String, primary_key=True)
    actions: Mapped[list[str]] = mapped_column(JSON)


class TopicRow(Base):
    __tablename__ = "topics"
    name: Mapped[str] = mapped_column(String, primary_key=True)
    namespace: Mapped[str] = mapped_column(ForeignKey("namespaces.name"), index=True)
    partitions: Mapped[int] = mapped_column(Integer)


class TopicPartitionRow(Base):
    """One row per partition (the topic itself when not partitioned): what appends lock."""

    __tablename__ = "topic_partitions"
    name: Mapped[str] = mapped_column(String, primary_key=True)
    topic: Mapped[str] = mapped_column(ForeignKey("topics.name", ondelete="CASCADE"), index=True)
    partition: Mapped[int] = mapped_column(Integer)


class SubscriptionRow(Base):
    __tablename__ = "subscriptions"
    __table_args__ = (UniqueConstraint("topic", "name"),)
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    topic: Mapped[str] = mapped_column(ForeignKey("topics.name", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String)
    type: Mapped[str] = mapped_column(String)
    properties: Mapped[dict[str, str]] = mapped_column(JSON)


class CursorRow(Base):
    __tablename__ = "cursors"
    __table_args__ = (UniqueConstraint("topic_partition", "subscription_id"),)
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    subscription_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("subscriptions.id", ondelete="CASCADE"), index=True
    )
    topic_partition: Mapped[str] = mapped_column(
        ForeignKey("topic_partitions.name", ondelete="CASCADE")
    )
    snapshot: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    snapshot_version: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(BigInteger)


class CursorDeltaRow(Base):
    __tablename__ = "cursor_deltas"
    cursor_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("cursors.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    payload: Mapped[bytes] = mapped_column(LargeBinary)


class ConsumerRow(Base):
    """A consumer connected to a subscription, from any process, while its lease lasts."""

    __tablename__ = "consumers"
    subscription_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("subscriptions.id", ondelete="CASCADE"), primary_key=True
    )
    consumer_id: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(String)
    priority: Mapped[int] = mapped_column(Integer)
    epoch: Mapped[int] = mapped_column(BigInteger)
    lease_expires_ms: Mapped[int] = mapped_column(BigInteger)


class PendingAckRow(Base):
    """A message delivered and not acknowledged; ``consumer_id`` NULL = due for redelivery."""

    __tablename__ = "pending_acks"
    subscription_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("subscriptions.id", ondelete="CASCADE"), primary_key=True
    )
    topic_partition: Mapped[str] = mapped_column(String, primary_key=True)
    ledger_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    entry_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    batch_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    consumer_id: Mapped[str | None] = mapped_column(String, nullable=True)
    redelivery_count: Mapped[int] = mapped_column(Integer)
    key_hash: Mapped[int | None] = mapped_column(Integer, nullable=True)


class LedgerRow(Base):
    __tablename__ = "ledgers"
    # AUTOINCREMENT: SQLite never hands out a committed ledger id twice, like BookKeeper.
    __table_args__ = {"sqlite_autoincrement": True}
    ledger_id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    topic_partition: Mapped[str] = mapped_column(
        ForeignKey("topic_partitions.name", ondelete="CASCADE"), index=True
    )
    entries: Mapped[int] = mapped_column(BigInteger)
    messages: Mapped[int] = mapped_column(BigInteger)


class SegmentRow(Base):
    __tablename__ = "segments"
    ledger_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("ledgers.ledger_id", ondelete="CASCADE"), primary_key=True
    )
    first_entry: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    last_entry: Mapped[int] = mapped_column(BigInteger)
    messages: Mapped[int] = mapped_column(BigInteger)
    path: Mapped[str] = mapped_column(String)


class AuditRow(Base):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_topic_id", "topic", "id"),)
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    at_ms: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String)
    topic: Mapped[str] = mapped_column(String)
    subscription: Mapped[str | None] = mapped_column(String, nullable=True)
    role: Mapped[str] = mapped_column(String)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)


# Engines.


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from pysqlite: _sqlite_on_begin emits BEGIN itself.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    write = connection.get_execution_options().get(_WRITE_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _sqlite_file(url: URL) -> Path | None:
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    return Path(database)


def _create_engine(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_S}
        kwargs: dict[str, Any] = {}
        if _sqlite_file(url) is None:
            # One shared connection, so that every session sees the same in-memory
            # database; such a store is meant for one thread.
            connect_args["check_same_thread"] = False
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, connect_args=connect_args, **kwargs)
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    return create_engine(url, pool_pre_ping=True)


# Validation helpers.


def _check_name(kind: str, value: object) -> str:
    """A tenant or namespace name: Pulsar's NamedEntity rule and a length cap."""
    if not is_valid_entity_name(value):
        text = shown(value) if isinstance(value, str) else repr(value)
        raise InvalidArgumentError(
            f"Invalid {kind} name {text}: use 1 to {MAX_NAME_CHARS} of letters, digits "
            "and _ = : . -, not . or .."
        )
    assert isinstance(value, str)
    return value


def _check_label(kind: str, value: object) -> str:
    """A subscription or role name: text without control characters, checked before SQL."""
    problem = label_problem(value)
    if problem is not None:
        text = shown(value) if isinstance(value, str) else repr(value)
        raise InvalidArgumentError(f"Invalid {kind} {text}: {problem}")
    assert isinstance(value, str)
    return value


def _check_text(kind: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"Invalid {kind} {value!r}: expected a non-empty string")
    return value


def _check_int(kind: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"Invalid {kind} {value!r}: expected an integer >= {minimum}")
    return value


def _check_bytes(kind: str, value: object) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"Invalid {kind}: expected bytes, got {type(value).__name__}")
    return bytes(value)


def _check_roles(kind: str, roles: Iterable[str]) -> frozenset[str]:
    if isinstance(roles, str):
        raise InvalidArgumentError(f"Invalid {kind} {roles!r}: expected a collection of roles")
    return frozenset(_check_label("role", role) for role in roles)


def _check_string_map(kind: str, mapping: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(mapping, Mapping):
        raise InvalidArgumentError(f"Invalid {kind}: expected a mapping of strings")
    for key, value in mapping.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgumentError(f"Invalid {kind}: {key!r}={value!r} is not string=string")
        for item in (key, value):
            # PostgreSQL refuses NUL in text and JSON; a lone surrogate is not UTF-8.
            if "\x00" in item or not _is_utf8(item):
                raise InvalidArgumentError(
                    f"Invalid {kind}: {shown(key)}={shown(value)} holds NUL or non-UTF-8 text"
                )
    return dict(mapping)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _topic(topic: str) -> str:
    return str(TopicName.parse(topic))


def _split_namespace(namespace: object) -> tuple[str, str]:
    if not isinstance(namespace, str) or namespace.count("/") != 1:
        raise InvalidArgumentError(f"Invalid namespace {namespace!r}: expected tenant/namespace")
    tenant, local = namespace.split("/")
    _check_name("tenant", tenant)
    _check_name("namespace", local)
    return tenant, local


def _is_unique_violation(exc: IntegrityError) -> bool:
    if getattr(exc.orig, "sqlstate", None) == "23505":
        return True
    return "UNIQUE constraint failed" in str(exc.orig)


class MetadataStore:
    """Tenants, namespaces, topics, subscriptions, ledgers, cursors and the audit log.

    Safe to share between threads; several stores (processes) may use one database.
    """

    def __init__(self, url: str) -> None:
        try:
            parsed = make_url(url)
            self.url = parsed
            self._engine = _create_engine(parsed)
            self._write_engine = self._engine.execution_options(**{_WRITE_OPTION: True})
            self._create_tables()
        except SQLAlchemyError as exc:
            raise MetadataStoreError(f"Cannot open the metadata store {url!r}: {exc}") from exc

    @classmethod
    def from_config(cls, config: Config) -> MetadataStore:
        """Open the store ``config.metadata_url`` names, creating the SQLite file's folder."""
        try:
            Path(config.home).mkdir(parents=True, exist_ok=True)
            sqlite_file = _sqlite_file(make_url(config.metadata_url))
            if sqlite_file is not None:
                sqlite_file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MetadataStoreError(f"Cannot create {config.home}: {exc}") from exc
        except SQLAlchemyError as exc:
            raise MetadataStoreError(f"Invalid metadata URL {config.metadata_url!r}") from exc
        return cls(config.metadata_url)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _create_tables(self) -> None:
        with self._write_engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK_KEY}
                )
            Base.metadata.create_all(connection)

    @contextmanager
    def _session(self, *, write: bool, conflict: str | None = None) -> Iterator[Session]:
        """One transaction; the one place SQLAlchemy errors become cursorops errors.

        ``conflict`` is the AlreadyExistsError message for a unique-key clash (a
        concurrent creator won the race). Errors raised by the caller pass through.
        """
        engine = self._write_engine if write else self._engine
        try:
            with Session(engine, expire_on_commit=False) as session, session.begin():
                yield session
        except IntegrityError as exc:
            if conflict is not None and _is_unique_violation(exc):
                raise AlreadyExistsError(conflict) from exc
            raise MetadataStoreError(f"Metadata store integrity error: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            raise MetadataStoreError(f"Metadata store failed: {exc}") from exc

    # Tenants and namespaces.

    def create_tenant(self, name: str, admin_roles: Iterable[str] = ()) -> TenantInfo:
        _check_name("tenant", name)
        roles = _check_roles("admin roles", admin_roles)
        message = f"Tenant '{name}' already exists"
        with self._session(write=True, conflict=message) as session:
            if session.get(TenantRow, name) is not None:
                raise AlreadyExistsError(message)
            session.add(TenantRow(name=name, admin_roles=sorted(roles)))
        return TenantInfo(name, roles)

    def get_tenant(self, name: str) -> TenantInfo:
        _check_name("tenant", name)
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
        tenant, _ = _split_namespace(namespace)
        message = f"Namespace '{namespace}' already exists"
        with self._session(write=True, conflict=message) as session:
            if session.get(TenantRow, tenant) is None:
                raise TenantNotFoundError(f"Tenant '{tenant}' not found")
            if session.get(NamespaceRow, namespace) is not None:
                raise AlreadyExistsError(message)
            session.add(NamespaceRow(name=namespace, tenant=tenant))
        return NamespaceInfo(namespace, {})

    def get_namespace(self, namespace: str) -> NamespaceInfo:
        _split_namespace(namespace)
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
        _check_label("role", role)
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
        _check_int("partition count", partitions, 0)
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
        name = _topic(topic)
        with self._session(write=False) as session:
            return self._require_topic(session, name)

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
        topic_name = _topic(topic)
        _check_label("subscription name", name)
        if not isinstance(type, SubscriptionType):
            type = SubscriptionType.parse(_check_text("subscription type", type))
        props = _check_string_map("subscription properties", properties)
        if not isinstance(initial_snapshots, Mapping):
            raise InvalidArgumentError("Invalid initial snapshots: expected a mapping")
        snapshots = {
            _topic(partition): _check_bytes(f"initial snapshot of {partition}", snapshot)
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
            session.add_all(
                CursorRow(
                    subscription_id=row.id,
                    topic_partition=partition,
                    snapshot=snapshots[partition],
                    snapshot_version=0,
                    version=0,
                )
                for partition in expected
            )
        return SubscriptionInfo(topic_name, name, type, props)

    def get_subscription(self, topic: str, name: str) -> SubscriptionInfo:
        topic_name = _topic(topic)
        _check_label("subscription name", name)
        with self._session(write=False) as session:
            row = session.scalars(
                select(SubscriptionRow).where(
                    SubscriptionRow.topic == topic_name, SubscriptionRow.name == name
                )
            ).one_or_none()
            if row is None:
                raise SubscriptionNotFoundError(
                    f"Subscription '{name}' not found on topic '{topic_name}'"
                )
            return _subscription_info(row)

    def list_subscriptions(self, topic: str) -> list[SubscriptionInfo]:
        topic_name = _topic(topic)
        with self._session(write=False) as session:
            self._require_topic(session, topic_name)
            query = (
                select(SubscriptionRow)
                .where(SubscriptionRow.topic == topic_name)
                .order_by(SubscriptionRow.name)
            )
            return [_subscription_info(row) for row in session.scalars(query)]

    def delete_subscription(self, topic: str, name: str) -> None:
        """Delete the subscription with its cursors and their journals."""
        topic_name = _topic(topic)
        _check_label("subscription name", name)
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
        topic_name = _topic(topic)
        _check_label("subscription name", name)
        props = _check_string_map("subscription properties", properties)
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
            return _subscription_info(row)

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
        name = _topic(topic_partition)
        _check_int("number of entries", n_entries, 1)
        _check_int("max entries per ledger", max_entries_per_ledger, 1)
        with self._session(write=True) as session:
            self._require_partition(session, name, lock=True)
            ledger = session.scalars(
                select(LedgerRow)
                .where(LedgerRow.topic_partition == name)
                .order_by(LedgerRow.ledger_id.desc())
                .limit(1)
            ).one_or_none()
            if ledger is None or ledger.entries >= max_entries_per_ledger:
                ledger = LedgerRow(topic_partition=name, entries=0, messages=0)
                session.add(ledger)
                session.flush()
            count = min(n_entries, max_entries_per_ledger - ledger.entries)
            allocation = Allocation(ledger.ledger_id, ledger.entries, count)
            yield allocation
            if not isinstance(allocation.path, str) or not allocation.path:
                raise InvalidArgumentError("append_entries: the segment path was not set")
            _check_int("number of messages", allocation.messages, count)
            session.add(
                SegmentRow(
                    ledger_id=ledger.ledger_id,
                    first_entry=allocation.first_entry,
                    last_entry=allocation.first_entry + count - 1,
                    messages=allocation.messages,
                    path=allocation.path,
                )
            )
            ledger.entries += count
            ledger.messages += allocation.messages

    def ledgers(self, topic_partition: str) -> list[LedgerInfo]:
        """The partition's ledgers, ordered by ledger id."""
        name = _topic(topic_partition)
        with self._session(write=False) as session:
            self._require_partition(session, name, lock=False)
            query = (
                select(LedgerRow)
                .where(LedgerRow.topic_partition == name)
                .order_by(LedgerRow.ledger_id)
            )
            return [_ledger_info(row) for row in session.scalars(query)]

    def segments(self, topic_partition: str) -> list[SegmentInfo]:
        """The partition's committed segments, ordered by ``(ledger_id, first_entry)``."""
        name = _topic(topic_partition)
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
            return None if row is None else _ledger_info(row)

    # Cursors: snapshot + journal.

    @staticmethod
    def _cursor_query(topic_partition: str, subscription: str) -> Any:
        _check_label("subscription name", subscription)
        return (
            select(CursorRow)
            .join(SubscriptionRow, SubscriptionRow.id == CursorRow.subscription_id)
            .where(
                CursorRow.topic_partition == topic_partition, SubscriptionRow.name == subscription
            )
        )

    @staticmethod
    def _cursor_missing(topic_partition: str, subscription: str) -> SubscriptionNotFoundError:
        return SubscriptionNotFoundError(
            f"Subscription '{subscription}' not found on topic '{topic_partition}'"
        )

    def load_cursor(self, topic_partition: str, subscription: str) -> CursorRecord:
        """The snapshot and every later delta, read consistently (a share lock on PostgreSQL)."""
        name = _topic(topic_partition)
        with self._session(write=False) as session:
            query = self._cursor_query(name, subscription).with_for_update(read=True, of=CursorRow)
            row = session.scalars(query).one_or_none()
            if row is None:
                raise self._cursor_missing(name, subscription)
            deltas = session.scalars(
                select(CursorDeltaRow.payload)
                .where(
                    CursorDeltaRow.cursor_id == row.id,
                    CursorDeltaRow.version > row.snapshot_version,
                )
                .order_by(CursorDeltaRow.version)
            )
            return CursorRecord(row.snapshot, row.snapshot_version, list(deltas), row.version)

    def append_cursor_delta(self, topic_partition: str, subscription: str, payload: bytes) -> int:
        """Append one delta to the cursor's journal; durable when it returns.

        Bumps the cursor row's version under its row lock and stores the delta
        under the new version, in one transaction: concurrent writers are
        serialized and none is lost. Returns the new version.
        """
        return self.append_cursor_deltas([(topic_partition, subscription, payload)])[0]

    def append_cursor_deltas(
        self, items: Sequence[tuple[str, str, bytes]], audit: AuditEntry | None = None
    ) -> list[int]:
        """Append one delta to each of several cursors in ONE transaction: all or none.

        ``items`` are ``(topic_partition, subscription, payload)``. Row locks are
        taken in a fixed order (by topic partition, then subscription), so two
        multi-cursor writers cannot deadlock. ``audit``, when given, is written in
        the same transaction: the change and its record commit together or not at
        all. Returns the new versions, in order.
        """
        checked = [
            (_topic(tp), sub, _check_bytes("cursor delta", payload)) for tp, sub, payload in items
        ]
        audit_row = None if audit is None else _audit_row(audit)
        order = sorted(range(len(checked)), key=lambda i: checked[i][:2])
        versions = [0] * len(checked)
        with self._session(write=True) as session:
            for i in order:
                name, subscription, data = checked[i]
                versions[i] = self._append_delta(session, name, subscription, data)
            if audit_row is not None:
                session.add(audit_row)
                session.flush()
        return versions

    def append_cursor_deltas_deciding(
        self,
        cursors: Sequence[tuple[str, str]],
        decide: Callable[[list[CursorRecord]], tuple[list[bytes | None], AuditEntry | None]],
    ) -> None:
        """Read cursors under their row locks, let ``decide`` choose, write: ONE transaction.

        ``cursors`` are ``(topic_partition, subscription)``; ``decide`` gets their
        records (as :meth:`load_cursor` returns them, in the same order) and
        returns one delta payload per cursor (None = nothing to append) and an
        audit record or None. No other writer can append to these cursors between
        the read and the write, so what ``decide`` chose from is what is
        written over. Locks in the fixed order of :meth:`append_cursor_deltas`.
        Anything ``decide`` raises rolls everything back.
        """
        checked = [(_topic(tp), sub) for tp, sub in cursors]
        order = sorted(range(len(checked)), key=lambda i: checked[i])
        with self._session(write=True) as session:
            records: dict[int, CursorRecord] = {}
            for i in order:
                name, subscription = checked[i]
                query = self._cursor_query(name, subscription).with_for_update(of=CursorRow)
                row = session.scalars(query).one_or_none()
                if row is None:
                    raise self._cursor_missing(name, subscription)
                deltas = session.scalars(
                    select(CursorDeltaRow.payload)
                    .where(
                        CursorDeltaRow.cursor_id == row.id,
                        CursorDeltaRow.version > row.snapshot_version,
                    )
                    .order_by(CursorDeltaRow.version)
                )
                records[i] = CursorRecord(
                    row.snapshot, row.snapshot_version, list(deltas), row.version
                )
            payloads, audit = decide([records[i] for i in range(len(checked))])
            audit_row = None if audit is None else _audit_row(audit)
            for i in order:
                payload = payloads[i]
                if payload is not None:
                    name, subscription = checked[i]
                    data = _check_bytes("cursor delta", payload)
                    self._append_delta(session, name, subscription, data)
            if audit_row is not None:
                session.add(audit_row)
                session.flush()

    def _append_delta(self, session: Session, name: str, subscription: str, data: bytes) -> int:
        cursor_id = session.scalars(
            select(CursorRow.id)
            .join(SubscriptionRow, SubscriptionRow.id == CursorRow.subscription_id)
            .where(CursorRow.topic_partition == name, SubscriptionRow.name == subscription)
        ).one_or_none()
        if cursor_id is None:
            raise self._cursor_missing(name, subscription)
        version = session.scalars(
            update(CursorRow)
            .where(CursorRow.id == cursor_id)
            .values(version=CursorRow.version + 1)
            .returning(CursorRow.version)
            .execution_options(synchronize_session=False)
        ).one_or_none()
        if version is None:
            raise self._cursor_missing(name, subscription)
        session.execute(
            insert(CursorDeltaRow).values(cursor_id=cursor_id, version=version, payload=data)
        )
        return int(version)

    def compact_cursor(
        self, topic_partition: str, subscription: str, snapshot: bytes, through_version: int
    ) -> None:
        """Store ``snapshot`` as the state as of ``through_version`` and drop the deltas it covers.

        Runs under the cursor's row lock; deltas after ``through_version`` stay. A
        snapshot older than the stored one is ignored: the stored one already
        includes everything it has.
        """
        name = _topic(topic_partition)
        data = _check_bytes("cursor snapshot", snapshot)
        _check_int("through_version", through_version, 0)
        with self._session(write=True) as session:
            query = self._cursor_query(name, subscription).with_for_update(of=CursorRow)
            row = session.scalars(query).one_or_none()
            if row is None:
                raise self._cursor_missing(name, subscription)
            if through_version > row.version:
                raise InvalidArgumentError(
                    f"Cannot compact cursor '{subscription}' on '{name}' through version "
                    f"{through_version}: its journal ends at version {row.version}"
                )
            if through_version < row.snapshot_version:
                return
            row.snapshot = data
            row.snapshot_version = through_version
            session.execute(
                delete(CursorDeltaRow).where(
                    CursorDeltaRow.cursor_id == row.id, CursorDeltaRow.version <= through_version
                )
            )

    def cursor_sizes(self, topic_partition: str, subscription: str) -> tuple[int, int]:
        """``(snapshot bytes, total bytes of the journal's deltas)``."""
        name = _topic(topic_partition)
        with self._session(write=False) as session:
            row = session.scalars(self._cursor_query(name, subscription)).one_or_none()
            if row is None:
                raise self._cursor_missing(name, subscription)
            journal = session.scalar(
                select(func.coalesce(func.sum(func.length(CursorDeltaRow.payload)), 0)).where(
                    CursorDeltaRow.cursor_id == row.id
                )
            )
            return len(row.snapshot or b""), int(journal or 0)

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
        """
        from core.store.dispatch_state import SubscriptionTransaction

        topic_name = _topic(topic)
        _check_label("subscription name", subscription)
        with self._session(write=True) as session:
            row = session.scalars(
                select(SubscriptionRow)
                .where(SubscriptionRow.topic == topic_name, SubscriptionRow.name == subscription)
                .with_for_update()
            ).one_or_none()
            if row is None:
                raise SubscriptionNotFoundError(
                    f"Subscription '{subscription}' not found on topic '{topic_name}'"
                )
            yield SubscriptionTransaction(
                session,
                row.id,
                subscription,
                now_ms,
                lambda name, data: self._append_delta(session, name, subscription, data),
            )

    # Audit log.

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
        row = _audit_row(AuditEntry(kind, topic, subscription, role, detail, at_ms))
        with self._session(write=True) as session:
            session.add(row)
            session.flush()
            return row.id

    def audit_log(self, topic: str | None = None, limit: int = 100) -> list[AuditRecord]:
        """The newest ``limit`` records (of one topic, or all), newest first."""
        _check_int("limit", limit, 0)
        query = select(AuditRow).order_by(AuditRow.id.desc()).limit(limit)
        if topic is not None:
            query = query.where(AuditRow.topic == topic)
        with self._session(write=False) as session:
            return [
                AuditRecord(
                    row.id, row.at_ms, row.kind, row.topic, row.subscription, row.role, row.detail
                )
                for row in session.scalars(query)
            ]

    # Backlog history (scheduled audits).

    def record_backlog_samples(self, run_id: str, samples: Sequence[BacklogSample]) -> int:
        """Insert one row per sample for ``run_id``; rows the run already wrote are kept.

        Returns how many rows were new. All in one transaction.
        """
        _check_text("audit run id", run_id)
        for sample in samples:
            _check_text("backlog topic", sample.topic)
            _check_text("backlog subscription", sample.subscription)
            _check_int("backlog time", sample.at_ms, 0)
            _check_int("backlog messages", sample.messages, 0)
            _check_int("backlog entries", sample.entries, 0)
            if sample.oldest_publish_ms is not None:
                _check_int("oldest publish time", sample.oldest_publish_ms, 0)
        with self._session(write=True) as session:
            seen = {
                (topic, sub)
                for topic, sub in session.execute(
                    select(BacklogHistoryRow.topic, BacklogHistoryRow.subscription).where(
                        BacklogHistoryRow.run_id == run_id
                    )
                )
            }
            new = [s for s in samples if (s.topic, s.subscription) not in seen]
            session.add_all(
                BacklogHistoryRow(
                    run_id=run_id,
                    topic=s.topic,
                    subscription=s.subscription,
                    at_ms=s.at_ms,
                    messages=s.messages,
                    entries=s.entries,
                    oldest_publish_ms=s.oldest_publish_ms,
                )
                for s in new
            )
            return len(new)

    def backlog_samples(
        self,
        topic: str,
        subscription: str | None = None,
        since_ms: int | None = None,
        limit: int = 10_000,
    ) -> list[BacklogSample]:
        """History rows of ``topic`` (one subscription or all), oldest first; the newest
        ``limit`` of them."""
        _check_int("limit", limit, 0)
        query = select(BacklogHistoryRow).where(BacklogHistoryRow.topic == topic)
        if subscription is not None:
            query = query.where(BacklogHistoryRow.subscription == subscription)
        if since_ms is not None:
            query = query.where(BacklogHistoryRow.at_ms >= since_ms)
        query = query.order_by(BacklogHistoryRow.at_ms.desc(), BacklogHistoryRow.id.desc())
        with self._session(write=False) as session:
            rows = list(session.scalars(query.limit(limit)))
        return [
            BacklogSample(
                r.topic,
                r.subscription,
                r.at_ms,
                r.messages,
                r.entries,
                r.oldest_publish_ms,
                r.run_id,
            )
            for r in reversed(rows)
        ]


def _audit_row(entry: AuditEntry) -> AuditRow:
    """The row for ``entry``, its fields checked (InvalidArgumentError before any write)."""
    _check_text("audit kind", entry.kind)
    _check_text("audit topic", entry.topic)
    if entry.subscription is not None:
        _check_text("audit subscription", entry.subscription)
    _check_text("audit role", entry.role)
    _check_int("audit time", entry.at_ms, 0)
    if not isinstance(entry.detail, Mapping):
        raise InvalidArgumentError("Invalid audit detail: expected a mapping")
    try:
        payload = json.loads(json.dumps(dict(entry.detail)))
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"Invalid audit detail: not JSON-serializable: {exc}") from exc
    return AuditRow(
        at_ms=entry.at_ms,
        kind=entry.kind,
        topic=entry.topic,
        subscription=entry.subscription,
        role=entry.role,
        detail=payload,
    )


def _subscription_info(row: SubscriptionRow) -> SubscriptionInfo:
    return SubscriptionInfo(row.topic, row.name, SubscriptionType(row.type), dict(row.properties))


def _ledger_info(row: LedgerRow) -> LedgerInfo:
    return LedgerInfo(row.ledger_id, row.topic_partition, row.entries, row.messages)


class BacklogHistoryRow(Base):
    """One subscription's exact backlog as one scheduled audit run measured it."""

    __tablename__ = "backlog_history"
    __table_args__ = (
        UniqueConstraint("run_id", "topic", "subscription"),
        Index("ix_backlog_history_topic_at", "topic", "at_ms"),
    )
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String)
    topic: Mapped[str] = mapped_column(String)
    subscription: Mapped[str] = mapped_column(String)
    at_ms: Mapped[int] = mapped_column(BigInteger)
    messages: Mapped[int] = mapped_column(BigInteger)
    entries: Mapped[int] = mapped_column(BigInteger)
    oldest_publish_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

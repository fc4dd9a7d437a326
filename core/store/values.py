"""What the metadata store returns and takes: plain frozen dataclasses, never ORM rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cursorops.core.domain.authz import ACTIONS
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.subscription import SubscriptionType

PERMISSION_ACTIONS = ACTIONS
"""The namespace grant actions: :data:`cursorops.core.domain.authz.ACTIONS` (Pulsar's
``AuthAction``)."""


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
    approval_required: bool = False
    """Whether its namespace requires an approval for irreversible operations (as read
    with the topic by :meth:`MetadataStore.get_topic`; False where not read)."""

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


@dataclass(frozen=True)
class Fence:
    """One life of one broker: what its writes name."""

    broker_id: str
    epoch: int

    @property
    def consumer_prefix(self) -> str:
        """What the id of every consumer this life registers starts with."""
        return f"{self.broker_id}.{self.epoch}/"

    @property
    def lives_prefix(self) -> str:
        """What the consumer ids of every life of this broker start with."""
        return f"{self.broker_id}."

"""The schema registry's versions, Pulsar's policies of namespaces and topics, and the
compaction horizons of topic partitions.

A part of :class:`~cursorops.core.store.metadata.MetadataStore`. A version is written
once, at the number its writer read as next: two processes adding one at the
same time clash on the primary key, and the loser reads again
(:class:`~cursorops.core.domain.errors.AlreadyExistsError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select

from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.schemas.schema_info import SchemaInfo
from cursorops.core.store.checks import check_label
from cursorops.core.store.store_base import StoreBase
from cursorops.core.store.tables import BrokerPolicyRow, CompactionHorizonRow, SchemaVersionRow


@dataclass(frozen=True)
class StoredSchema:
    version: int
    info: SchemaInfo
    deleted: bool
    created_at_ms: int


class SchemaVersions(StoreBase):
    """Schema versions by schema id, and policies by scope."""

    def schema_history(self, schema_id: str) -> list[StoredSchema]:
        """Every version of the schema, oldest first (deletions included)."""
        check_label("schema id", schema_id)
        query = (
            select(SchemaVersionRow)
            .where(SchemaVersionRow.schema_id == schema_id)
            .order_by(SchemaVersionRow.version)
        )
        with self._session(write=False) as session:
            return [
                StoredSchema(
                    row.version,
                    SchemaInfo.of(row.type, row.data, row.properties),
                    row.deleted,
                    row.created_at_ms,
                )
                for row in session.scalars(query)
            ]

    def add_schema_version(
        self, schema_id: str, version: int, info: SchemaInfo, *, deleted: bool, now_ms: int
    ) -> None:
        """Write version ``version``; AlreadyExistsError when another writer took it first."""
        check_label("schema id", schema_id)
        with self._session(
            write=True, conflict=f"Schema {schema_id} version {version} was added meanwhile"
        ) as session:
            session.execute(
                insert(SchemaVersionRow).values(
                    schema_id=schema_id,
                    version=version,
                    type=int(info.type),
                    data=info.data,
                    properties=dict(info.properties),
                    deleted=deleted,
                    created_at_ms=now_ms,
                )
            )

    def broker_policy(self, scope: str, name: str) -> Any:
        """The policy's value; None when it is not set."""
        query = select(BrokerPolicyRow.value).where(
            BrokerPolicyRow.scope == scope, BrokerPolicyRow.name == name
        )
        with self._session(write=False) as session:
            return session.execute(query).scalar_one_or_none()

    def set_broker_policy(self, scope: str, name: str, value: Any) -> None:
        """Set the policy (None: remove it, back to the default)."""
        check_label("policy scope", scope)
        where = (BrokerPolicyRow.scope == scope, BrokerPolicyRow.name == name)
        with self._session(write=True) as session:
            session.execute(delete(BrokerPolicyRow).where(*where))
            if value is not None:
                session.execute(insert(BrokerPolicyRow).values(scope=scope, name=name, value=value))

    def compaction_horizon(self, topic_partition: str) -> tuple[Position, int] | None:
        """(the position the partition was compacted through, when, ms); None: never."""
        query = select(CompactionHorizonRow).where(
            CompactionHorizonRow.topic_partition == topic_partition
        )
        with self._session(write=False) as session:
            row = session.scalars(query).first()
            if row is None:
                return None
            return Position(row.ledger_id, row.entry_id), row.compacted_at_ms

    def set_compaction_horizon(self, topic_partition: str, horizon: Position, now_ms: int) -> None:
        where = CompactionHorizonRow.topic_partition == topic_partition
        with self._session(write=True) as session:
            session.execute(delete(CompactionHorizonRow).where(where))
            session.execute(
                insert(CompactionHorizonRow).values(
                    topic_partition=topic_partition,
                    ledger_id=horizon.ledger_id,
                    entry_id=horizon.entry_id,
                    compacted_at_ms=now_ms,
                )
            )


__all__ = ["SchemaVersions", "StoredSchema"]

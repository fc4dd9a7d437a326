"""Reads of several aggregates in one read transaction.

:meth:`MetadataStore.reading <core.store.metadata.MetadataStore.reading>` opens one;
the caller reads what its operation needs (a skip: the subscription, every
partition's ledgers, the segments of the partitions its ids are on) in one
snapshot and as few statements, instead of a transaction per look-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from sqlalchemy import Select, bindparam, select
from sqlalchemy.orm import Session

from core.errors import SubscriptionNotFoundError, TopicNotFoundError
from core.store.checks import canonical_topic, check_label
from core.store.records import LedgerInfo, SegmentInfo, SubscriptionInfo
from core.store.tables import LedgerRow, SegmentRow, SubscriptionRow, TopicPartitionRow
from core.subscription import SubscriptionType


class ReadView:
    """Look-ups inside one open read transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def subscription(self, topic: str, name: str) -> SubscriptionInfo:
        topic_name = canonical_topic(topic)
        check_label("subscription name", name)
        row = self.session.execute(
            _subscription_query(), {"topic": topic_name, "name": name}
        ).one_or_none()
        if row is None:
            raise SubscriptionNotFoundError.of(topic_name, name)
        return SubscriptionInfo(row[0], row[1], SubscriptionType(row[2]), dict(row[3]))

    def subscriptions(self, topic: str) -> list[SubscriptionInfo]:
        """The topic's subscriptions, by name (none for a topic that does not exist)."""
        topic_name = canonical_topic(topic)
        query = (
            select(SubscriptionRow)
            .where(SubscriptionRow.topic == topic_name)
            .order_by(SubscriptionRow.name)
        )
        return [subscription_info(row) for row in self.session.scalars(query)]

    def ledgers_of(self, topic_partitions: Sequence[str]) -> dict[str, list[LedgerInfo]]:
        """Each partition's ledgers, ordered by ledger id, in ONE statement."""
        names = [canonical_topic(name) for name in topic_partitions]
        found: dict[str, list[LedgerInfo]] = {}
        for name, ledger_id, entries, messages in self.session.execute(
            _ledgers_query(), {"names": names}
        ):
            ledgers = found.setdefault(name, [])
            if ledger_id is not None:
                ledgers.append(LedgerInfo(ledger_id, name, entries, messages))
        missing = [name for name in names if name not in found]
        if missing:
            raise TopicNotFoundError(f"Topic partition '{missing[0]}' not found")
        return {name: found[name] for name in names}

    def segments_of(self, topic_partitions: Sequence[str]) -> dict[str, list[SegmentInfo]]:
        """Each partition's committed segments, ordered by ``(ledger_id, first_entry)``, in
        ONE statement. The partitions are known to exist (read by :meth:`ledgers_of`)."""
        names = [canonical_topic(name) for name in topic_partitions]
        found: dict[str, list[SegmentInfo]] = {name: [] for name in names}
        if not names:
            return found
        rows = self.session.execute(_segments_query(), {"names": names})
        for name, ledger_id, first_entry, last_entry, messages, path in rows:
            found[name].append(SegmentInfo(ledger_id, first_entry, last_entry, messages, path))
        return found


# The statements a skip runs on every request, built once each (bound parameters): a
# request pays their execution, not building and keying them again.


@cache
def _subscription_query() -> Select[str, str, str, dict[str, str]]:
    # Columns, not the mapped row: a look-up per skip, without the ORM's identity map.
    row = SubscriptionRow
    return select(row.topic, row.name, row.type, row.properties).where(
        row.topic == bindparam("topic"), row.name == bindparam("name")
    )


@cache
def _ledgers_query() -> Select[str, int, int, int]:
    # The outer join keeps a partition without ledgers and tells a missing one apart.
    return (
        select(TopicPartitionRow.name, LedgerRow.ledger_id, LedgerRow.entries, LedgerRow.messages)
        .outerjoin(LedgerRow, LedgerRow.topic_partition == TopicPartitionRow.name)
        .where(TopicPartitionRow.name.in_(bindparam("names", expanding=True)))
        .order_by(TopicPartitionRow.name, LedgerRow.ledger_id)
    )


@cache
def _segments_query() -> Select[str, int, int, int, int, str]:
    return (
        select(
            LedgerRow.topic_partition,
            SegmentRow.ledger_id,
            SegmentRow.first_entry,
            SegmentRow.last_entry,
            SegmentRow.messages,
            SegmentRow.path,
        )
        .join(LedgerRow, LedgerRow.ledger_id == SegmentRow.ledger_id)
        .where(LedgerRow.topic_partition.in_(bindparam("names", expanding=True)))
        .order_by(LedgerRow.topic_partition, SegmentRow.ledger_id, SegmentRow.first_entry)
    )


def subscription_info(row: SubscriptionRow) -> SubscriptionInfo:
    return SubscriptionInfo(row.topic, row.name, SubscriptionType(row.type), dict(row.properties))


def ledger_info(row: LedgerRow) -> LedgerInfo:
    return LedgerInfo(row.ledger_id, row.topic_partition, row.entries, row.messages)


__all__ = ["ReadView", "ledger_info", "subscription_info"]

"""The audit log and the backlog history, in the caller's transaction.

Every record of a change is written in the transaction of the change it records
(:class:`~core.store.unit_of_work.UnitOfWork`); the metadata store's own methods
open one for a record alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from core.analysis.backlog_audit import BacklogSample
from core.errors import InvalidArgumentError
from core.store.checks import check_int, check_text
from core.store.records import AuditEntry, AuditRecord
from core.store.tables import AuditRow, BacklogHistoryRow


def check(entry: AuditEntry) -> dict[str, object]:
    """``entry``'s fields checked (InvalidArgumentError before any write); its detail as JSON."""
    check_text("audit kind", entry.kind)
    check_text("audit topic", entry.topic)
    if entry.subscription is not None:
        check_text("audit subscription", entry.subscription)
    check_text("audit role", entry.role)
    check_int("audit time", entry.at_ms, 0)
    if not isinstance(entry.detail, Mapping):
        raise InvalidArgumentError("Invalid audit detail: expected a mapping")
    try:
        detail: dict[str, object] = json.loads(json.dumps(dict(entry.detail)))
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"Invalid audit detail: not JSON-serializable: {exc}") from exc
    return detail


_TABLE = AuditRow.metadata.tables[AuditRow.__tablename__]
_INSERT = insert(_TABLE).returning(_TABLE.c.id)
"""The table's own INSERT, not the mapped class's: the ORM's insert paths cost about a
fifth of a skip's writing transaction."""
_INSERT_IN_ORDER = insert(_TABLE).returning(_TABLE.c.id, sort_by_parameter_order=True)
"""Several rows in one statement, their ids in the order of the rows."""


def add(session: Session, entry: AuditEntry) -> int:
    """Append ``entry``; its id. One INSERT ... RETURNING, without the ORM's unit of work:
    nothing reads the row back in this transaction."""
    return int(session.connection().execute(_INSERT, _values(entry)).scalar_one())


def add_many(session: Session, entries: Sequence[AuditEntry]) -> list[int]:
    """Append ``entries`` in order, in one statement; their ids, in the same order (each
    later than the one before)."""
    if len(entries) == 1:
        return [add(session, entries[0])]
    values = [_values(entry) for entry in entries]
    rows = session.connection().execute(_INSERT_IN_ORDER, values).all()
    ids = [int(row[0]) for row in rows]
    if len(ids) != len(entries):
        raise RuntimeError(f"{len(entries)} audit records written, {len(ids)} ids returned")
    return ids


def _values(entry: AuditEntry) -> dict[str, object]:
    detail = check(entry)
    return {
        "at_ms": entry.at_ms,
        "kind": entry.kind,
        "topic": entry.topic,
        "subscription": entry.subscription,
        "role": entry.role,
        "detail": detail,
    }


def newest(
    session: Session,
    topic: str | None,
    limit: int | None,
    kinds: Sequence[str] | None = None,
    subscription: str | None = None,
) -> list[AuditRecord]:
    """The newest ``limit`` records (of one topic, or all; of ``kinds`` only; of one
    subscription only), newest first; every one with ``limit`` None."""
    query = select(AuditRow).order_by(AuditRow.id.desc())
    if limit is not None:
        query = query.limit(limit)
    if topic is not None:
        query = query.where(AuditRow.topic == topic)
    if kinds is not None:
        query = query.where(AuditRow.kind.in_(list(kinds)))
    if subscription is not None:
        query = query.where(AuditRow.subscription == subscription)
    return [_record(row) for row in session.scalars(query)]


def one(session: Session, audit_id: int) -> AuditRecord | None:
    """The record of id ``audit_id``, or None."""
    row = session.get(AuditRow, audit_id)
    return None if row is None else _record(row)


def _record(row: AuditRow) -> AuditRecord:
    return AuditRecord(
        row.id, row.at_ms, row.kind, row.topic, row.subscription, row.role, row.detail
    )


def check_samples(run_id: str, samples: Sequence[BacklogSample]) -> None:
    check_text("audit run id", run_id)
    for sample in samples:
        check_text("backlog topic", sample.topic)
        check_text("backlog subscription", sample.subscription)
        check_int("backlog time", sample.at_ms, 0)
        check_int("backlog messages", sample.messages, 0)
        check_int("backlog entries", sample.entries, 0)
        if sample.oldest_publish_ms is not None:
            check_int("oldest publish time", sample.oldest_publish_ms, 0)


def add_samples(session: Session, run_id: str, samples: Sequence[BacklogSample]) -> int:
    """One row per sample of ``run_id``; rows the run already wrote are kept. How many were new."""
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


def samples(
    session: Session, topic: str, subscription: str | None, since_ms: int | None, limit: int
) -> list[BacklogSample]:
    """History rows of ``topic`` (one subscription or all), oldest first; the newest ``limit``."""
    query = select(BacklogHistoryRow).where(BacklogHistoryRow.topic == topic)
    if subscription is not None:
        query = query.where(BacklogHistoryRow.subscription == subscription)
    if since_ms is not None:
        query = query.where(BacklogHistoryRow.at_ms >= since_ms)
    query = query.order_by(BacklogHistoryRow.at_ms.desc(), BacklogHistoryRow.id.desc())
    rows = list(session.scalars(query.limit(limit)))
    return [
        BacklogSample(
            r.topic, r.subscription, r.at_ms, r.messages, r.entries, r.oldest_publish_ms, r.run_id
        )
        for r in reversed(rows)
    ]


__all__ = ["add", "add_samples", "check", "check_samples", "newest", "one", "samples"]

"""The audit log and the backlog history, in the caller's transaction.

Every record of a change is written in the transaction of the change it records
(a cursor change's :class:`~cursorops.core.store.cursor_door.CursorTransaction`, or a
:class:`~cursorops.core.store.unit_of_work.UnitOfWork`); the metadata store's own methods
open one for a record alone. Records are written and read back in the plain ``?``
statements of :mod:`cursorops.core.store.statements`, so the cursor door's transaction and
a SQLAlchemy one write them alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from cursorops.core.domain.analysis.backlog_audit import BacklogSample
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.store.checks import check_int, check_text
from cursorops.core.store.statements import Statements
from cursorops.core.store.tables import AuditRow, BacklogHistoryRow
from cursorops.core.store.values import AuditEntry, AuditRecord


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


_ROW = "(?, ?, ?, ?, ?, ?)"
_FIELDS = "id, at_ms, kind, topic, subscription, role, detail"


def add_many(statements: Statements, entries: Sequence[AuditEntry]) -> list[int]:
    """Append ``entries`` in order, in one ``INSERT ... RETURNING``; their ids, in the same
    order (each later than the one before). The detail is stored as its JSON text, as the
    table's JSON type writes it."""
    if not entries:
        return []
    values = tuple(
        value
        for entry in entries
        for value in (
            entry.at_ms,
            entry.kind,
            entry.topic,
            entry.subscription,
            entry.role,
            json.dumps(check(entry)),
        )
    )
    rows = statements.rows(
        "INSERT INTO audit_log (at_ms, kind, topic, subscription, role, detail) VALUES "
        + ", ".join([_ROW] * len(entries))
        + " RETURNING id",
        values,
    )
    # The rows are inserted in the order of the VALUES list, each taking the next id.
    ids = sorted(int(row[0]) for row in rows)
    if len(ids) != len(entries):
        raise RuntimeError(f"{len(entries)} audit records written, {len(ids)} ids returned")
    return ids


def records_of(statements: Statements, topic: str, kinds: Sequence[str]) -> list[AuditRecord]:
    """The topic's records of ``kinds``, newest first, as the caller's transaction sees them."""
    if not kinds:
        return []
    marks = ", ".join("?" * len(kinds))
    rows = statements.rows(
        f"SELECT {_FIELDS} FROM audit_log WHERE topic = ? AND kind IN ({marks}) ORDER BY id DESC",
        (topic, *kinds),
    )
    return [
        AuditRecord(
            int(audit_id),
            int(at_ms),
            str(kind),
            str(topic_name),
            None if subscription is None else str(subscription),
            str(role),
            # SQLite gives the stored text; psycopg decodes a json column itself.
            json.loads(detail) if isinstance(detail, str | bytes) else detail,
        )
        for audit_id, at_ms, kind, topic_name, subscription, role, detail in rows
    ]


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


__all__ = [
    "add_many",
    "add_samples",
    "check",
    "check_samples",
    "newest",
    "one",
    "records_of",
    "samples",
]

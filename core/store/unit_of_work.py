"""A unit of work: one write transaction whose caller composes what it writes, when it
changes no cursor.

:meth:`MetadataStore.transaction <cursorops.core.store.metadata.MetadataStore.transaction>`
opens one: saving a plan record with the audit records that say it was planned, say.
Every change of a cursor goes through the cursor door instead
(:class:`~cursorops.core.store.cursor_door.CursorTransaction`), which records its audit record
and an approved plan's claim itself. All of a unit of work commits together or none of
it does. The store grows no method per combination.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from cursorops.core.domain.plans.plan_record import PlanRecord
from cursorops.core.store import audit_log, plan_records
from cursorops.core.store.read_view import ReadView
from cursorops.core.store.statements import ConnectionStatements
from cursorops.core.store.values import AuditEntry


class UnitOfWork:
    """The repositories of one open write transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._statements = ConnectionStatements.of(session)
        self.view = ReadView(session.connection())
        """Look-ups that see what this transaction wrote so far."""

    def record_audit(self, entry: AuditEntry) -> int:
        """Append an audit record of what this transaction changes; its id."""
        return audit_log.add_many(self._statements, [entry])[0]

    def record_audits(self, entries: Sequence[AuditEntry]) -> list[int]:
        """:meth:`record_audit` of each of ``entries``, in order, in one statement; their ids."""
        return audit_log.add_many(self._statements, entries)

    def save_plan(self, record: PlanRecord) -> None:
        """Insert a plan record, with whatever else this transaction records of it."""
        plan_records.add(self.session, record)


__all__ = ["UnitOfWork"]

"""A unit of work: one write transaction whose caller composes what it writes.

:meth:`MetadataStore.transaction <core.store.metadata.MetadataStore.transaction>`
opens one. The caller reads and writes cursors (:class:`~core.store.cursor_door.Journal`),
reads what it needs (:attr:`UnitOfWork.view`), allocates entries for segments it writes
(:meth:`UnitOfWork.append_entries`), appends audit records and claims plan records in
it, in whatever combination the operation needs: a skip is cursor reads under their
locks, the acknowledgements, its audit record and an approved plan's claim; a redrive
adds the segments it publishes. All of it commits together or none of it does. The
store grows no method per combination.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session

from core.skipping.plan_record import PlanRecord
from core.store import audit_log, plan_records, tenancy
from core.store.cursor_door import Journal
from core.store.ledger_index import allocated_entries
from core.store.read_view import ReadView
from core.store.records import Allocation, AuditEntry, AuditRecord
from core.store.statements import ConnectionStatements


class UnitOfWork:
    """The repositories of one open write transaction."""

    def __init__(self, session: Session, *, postgres: bool) -> None:
        self.session = session
        self._statements = ConnectionStatements.of(session)
        self.cursors = Journal(self._statements)
        self.view = ReadView(session.connection())
        """Look-ups that see what this transaction wrote so far."""

    @contextmanager
    def append_entries(
        self, requests: Sequence[tuple[str, int]], max_entries_per_ledger: int
    ) -> Iterator[list[Allocation]]:
        """:meth:`MetadataStore.append_entries_many
        <core.store.ledger_index.LedgerIndex.append_entries_many>` in this transaction.

        The segments are registered when the block ends normally, but visible to
        other transactions only once this one commits; the partitions stay locked
        until then. A segment file written for a transaction that never commits is
        never listed, so never read (the next append reuses its entry ids and name).
        """
        with allocated_entries(self.session, requests, max_entries_per_ledger) as allocations:
            yield allocations

    def remove_subscription(self, topic: str, name: str) -> None:
        """Delete a subscription of canonical ``topic`` with its cursors and journals."""
        tenancy.remove_subscription(self.session, topic, name)

    def record_audit(self, entry: AuditEntry) -> int:
        """Append an audit record of what this transaction changes; its id."""
        return audit_log.add_many(self._statements, [entry])[0]

    def record_audits(self, entries: Sequence[AuditEntry]) -> list[int]:
        """:meth:`record_audit` of each of ``entries``, in order, in one statement; their ids."""
        return audit_log.add_many(self._statements, entries)

    def audit_records(self, topic: str, kinds: Sequence[str]) -> list[AuditRecord]:
        """The topic's audit records of ``kinds``, newest first, as this transaction sees
        them: after a row lock, what a concurrent writer committed before it too."""
        return audit_log.newest(self.session, topic, None, kinds)

    def save_plan(self, record: PlanRecord) -> None:
        """Insert a plan record, with whatever else this transaction records of it."""
        plan_records.add(self.session, record)

    def claim_plan(self, digest: str, at_ms: int, applied: Mapping[str, Any]) -> None:
        """Mark a plan record applied; raises PlanAlreadyAppliedError if it already was."""
        plan_records.claim(self._statements, digest, at_ms, applied)


__all__ = ["UnitOfWork"]

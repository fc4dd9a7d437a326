"""The request records of workflows that plan in a step of their own: one per run, never
updated (:mod:`cursorops.core.domain.plans.request_record`).

The run's identity (``dag_id``, ``run_id``) is unique in the table, so the first write
for a run is the only one. Writing the same request again returns the stored record;
writing a different one is refused.
"""

from __future__ import annotations

from sqlalchemy import select

from cursorops.core.domain.errors import AlreadyExistsError, NotAuthorizedError
from cursorops.core.domain.plans.request_record import RequestRecord
from cursorops.core.store.checks import check_int, check_text
from cursorops.core.store.plan_records import SessionFactory
from cursorops.core.store.tables import RequestRecordRow


class RequestRecords:
    """Reads and writes of request records; ``session(write=...)`` is the store's transaction."""

    def __init__(self, session: SessionFactory) -> None:
        self._session = session

    def save(self, record: RequestRecord) -> RequestRecord:
        """Insert ``record`` (its digest checked first) as its run's request. If the run has
        a record already, return that one when it is the same request; refuse
        (NotAuthorizedError) when it is another."""
        record.verified()
        row = RequestRecordRow(
            digest=record.digest,
            operation=check_text("operation", record.operation),
            dag_id=check_text("run's DAG", record.dag_id),
            run_id=check_text("run id", record.run_id),
            requester=check_text("requester", record.requester),
            role=check_text("role", record.role),
            topic=check_text("topic", record.topic),
            subscription=check_text("subscription", record.subscription),
            arguments=dict(record.arguments),
            created_at_ms=check_int("request time", record.created_at_ms, 0),
        )
        try:
            with self._session(write=True, conflict="The run's request is recorded") as session:
                session.add(row)
            return record
        except AlreadyExistsError:
            stored = self.for_run(record.dag_id, record.run_id)
            if stored is None or stored.digest != record.digest:
                raise NotAuthorizedError(
                    f"Run {record.run_id} of {record.dag_id} has a request recorded already, "
                    "and it is not this one: a run's request is recorded once; refused"
                ) from None
            return stored

    def for_run(self, dag_id: str, run_id: str) -> RequestRecord | None:
        """The request recorded for the run (None: none is)."""
        query = select(RequestRecordRow).where(
            RequestRecordRow.dag_id == dag_id, RequestRecordRow.run_id == run_id
        )
        with self._session(write=False) as session:
            row = session.scalars(query).one_or_none()
            return None if row is None else _record(row)


def _record(row: RequestRecordRow) -> RequestRecord:
    return RequestRecord(
        operation=row.operation,
        dag_id=row.dag_id,
        run_id=row.run_id,
        requester=row.requester,
        role=row.role,
        topic=row.topic,
        subscription=row.subscription,
        arguments=row.arguments,
        created_at_ms=row.created_at_ms,
        digest=row.digest,
    )

"""The plan records of gated operations and the approval requests their gates showed.

One aggregate, in its own tables (``plan_records``, ``approval_requests``):
a record is written once and never updated, except for the one claim that
marks it applied, made inside the transaction that acknowledges its messages
(:func:`claim`), so a plan is applied at most once whatever retries or clears
the workflow sees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from core.errors import PlanAlreadyAppliedError
from core.skipping.plan_record import ApprovalRequest, PlanBinding, PlanRecord
from core.store.checks import check_int, check_text
from core.store.tables import ApprovalRequestRow, PlanRecordRow

SessionFactory = Callable[..., AbstractContextManager[Session]]


class PlanRecords:
    """Reads and writes of plan records; ``session(write=...)`` is the store's transaction."""

    def __init__(self, session: SessionFactory) -> None:
        self._session = session

    def save(self, record: PlanRecord) -> PlanRecord:
        """Insert ``record`` (its digest checked against its content first)."""
        with self._session(write=True, conflict=f"Plan record {record.digest} exists") as session:
            add(session, record)
        return record

    def current(self, dag_id: str, run_id: str) -> PlanRecord | None:
        """The newest record bound to the run (None: the run planned nothing)."""
        query = (
            select(PlanRecordRow)
            .where(PlanRecordRow.dag_id == dag_id, PlanRecordRow.run_id == run_id)
            .order_by(PlanRecordRow.id.desc())
            .limit(1)
        )
        with self._session(write=False) as session:
            row = session.scalars(query).one_or_none()
            return None if row is None else _record(row)

    def get(self, digest: str) -> PlanRecord | None:
        with self._session(write=False) as session:
            row = session.scalars(
                select(PlanRecordRow).where(PlanRecordRow.digest == digest)
            ).one_or_none()
            return None if row is None else _record(row)

    def waiting(self, topic: str | None = None, limit: int = 100) -> list[PlanRecord]:
        """The newest records not applied (of one topic, or all), newest first."""
        query = (
            select(PlanRecordRow)
            .where(PlanRecordRow.applied_at_ms.is_(None))
            .order_by(PlanRecordRow.id.desc())
            .limit(check_int("limit", limit, 0))
        )
        if topic is not None:
            query = query.where(PlanRecordRow.topic == topic)
        with self._session(write=False) as session:
            return [_record(row) for row in session.scalars(query)]

    def record_request(self, request: ApprovalRequest) -> None:
        """Record what a gate shows, before it waits."""
        row = ApprovalRequestRow(
            digest=request.digest,
            dag_id=request.dag_id,
            run_id=request.run_id,
            gate=check_text("gate", request.gate),
            body_sha256=check_text("body digest", request.body_sha256),
            approvers=list(request.approvers),
            presented_at_ms=check_int("presentation time", request.presented_at_ms, 0),
            valid_for_ms=check_int("validity", request.valid_for_ms, 1),
            subject=request.subject,
            body=request.body,
        )
        with self._session(write=True) as session:
            session.add(row)

    def requests(self, dag_id: str, run_id: str) -> list[ApprovalRequest]:
        """Every presentation the run's gates recorded, oldest first."""
        query = (
            select(ApprovalRequestRow)
            .where(ApprovalRequestRow.dag_id == dag_id, ApprovalRequestRow.run_id == run_id)
            .order_by(ApprovalRequestRow.id)
        )
        with self._session(write=False) as session:
            return [
                ApprovalRequest(
                    row.digest,
                    row.dag_id,
                    row.run_id,
                    row.gate,
                    row.body_sha256,
                    tuple(row.approvers),
                    row.presented_at_ms,
                    row.valid_for_ms,
                    row.subject,
                    row.body,
                )
                for row in session.scalars(query)
            ]


def add(session: Session, record: PlanRecord) -> None:
    """Insert ``record`` in the caller's transaction (its digest checked against its content
    first)."""
    record.verified()
    b = record.binding
    session.add(
        PlanRecordRow(
            digest=record.digest,
            operation=b.operation,
            dag_id=check_text("run's DAG", b.dag_id),
            run_id=check_text("run id", b.run_id),
            requester=check_text("requester", b.requester),
            role=check_text("role", b.role),
            topic=record.topic,
            subscription=record.subscription,
            created_at_ms=check_int("plan time", record.created_at_ms, 0),
            plan_id=record.plan_id,
            plan_json=record.plan_json,
            document=dict(record.document),
            messages=record.messages,
            required_approvals=record.required_approvals,
        )
    )


def claim(session: Session, digest: str, at_ms: int, applied: Mapping[str, Any]) -> None:
    """Mark the record applied, in the caller's transaction; raise if it already was."""
    claimed = session.execute(
        update(PlanRecordRow)
        .where(PlanRecordRow.digest == digest, PlanRecordRow.applied_at_ms.is_(None))
        .values(applied_at_ms=at_ms, applied=dict(applied))
        .execution_options(synchronize_session=False)
    )
    if claimed.rowcount != 1:  # type: ignore[attr-defined]
        raise PlanAlreadyAppliedError(
            f"Plan {digest} was applied already (a plan is applied at most once): "
            "nothing applied by this attempt"
        )


def _record(row: PlanRecordRow) -> PlanRecord:
    return PlanRecord(
        binding=PlanBinding(row.dag_id, row.run_id, row.requester, row.role, row.operation),
        topic=row.topic,
        subscription=row.subscription,
        created_at_ms=row.created_at_ms,
        plan_json=row.plan_json,
        plan_id=row.plan_id,
        document=row.document,
        messages=row.messages,
        required_approvals=row.required_approvals,
        digest=row.digest,
        applied_at_ms=row.applied_at_ms,
        applied=row.applied,
    )

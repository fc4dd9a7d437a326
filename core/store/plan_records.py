"""The plan records of gated operations, what their gates showed and the answers given.

One aggregate, in its own tables (``plan_records``, ``approval_requests``,
``approval_answers``): a row is written once and never updated, except for the
one claim that marks a record applied, made inside the transaction that
acknowledges its messages (:func:`claim`), so a plan is applied at most once
whatever retries or clears the workflow sees. A gate shows at most one
presentation per run, and a presentation has at most one answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cursorops.core.domain.errors import (
    AlreadyExistsError,
    NotAuthorizedError,
    PlanAlreadyAppliedError,
)
from cursorops.core.domain.plans.plan_record import (
    ApprovalAnswer,
    ApprovalRequest,
    PlanBinding,
    PlanRecord,
)
from cursorops.core.store.checks import check_int, check_text
from cursorops.core.store.statements import Statements
from cursorops.core.store.tables import ApprovalAnswerRow, ApprovalRequestRow, PlanRecordRow

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
        """Record what a gate shows, before it waits; refuse (AlreadyExistsError) when the
        run's gate showed something already: a gate presents once per run."""
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
            try_number=None
            if request.try_number is None
            else check_int("try", request.try_number, 0),
        )
        with self._session(write=True) as session:
            shown = session.scalar(
                select(ApprovalRequestRow.id)
                .where(
                    ApprovalRequestRow.dag_id == request.dag_id,
                    ApprovalRequestRow.run_id == request.run_id,
                    ApprovalRequestRow.gate == request.gate,
                )
                .limit(1)
            )
            if shown is not None:
                raise AlreadyExistsError(
                    f"Gate {request.gate} of run {request.run_id} showed its request already"
                )
            session.add(row)

    def requests(self, dag_id: str, run_id: str) -> list[ApprovalRequest]:
        """Every presentation the run's gates recorded, oldest first."""
        query = (
            select(ApprovalRequestRow)
            .where(ApprovalRequestRow.dag_id == dag_id, ApprovalRequestRow.run_id == run_id)
            .order_by(ApprovalRequestRow.id)
        )
        with self._session(write=False) as session:
            return [_request(row) for row in session.scalars(query)]

    def record_answer(
        self,
        dag_id: str,
        run_id: str,
        gate: str,
        try_number: int,
        chosen: Sequence[str],
        responded_by: str | None,
        responded_at_ms: int,
    ) -> ApprovalAnswer:
        """Record the answer Airflow resumed try ``try_number`` of the run's gate with, as the
        answer to what that gate showed. Recording the same answer again returns it; any
        other answer to a presentation already answered, or an answer to a try that showed
        nothing, is refused (NotAuthorizedError)."""
        choice = [check_text("chosen option", c) for c in chosen]
        when = check_int("answer time", responded_at_ms, 0)
        with self._session(write=True, conflict=f"Gate {gate} of {run_id} has an answer") as s:
            row = s.scalars(
                select(ApprovalRequestRow)
                .where(
                    ApprovalRequestRow.dag_id == dag_id,
                    ApprovalRequestRow.run_id == run_id,
                    ApprovalRequestRow.gate == gate,
                )
                .order_by(ApprovalRequestRow.id.desc())
                .limit(1)
            ).one_or_none()
            if row is None or row.try_number not in (None, try_number):
                raise NotAuthorizedError(
                    f"Try {try_number} of gate {gate} of run {run_id} showed nothing: "
                    "its answer is not recorded"
                )
            answer = ApprovalAnswer(_request(row), tuple(choice), responded_by, when)
            found = s.scalars(
                select(ApprovalAnswerRow).where(ApprovalAnswerRow.request_id == row.id)
            ).one_or_none()
            if found is not None:
                if _answer(answer.request, found) != answer:
                    raise NotAuthorizedError(
                        f"Gate {gate} of run {run_id} was answered already: the answer "
                        "recorded first stands"
                    )
                return answer
            s.add(
                ApprovalAnswerRow(
                    request_id=row.id,
                    chosen=choice,
                    responded_by=responded_by,
                    responded_at_ms=when,
                )
            )
        return answer

    def answers(self, dag_id: str, run_id: str) -> list[ApprovalAnswer]:
        """The answers the run's gates recorded, in the order of their presentations."""
        query = (
            select(ApprovalRequestRow, ApprovalAnswerRow)
            .join(ApprovalAnswerRow, ApprovalAnswerRow.request_id == ApprovalRequestRow.id)
            .where(ApprovalRequestRow.dag_id == dag_id, ApprovalRequestRow.run_id == run_id)
            .order_by(ApprovalRequestRow.id)
        )
        with self._session(write=False) as session:
            return [_answer(_request(shown), answer) for shown, answer in session.execute(query)]


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


def claim(statements: Statements, digest: str, at_ms: int, applied: Mapping[str, Any]) -> None:
    """Mark the record applied, in the caller's transaction (the cursor door's, with the
    change it applies); raise if it already was."""
    claimed = statements.execute(
        "UPDATE plan_records SET applied_at_ms = ?, applied = ? "
        "WHERE digest = ? AND applied_at_ms IS NULL",
        (at_ms, json.dumps(dict(applied)), digest),
    )
    if claimed != 1:
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


def _request(row: ApprovalRequestRow) -> ApprovalRequest:
    return ApprovalRequest(
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
        row.try_number,
    )


def _answer(request: ApprovalRequest, row: ApprovalAnswerRow) -> ApprovalAnswer:
    return ApprovalAnswer(request, tuple(row.chosen), row.responded_by, row.responded_at_ms)

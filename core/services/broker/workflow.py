"""Workflow records: plan records of gated operations, approval requests and their answers,
the audit log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import InvalidSkipPlanError, NotAuthorizedError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.plans.plan_record import (
    ApprovalAnswer,
    ApprovalRequest,
    PlanBinding,
    PlanRecord,
)
from cursorops.core.domain.plans.request_record import RequestRecord
from cursorops.core.domain.portable_plan import PortablePlan
from cursorops.core.services.broker.context import Collaborator
from cursorops.core.services.gating.registry import (
    RECORDED_OPERATIONS,
    new_record,
    recorded,
    topics_of,
)
from cursorops.core.store.metadata import AuditEntry, AuditRecord

PLANNED = "-planned"
REQUEST = "-request"
NOT_STARTED = "not-started"
"""The outcome of the closing record of a request whose run did not start."""


def planned_kind(operation: str) -> str:
    """Audit kind of a request of ``operation`` recorded as planned (``skip-planned``, ...)."""
    return f"{operation}{PLANNED}"


@dataclass(frozen=True)
class OpenRequest:
    """A request recorded as planned with no closing record, and whether its plan record
    was applied all the same (a run forced to success after its apply)."""

    planned: AuditRecord
    applied_at_ms: int | None

    def to_json(self) -> dict[str, Any]:
        d = self.planned.detail
        return {
            "plannedAtMs": self.planned.at_ms,
            "topic": self.planned.topic,
            "subscription": self.planned.subscription,
            "role": self.planned.role,
            **{k: d.get(k) for k in ("planDigest", "operation", "dagId", "runId", "requester")},
            **{k: d.get(k) for k in ("reason", "ticket", "messages", "requiredApprovals")},
            "applied": self.applied_at_ms is not None,
            "appliedAtMs": self.applied_at_ms,
        }


class Workflow(Collaborator):
    """What the approval workflow and the front doors record, and read back."""

    def save_plan_record(
        self, binding: PlanBinding, plan: PortablePlan, document: Mapping[str, object]
    ) -> PlanRecord:
        """Store ``plan`` as the current plan of ``binding``'s run; the record, its digest and
        the approvals it needs (the namespace's policy, by the plan's size in messages).

        Every gated operation moves a subscription's cursor on each of the plan's topics
        (:meth:`~cursorops.core.services.gating.operation.GatedOperation.topics`: a redrive's
        dead-letter topic
        too), so the requester's role must hold the skip permission on each, whatever else
        the operation's own planning checked; the strictest of their namespaces' policies
        decides the approvals."""
        operation = recorded(binding.operation)
        topics = operation.topics(plan)
        approvals = 1
        for topic in topics:
            info = self.access.authorized_topic(binding.role, Operation.SKIP, topic)
            if info.name != topic:
                raise InvalidSkipPlanError(f"Invalid plan: '{topic}' is not canonical")
            policy = self.metadata.approval_policy(TopicName.parse(info.name).namespace_name)
            approvals = max(approvals, policy.approvals_for(operation.messages(plan)))
        at_ms = self.clock()
        record = new_record(
            binding, plan, document, required_approvals=approvals, created_at_ms=at_ms
        )
        # Recorded as planned, on each of its topics, with the record itself: a run that
        # never closes (forced green, failed, abandoned) still leaves a request in the log
        # with no closing record (open_requests).
        detail = {
            "planDigest": record.digest,
            "dagId": binding.dag_id,
            "runId": binding.run_id,
            "requester": binding.requester,
            "operation": binding.operation,
            "messages": record.messages,
            "requiredApprovals": record.required_approvals,
            "reason": record.document.get("reason"),
            "ticket": record.document.get("ticket"),
        }
        kind = planned_kind(binding.operation)
        with self.metadata.transaction() as work:
            work.save_plan(record)
            work.record_audits(
                [
                    AuditEntry(kind, topic, record.subscription, binding.role, detail, at_ms)
                    for topic in topics
                ]
            )
        return record

    def close_unstarted(self, record: PlanRecord, why: str) -> None:
        """Close a request whose run did not start (the workflow system refused or failed
        after the record was stored): an ``<operation>-request`` record on each of its
        topics, outcome ``not-started``. Its plan record stays, never applied: a run bound
        to it that starts after all (a start that failed late) refuses it
        (:meth:`bound_plan_record`)."""
        b = record.binding
        detail = {
            "dagId": b.dag_id,
            "runId": b.run_id,
            "requester": b.requester,
            "reason": record.document.get("reason"),
            "ticket": record.document.get("ticket"),
            "planDigest": record.digest,
            "operation": b.operation,
            "messages": record.messages,
            "outcome": NOT_STARTED,
            "statement": f"The run did not start: {why}. Nothing applied.",
        }
        at_ms = self.clock()
        kind = f"{b.operation}{REQUEST}"
        with self.metadata.transaction() as work:
            work.record_audits(
                [
                    AuditEntry(kind, topic, record.subscription, b.role, detail, at_ms)
                    for topic in topics_of(record)
                ]
            )

    def bound_plan_record(
        self,
        role: str,
        digest: str,
        dag_id: str,
        run_id: str,
        requester: str | None,
        *,
        started: bool = False,
    ) -> PlanRecord:
        """The plan record ``digest`` names, checked against its digest, refused
        (NotAuthorizedError) unless it is bound to this very run (``dag_id``, ``run_id``)
        and ``requester``: a run started by hand with another run's digest, or by another
        person, gets nothing. ``started``: refused too when its request was closed as not
        started. ``role`` must read the topic's stats."""
        found = self.metadata.plans.get(digest) if isinstance(digest, str) and digest else None
        if found is None:
            raise NotAuthorizedError(f"No plan record {digest!r}: nothing to approve")
        record = found.verified()
        b = record.binding
        if (b.dag_id, b.run_id) != (dag_id, run_id):
            raise NotAuthorizedError(
                f"Plan {record.digest} is bound to run {b.run_id} of {b.dag_id}, not to this "
                f"run {run_id}: a request is started by its door, nothing applied"
            )
        if not requester or requester != b.requester:
            raise NotAuthorizedError(
                f"Plan {record.digest} was asked for by {b.requester}, not by this run's "
                f"requester ({requester}): nothing applied"
            )
        self.access.authorized_topic(role, Operation.GET_STATS, record.topic)
        if started:
            closing = self.metadata.audit_log(
                record.topic,
                None,
                kinds=[f"{b.operation}{REQUEST}"],
                subscription=record.subscription,
            )
            if any(
                r.detail.get("planDigest") == record.digest
                and r.detail.get("outcome") == NOT_STARTED
                for r in closing
            ):
                raise NotAuthorizedError(
                    f"The request of plan {record.digest} was closed when its run did not "
                    "start: nothing applied; make a new request"
                )
        return record

    def save_request_record(self, record: RequestRecord) -> RequestRecord:
        """Store ``record`` as its run's request: once per run (the same request again
        returns the stored record; another one is refused, NotAuthorizedError)."""
        return self.metadata.requests.save(record)

    def run_request_record(self, dag_id: str, run_id: str, requester: str | None) -> RequestRecord:
        """The request recorded for the run (``dag_id``, ``run_id``), checked against its
        digest; refused (NotAuthorizedError) when the run recorded none, or when it was
        asked for by someone other than ``requester``, the run's triggering user."""
        found = self.metadata.requests.for_run(dag_id, run_id)
        if found is None:
            raise NotAuthorizedError(
                f"No request is recorded for run {run_id} of {dag_id}: a run's first task "
                "records it; nothing done"
            )
        return found.bound_to(dag_id, run_id, requester)

    def current_plan_record(self, role: str, dag_id: str, run_id: str) -> PlanRecord | None:
        """The plan a run is bound to now (its newest record), checked against its digest;
        None when the run planned nothing. ``role`` must read the topic's stats."""
        record = self.metadata.plans.current(dag_id, run_id)
        if record is None:
            return None
        self.access.authorized_topic(role, Operation.GET_STATS, record.topic)
        return record.verified()

    def waiting_plan_records(self, role: str, topic: str) -> list[PlanRecord]:
        """The topic's plan records not applied, newest first (GET_STATS on the topic)."""
        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.plans.waiting(info.name)

    def record_approval_request(self, request: ApprovalRequest) -> None:
        """What a gate shows for a plan record, recorded before it waits."""
        self.metadata.plans.record_request(request)

    def approval_requests(self, dag_id: str, run_id: str) -> list[ApprovalRequest]:
        return self.metadata.plans.requests(dag_id, run_id)

    def record_approval_answer(
        self,
        dag_id: str,
        run_id: str,
        gate: str,
        try_number: int,
        chosen: Sequence[str],
        responded_by: str | None,
        responded_at_ms: int,
    ) -> ApprovalAnswer:
        """The answer Airflow resumed a waiting gate with, recorded as the answer to what that
        gate's try showed (once; the same answer again returns it)."""
        return self.metadata.plans.record_answer(
            dag_id, run_id, gate, try_number, chosen, responded_by, responded_at_ms
        )

    def approval_answers(self, dag_id: str, run_id: str) -> list[ApprovalAnswer]:
        """The answers the run's gates recorded, in the order they showed their requests."""
        return self.metadata.plans.answers(dag_id, run_id)

    def open_requests(self, role: str, topic: str) -> list[OpenRequest]:
        """The topic's requests recorded as planned and never closed, newest first: no
        ``<operation>-request`` record names their plan (the workflow's closing task did
        not run: the run waits, or was forced to a state, failed before it, or was
        abandoned), and no later plan of the same run replaced theirs. Nothing of such a
        request was applied unless its plan record says so (GET_STATS on the topic)."""
        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        kinds = [f"{op}{end}" for op in RECORDED_OPERATIONS for end in (PLANNED, REQUEST)]
        records = self.metadata.audit_log(info.name, None, kinds=kinds)
        closed = {r.detail.get("planDigest") for r in records if r.kind.endswith(REQUEST)}
        newest: set[tuple[object, object]] = set()
        out = []
        for r in records:
            if not r.kind.endswith(PLANNED):
                continue
            run = (r.detail.get("dagId"), r.detail.get("runId"))
            if run in newest:
                continue  # replaced by a later plan of the same run
            newest.add(run)
            digest = r.detail.get("planDigest")
            if digest not in closed:
                plan = self.metadata.plans.get(str(digest))
                out.append(OpenRequest(r, None if plan is None else plan.applied_at_ms))
        return out

    def record_audit(
        self,
        role: str,
        kind: str,
        topic: str,
        subscription: str | None,
        detail: Mapping[str, object],
    ) -> int:
        """Append a record of what ``role`` did on ``topic`` to the audit log; its id.

        The caller must be allowed to read the topic's stats (GET_STATS); the
        record is stamped with the broker's clock. ``detail`` must be JSON.
        """
        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.record_audit(kind, info.name, subscription, role, detail, self.clock())

    def audit_log(
        self, role: str, topic: str, *, kind: str | None = None, limit: int = 100
    ) -> list[AuditRecord]:
        """The newest ``limit`` audit records of ``topic`` (of one ``kind``), newest first.

        Authorized as GET_STATS on the topic.
        """
        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        records = self.metadata.audit_log(info.name, limit if kind is None else max(limit, 1000))
        if kind is not None:
            records = [r for r in records if r.kind == kind][:limit]
        return records

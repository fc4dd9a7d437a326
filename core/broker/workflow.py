"""Workflow records: plan records of gated operations, approval requests, the audit log."""

from __future__ import annotations

from collections.abc import Mapping

from core.authz import Operation
from core.broker.context import Collaborator
from core.errors import InvalidSkipPlanError
from core.ids.topic_name import TopicName
from core.skipping.plan_record import (
    ApprovalRequest,
    GatedPlan,
    PlanBinding,
    PlanRecord,
    gated_topics,
    plan_messages,
)
from core.store.metadata import AuditRecord


class Workflow(Collaborator):
    """What the approval workflow and the front doors record, and read back."""

    def save_plan_record(
        self, binding: PlanBinding, plan: GatedPlan, document: Mapping[str, object]
    ) -> PlanRecord:
        """Store ``plan`` as the current plan of ``binding``'s run; the record, its digest and
        the approvals it needs (the namespace's policy, by the plan's size in messages).

        Every gated operation moves a subscription's cursor on each of the plan's topics
        (:func:`~core.skipping.plan_record.gated_topics`: a redrive's dead-letter topic
        too), so the requester's role must hold the skip permission on each, whatever else
        the operation's own planning checked; the strictest of their namespaces' policies
        decides the approvals."""
        approvals = 1
        for topic in gated_topics(plan):
            info = self.access.authorized_topic(binding.role, Operation.SKIP, topic)
            if info.name != topic:
                raise InvalidSkipPlanError(f"Invalid plan: '{topic}' is not canonical")
            policy = self.metadata.approval_policy(TopicName.parse(info.name).namespace_name)
            approvals = max(approvals, policy.approvals_for(plan_messages(plan)))
        record = PlanRecord.create(
            binding,
            plan,
            document,
            required_approvals=approvals,
            created_at_ms=self.clock(),
        )
        return self.metadata.plans.save(record)

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

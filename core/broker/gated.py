"""The one door of every approved plan record: each gated operation applies its own kind.

A gated operation supplies its plan, preview and apply in ``core``; the workflow
(``airflow_glue``) plans, gates and then hands the approved record here. The
record's operation, which its digest covers, chooses the apply: nothing a
requester wrote does. Every apply commits the change, its audit record and the
record's claim (applied at most once) in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.broker.admin import Admin
from core.broker.context import BrokerContext, Collaborator
from core.broker.cursor_ops import CursorOperations
from core.broker.redrive import Redrive
from core.broker.reset import Resets
from core.broker.undo import SkipUndo
from core.errors import InvalidArgumentError, PlanAlreadyAppliedError
from core.redriving.redrive_plan import RedrivePlan
from core.resetting.reset_plan import ResetPlan
from core.resetting.unsubscribe_plan import UnsubscribePlan
from core.skipping.plan_record import (
    REDRIVE,
    RESET_CURSOR,
    SKIP,
    UNDO_SKIP,
    UNSUBSCRIBE,
    PlanRecord,
)
from core.skipping.undo import UndoPlan


@dataclass(frozen=True)
class Applied:
    """What an approved apply did, in the shape the workflow records: the operation, how
    many messages it changed, and its own JSON outcome."""

    operation: str
    changed: int
    """Messages acknowledged (skip), un-acknowledged (undo-skip), published (redrive),
    moved either way (reset-cursor, as planned) or dropped (unsubscribe)."""
    unchanged: int
    """Messages of the plan left as they were (acknowledged meanwhile, gone, ...)."""
    outcome: Mapping[str, Any]


class GatedOperations(Collaborator):
    """Applies an approved plan record by its operation."""

    def __init__(
        self,
        context: BrokerContext,
        cursor_ops: CursorOperations,
        resets: Resets,
        redrive: Redrive,
        undo: SkipUndo,
        admin: Admin,
    ) -> None:
        super().__init__(context)
        self.cursor_ops = cursor_ops
        self.resets = resets
        self.redrive = redrive
        self.undo = undo
        self.admin = admin

    def apply_approved_plan(
        self,
        record: PlanRecord,
        approvals: Sequence[Mapping[str, object]],
        *,
        via: str = "airflow",
    ) -> Applied:
        """Apply ``record`` (its approvals checked by the caller: who, when, for this digest)
        as its requester's role, by its operation."""
        record = record.verified()
        if record.applied_at_ms is not None:
            raise PlanAlreadyAppliedError(
                f"Plan {record.digest} was applied already (a plan is applied at most once)"
            )
        if record.operation == SKIP:
            done = self.cursor_ops.apply_approved_skip(record, approvals, via=via)
            return Applied(
                SKIP,
                changed=len(done.skipped),
                unchanged=len(done.acknowledged_meanwhile) + len(done.already_acknowledged),
                outcome=done.to_pulsar_json(),
            )
        by = [str(a.get("approver")) for a in approvals]
        extra = {"runId": record.binding.run_id, "planDigest": record.digest, "approvedBy": by}
        role = record.binding.role
        plan = record.plan()
        if record.operation == RESET_CURSOR and isinstance(plan, ResetPlan):
            moved = self.resets.apply_reset(role, plan, via=via, _approved=(record, extra))
            return Applied(RESET_CURSOR, plan.messages, 0, {"markDelete": moved})
        if record.operation == UNDO_SKIP and isinstance(plan, UndoPlan):
            undone = self.undo.apply_undo_skip(role, plan, via=via, _approved=(record, extra))
            return Applied(
                UNDO_SKIP,
                len(undone.unacknowledged),
                len(undone.not_acknowledged),
                undone.to_json(),
            )
        if record.operation == REDRIVE and isinstance(plan, RedrivePlan):
            redrove = self.redrive.apply_redrive(role, plan, via=via, _approved=(record, extra))
            return Applied(
                REDRIVE,
                len(redrove.redriven),
                len(redrove.acknowledged_meanwhile),
                redrove.to_json(),
            )
        if record.operation == UNSUBSCRIBE and isinstance(plan, UnsubscribePlan):
            dropped = self.admin.apply_unsubscribe(role, plan, via=via, _approved=(record, extra))
            return Applied(UNSUBSCRIBE, dropped, 0, {"dropped": dropped})
        raise InvalidArgumentError(f"No apply for operation {record.operation!r}")

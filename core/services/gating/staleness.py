"""Why a gate of a plan record can no longer lead to an apply: what the approval gates
say at once, and the Cursors page shows, instead of offering an Approve that cannot apply.

Pure: the records, the answers the gates recorded and the time are handed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import ApprovalAnswer, PlanRecord


def iso(ms: int) -> str:
    """An answer time as Airflow shows it: ISO 8601 in UTC, to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def stale_reason(
    record: PlanRecord,
    current: PlanRecord | None,
    shown: str | None,
    earlier: Sequence[ApprovalAnswer],
    now_ms: int,
) -> str | None:
    """Why a gate of ``record`` can no longer lead to an apply, or None: the plan was
    applied already; the run was re-planned (``current``, its newest record, is another,
    or the gate ``shown`` another digest); or an earlier gate's Approve was given to another
    plan or has expired. Apply would refuse each (:func:`check_approvals`), so the gate
    says so at once instead of offering an Approve that cannot apply."""
    if record.applied_at_ms is not None:
        return f"Plan {record.digest} was applied already: a plan is applied at most once."
    newest = current.digest if current is not None else record.digest
    for digest in (record.digest, shown):
        if digest is not None and digest != newest:
            return (
                f"The run was re-planned: its plan is now {newest}, not {digest}, and an "
                "approval of the earlier plan never applies the new one."
            )
    for answer in earlier:
        if list(answer.chosen) != ["Approve"]:
            continue
        gate, by = answer.request.gate, answer.responded_by
        if answer.request.digest != record.digest:
            return (
                f"The approval at gate {gate} was given to plan {answer.request.digest}, "
                f"not to this plan {record.digest}: the run was re-planned."
            )
        if now_ms - answer.responded_at_ms > answer.request.valid_for_ms:
            return (
                f"The approval by {by} at {iso(answer.responded_at_ms)} (gate {gate}) expired: "
                f"approvals stay valid for {answer.request.valid_for_ms // 60_000} min."
            )
    return None


STALE_ADVICE = "Nothing was applied; make a new request, which gets its own preview and gates."


__all__ = ["STALE_ADVICE", "iso", "stale_reason"]

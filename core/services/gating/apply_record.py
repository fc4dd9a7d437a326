"""What every gated apply writes beside its cursor change, in the same cursor transaction:
the ticket that entitles the change, its audit record and, for an approved plan record,
the record's claim (applied at most once).

One shape for every slice: the audit record's detail is the operation's own fields, the
door it came through (``via``) and, when approved, who approved which record of which run
(:meth:`~cursorops.core.services.gating.operation.Approval.detail`); the claim repeats that with the
audit record's id and the counts the slice names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.values import AuditEntry

if TYPE_CHECKING:
    from cursorops.core.services.gating.operation import Approval
    from cursorops.core.store.cursor_door import CursorTransaction


def ticket(approval: Approval | None, operation: str) -> Ticket:
    """What entitles ``operation``'s cursor change: the approved record, or none (which the
    cursor door refuses where the namespace requires approval)."""
    return Ticket.gated([approval.digest if approval else None], operation)


def audit_detail(fields: Mapping[str, Any], via: str, approval: Approval | None) -> dict[str, Any]:
    """An apply's audit detail: its own ``fields``, the door, and the approval."""
    return {**fields, "via": via, **(approval.detail() if approval else {})}


def record_apply(
    work: CursorTransaction,
    entry: AuditEntry,
    approval: Approval | None,
    *,
    also: Sequence[AuditEntry] = (),
    **claimed: object,
) -> int:
    """Record ``entry`` (and ``also``, the same apply seen from another topic) and, when
    approved, claim the record with ``claimed`` counts; ``entry``'s audit record id."""
    audit_id = work.record_audits([entry, *also])[0] if also else work.record_audit(entry)
    if approval is not None:
        work.claim_plan(approval.digest, entry.at_ms, approval.claim(audit_id, **claimed))
    return audit_id


__all__ = ["audit_detail", "record_apply", "ticket"]

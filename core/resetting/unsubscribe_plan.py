"""The plan of an unsubscribe: what is dropped (the backlog, possibly none).

Unsubscribing deletes the subscription's cursor with every message it has not
acknowledged: where the namespace requires approval, that is a gated operation.
The plan records the backlog per partition at planning time, which the approver
reads; apply deletes the subscription (whatever arrived since is dropped with it,
and the audit record says how much that was).

Portable JSON with an id derived from its content
(:class:`~cursorops.core.portable_plan.PortablePlan`). Pure: no store here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cursorops.core.errors import InvalidArgumentError
from cursorops.core.portable_plan import PreviewedPlan, Spelling

UNSUBSCRIBE_PLAN_FORMAT = 1


@dataclass(frozen=True)
class UnsubscribePlan(PreviewedPlan):
    """One subscription to delete, and its backlog per partition when planned."""

    SPELLING: ClassVar[Spelling] = Spelling.SORTED
    KIND: ClassVar[str] = "unsubscribe plan"

    topic: str
    subscription: str
    backlog: tuple[tuple[str, int], ...]
    """(partition, messages not acknowledged) at planning time."""
    force: bool
    """Delete it even while consumers are connected (they are disconnected)."""
    planned_at_ms: int

    @property
    def messages(self) -> int:
        """Messages the subscription drops, at planning time (what the quorum counts)."""
        return sum(count for _, count in self.backlog)

    def content(self) -> dict[str, Any]:
        return {
            "format": UNSUBSCRIBE_PLAN_FORMAT,
            "topic": self.topic,
            "subscription": self.subscription,
            "backlog": [[p, c] for p, c in self.backlog],
            "force": self.force,
            "plannedAt": self.planned_at_ms,
        }

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> UnsubscribePlan:
        fields = {"format", "topic", "subscription", "backlog", "force", "plannedAt"}
        if set(content) != fields:
            raise InvalidArgumentError("Invalid unsubscribe plan: unexpected fields")
        backlog = content["backlog"]
        if (
            content["format"] != UNSUBSCRIBE_PLAN_FORMAT
            or not isinstance(content["force"], bool)
            or not isinstance(backlog, list)
            or not all(
                isinstance(row, list)
                and len(row) == 2
                and isinstance(row[0], str)
                and isinstance(row[1], int)
                and not isinstance(row[1], bool)
                and row[1] >= 0
                for row in backlog
            )
        ):
            raise InvalidArgumentError("Invalid unsubscribe plan: malformed")
        planned = content["plannedAt"]
        if isinstance(planned, bool) or not isinstance(planned, int) or planned < 0:
            raise InvalidArgumentError("Invalid unsubscribe plan: bad plannedAt")
        return cls(
            topic=str(content["topic"]),
            subscription=str(content["subscription"]),
            backlog=tuple((row[0], row[1]) for row in backlog),
            force=content["force"],
            planned_at_ms=planned,
        )

    def preview(self) -> dict[str, Any]:
        """What the approver reads: the subscription, what it drops, per partition."""
        return {
            "unsubscribe": self.subscription,
            "messagesDropped": self.messages,
            "evenWithConsumersConnected": self.force,
            "partitions": [{"partition": p, "backlog": c} for p, c in self.backlog],
        }


__all__ = ["UNSUBSCRIBE_PLAN_FORMAT", "UnsubscribePlan"]

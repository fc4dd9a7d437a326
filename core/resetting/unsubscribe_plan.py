"""The plan of an unsubscribe: what is dropped (the backlog, possibly none).

Unsubscribing deletes the subscription's cursor with every message it has not
acknowledged: where the namespace requires approval, that is a gated operation.
The plan records the backlog per partition at planning time, which the approver
reads; apply deletes the subscription (whatever arrived since is dropped with it,
and the audit record says how much that was).

Portable JSON with an id derived from its content. Pure: no store here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from core.errors import InvalidArgumentError
from core.skipping.plan_record import canonical_json

UNSUBSCRIBE_PLAN_FORMAT = 1


@dataclass(frozen=True)
class UnsubscribePlan:
    """One subscription to delete, and its backlog per partition when planned."""

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

    def _body(self) -> dict[str, Any]:
        return {
            "format": UNSUBSCRIBE_PLAN_FORMAT,
            "topic": self.topic,
            "subscription": self.subscription,
            "backlog": [[p, c] for p, c in self.backlog],
            "force": self.force,
            "plannedAt": self.planned_at_ms,
        }

    @cached_property
    def plan_id(self) -> str:
        return hashlib.sha256(canonical_json(self._body()).encode("utf-8")).hexdigest()

    def dumps(self) -> str:
        return canonical_json({"planId": self.plan_id, **self._body()})

    @classmethod
    def from_json(cls, document: object) -> UnsubscribePlan:
        """A plan from :meth:`dumps`'s text; refuses a malformed or altered one."""
        try:
            body = json.loads(document) if isinstance(document, (str, bytes)) else document
        except ValueError as exc:
            raise InvalidArgumentError(f"Invalid unsubscribe plan: not JSON: {exc}") from exc
        fields = {"planId", "format", "topic", "subscription", "backlog", "force", "plannedAt"}
        if not isinstance(body, dict) or set(body) != fields:
            raise InvalidArgumentError("Invalid unsubscribe plan: unexpected fields")
        backlog = body["backlog"]
        if (
            body["format"] != UNSUBSCRIBE_PLAN_FORMAT
            or not isinstance(body["force"], bool)
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
        planned = body["plannedAt"]
        if isinstance(planned, bool) or not isinstance(planned, int) or planned < 0:
            raise InvalidArgumentError("Invalid unsubscribe plan: bad plannedAt")
        plan = cls(
            topic=str(body["topic"]),
            subscription=str(body["subscription"]),
            backlog=tuple((row[0], row[1]) for row in backlog),
            force=body["force"],
            planned_at_ms=planned,
        )
        if body["planId"] != plan.plan_id:
            raise InvalidArgumentError(
                f"Invalid unsubscribe plan: planId {body['planId']!r} does not match its content"
            )
        return plan

    def preview(self) -> dict[str, Any]:
        """What the approver reads: the subscription, what it drops, per partition."""
        return {
            "unsubscribe": self.subscription,
            "messagesDropped": self.messages,
            "evenWithConsumersConnected": self.force,
            "partitions": [{"partition": p, "backlog": c} for p, c in self.backlog],
        }


__all__ = ["UNSUBSCRIBE_PLAN_FORMAT", "UnsubscribePlan"]

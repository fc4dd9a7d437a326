"""The plan of a reset-cursor: where each partition's cursor goes, and what that does.

A reset moves messages in both directions: back, it redelivers everything after
the target (Pulsar forgets the individual acknowledgements past it); forward, it
acknowledges everything before it. The plan resolves the request (a message id,
or a publish time) to one target entry per partition when it is made, so the
approver sees, and apply makes, exactly those moves: a message published after
planning never changes where a time-based reset lands.

Portable JSON with an id derived from its content
(:class:`~cursorops.core.portable_plan.PortablePlan`); a document whose id does not match its
content is refused. Pure: no store here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cursorops.core.errors import InvalidArgumentError
from cursorops.core.ids.position import Position
from cursorops.core.portable_plan import PreviewedPlan, Spelling

RESET_PLAN_FORMAT = 1


@dataclass(frozen=True)
class PartitionReset:
    """One partition's move: from its mark-delete position to ``target`` as the next read."""

    topic_partition: str
    target: Position
    mark_delete_before: Position
    backlog_before: int
    backlog_after: int

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.topic_partition,
            "target": str(self.target),
            "markDeleteBefore": str(self.mark_delete_before),
            "backlogBefore": self.backlog_before,
            "backlogAfter": self.backlog_after,
        }

    @classmethod
    def from_json(cls, body: object, where: str) -> PartitionReset:
        if not isinstance(body, dict) or set(body) != {
            "partition",
            "target",
            "markDeleteBefore",
            "backlogBefore",
            "backlogAfter",
        }:
            raise InvalidArgumentError(f"Invalid reset plan: {where} is malformed")
        counts = [body["backlogBefore"], body["backlogAfter"]]
        if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
            raise InvalidArgumentError(f"Invalid reset plan: {where} has a bad backlog")
        if not isinstance(body["partition"], str) or not body["partition"]:
            raise InvalidArgumentError(f"Invalid reset plan: {where} names no partition")
        return cls(
            body["partition"],
            _position(body["target"], where),
            _position(body["markDeleteBefore"], where),
            counts[0],
            counts[1],
        )


def _position(text: object, where: str) -> Position:
    try:
        ledger, entry = str(text).split(":")
        return Position(int(ledger), int(entry))
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"Invalid reset plan: {where}: {text!r} is no position") from exc


@dataclass(frozen=True)
class ResetPlan(PreviewedPlan):
    """Every partition's move of one reset-cursor; immutable."""

    SPELLING: ClassVar[Spelling] = Spelling.SORTED
    KIND: ClassVar[str] = "reset plan"

    topic: str
    subscription: str
    partitions: tuple[PartitionReset, ...]
    planned_at_ms: int
    timestamp_ms: int | None
    """The publish time asked for; None for a reset to a message id."""

    @property
    def messages(self) -> int:
        """Messages whose state the reset changes, at planning time: redelivered plus
        acknowledged (what the approval quorum counts)."""
        return sum(abs(p.backlog_after - p.backlog_before) for p in self.partitions)

    def content(self) -> dict[str, Any]:
        return {
            "format": RESET_PLAN_FORMAT,
            "topic": self.topic,
            "subscription": self.subscription,
            "partitions": [p.to_json() for p in self.partitions],
            "plannedAt": self.planned_at_ms,
            "timestamp": self.timestamp_ms,
        }

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> ResetPlan:
        fields = {"format", "topic", "subscription", "partitions", "plannedAt", "timestamp"}
        if set(content) != fields:
            raise InvalidArgumentError("Invalid reset plan: unexpected fields")
        if content["format"] != RESET_PLAN_FORMAT or not isinstance(content["partitions"], list):
            raise InvalidArgumentError("Invalid reset plan: unknown format")
        timestamp = content["timestamp"]
        if timestamp is not None and (
            isinstance(timestamp, bool) or not isinstance(timestamp, int)
        ):
            raise InvalidArgumentError("Invalid reset plan: bad timestamp")
        planned = content["plannedAt"]
        if isinstance(planned, bool) or not isinstance(planned, int) or planned < 0:
            raise InvalidArgumentError("Invalid reset plan: bad plannedAt")
        return cls(
            topic=str(content["topic"]),
            subscription=str(content["subscription"]),
            partitions=tuple(
                PartitionReset.from_json(p, f"partitions[{i}]")
                for i, p in enumerate(content["partitions"])
            ),
            planned_at_ms=planned,
            timestamp_ms=timestamp,
        )

    def preview(self) -> dict[str, Any]:
        """What the approver reads: each partition's move and its backlog before and after."""
        return {
            "resetTo": "message id" if self.timestamp_ms is None else "publish time",
            "publishTime": self.timestamp_ms,
            "backlogBefore": sum(p.backlog_before for p in self.partitions),
            "backlogAfter": sum(p.backlog_after for p in self.partitions),
            "partitions": [p.to_json() for p in self.partitions],
        }


__all__ = ["RESET_PLAN_FORMAT", "PartitionReset", "ResetPlan"]

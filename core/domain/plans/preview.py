"""The preview of a gated request: one shape for every operation, built from its plan record.

What an approver decides from, in the same order for a skip, a reset, an undo, a
redrive and an unsubscribe (:class:`Preview`):

- a heading that counts what will change (``Skip 1 message(s), 1 id(s); 2
  already acknowledged``), never what was merely asked for;
- the request: who asked, as which role, why, the ticket, how many approvals it
  needs and, for an undo, who approved the skip it undoes (from that skip's audit
  record, never an approval of the undo itself);
- per partition, before and after: the backlog, and where the operation moves it, the
  mark-delete position and the next read;
- the effect, counted: to be acknowledged, to be redelivered, already acknowledged
  and left as is, dropped with the subscription;
- ordered detail rows (label, plain text: times in UTC, a predicate in words);
- the first messages named (their content cells rendered in one place by each door).

Each operation builds it from a stored record only (its plan and its preview
document, both covered by the record's digest), so a record stored before this shape
existed previews the same way (:meth:`GatedOperation.preview
<cursorops.core.services.gating.operation.GatedOperation.preview>`). Pure: no store here, no
Markdown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cursorops.core.domain.durations import format_time_ms

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord

__all__ = [
    "Effects",
    "MessageRow",
    "PartitionChange",
    "Preview",
    "PreviewRequest",
    "count",
    "predicate_text",
    "request_of",
    "time_text",
]


def count(n: int, what: str = "message") -> str:
    """``3 message(s)``: a count, spelled as every other count cursorops prints."""
    return f"{n} {what}(s)"


def time_text(epoch_ms: object) -> str:
    """A time in UTC (``2026-01-01 10:00:00.000 UTC``) from epoch ms or from the ISO text
    :func:`~cursorops.core.domain.durations.format_time_ms` writes; any other text as written; empty
    for none."""
    if isinstance(epoch_ms, bool) or epoch_ms is None:
        return ""
    text = format_time_ms(epoch_ms) if isinstance(epoch_ms, int) else str(epoch_ms)
    if re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00", text):
        return text.replace("T", " ").replace("+00:00", " UTC")
    return text


def _bound(value: object) -> str:
    """A predicate's time bound: epoch ms in UTC, ``now``, a duration before the scan."""
    if isinstance(value, int) and not isinstance(value, bool):
        return time_text(value)
    text = str(value)
    if text == "now":
        return "the time of the scan"
    if text[:-1].isdigit() and text[-1:] in "smhdw":
        return f"{text} before the scan"
    return text


def _range(what: str, bounds: object) -> str:
    if not isinstance(bounds, Mapping):
        return f"{what} {json.dumps(bounds, sort_keys=True, ensure_ascii=False)}"
    after, before = bounds.get("after"), bounds.get("before")
    if after is None and before is None:
        return f"{what} at any time"
    if after is not None and before is not None:
        return f"{what} at or after {_bound(after)} and before {_bound(before)}"
    if after is not None:
        return f"{what} at or after {_bound(after)}"
    return f"{what} before {_bound(before)}"


def _quoted(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def predicate_text(predicate: Mapping[str, Any] | None, *, none: str = "every message") -> str:
    """A predicate document in words, every condition joined by ``and``: ``everything`` for
    one that holds for every message (``{"publishTime": {"after": 0}}``), ``none`` for no
    predicate. Values another person wrote are quoted as JSON; times are in UTC."""
    if predicate is None:
        return none
    conditions = dict(predicate)
    published = conditions.get("publishTime")
    if isinstance(published, Mapping) and dict(published) in ({"after": 0}, {}):
        conditions.pop("publishTime")
        if not conditions:
            return "everything"
    parts: list[str] = []
    for name, value in conditions.items():
        if name == "key":
            parts.append(f"key is {_quoted(value)}")
        elif name == "properties" and isinstance(value, Mapping):
            parts += [f"property {_quoted(k)} is {_quoted(v)}" for k, v in value.items()]
        elif name == "publishTime":
            parts.append(_range("published", value))
        elif name == "deliverAt":
            parts.append(_range("delayed, due", value))
        elif name == "payloadContains":
            parts.append(f"payload contains {_quoted(value)}")
        elif name == "producer":
            parts.append(f"producer is {_quoted(value)}")
        elif name == "jsonField" and isinstance(value, Mapping):
            parts.append(
                f"JSON field {_quoted(value.get('path'))} equals {_quoted(value.get('equals'))}"
            )
        else:
            parts.append(f"{name} {json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    return " and ".join(parts) if parts else "everything"


@dataclass(frozen=True)
class PreviewRequest:
    """Who asked, why, and the approvals: those the request needs (distinct people, none
    the requester) and, for an undo, those the skip it undoes had."""

    requester: str
    role: str
    reason: str
    ticket: str | None
    approvals_needed: int
    undone_skip_approvals: tuple[str, ...] | None = None
    """For an undo only: who approved the skip it undoes (empty: that skip was applied
    without approval); None for every other operation."""


@dataclass(frozen=True)
class PartitionChange:
    """One partition, before and after; None where the operation does not say (an undo
    knows no backlog, a skip moves no mark-delete position of its own)."""

    partition: str
    backlog_before: int | None = None
    backlog_after: int | None = None
    """None with :attr:`gone`: the subscription is deleted."""
    mark_delete_before: str | None = None
    next_read_after: str | None = None
    """Where the cursor reads next after the change (a reset's target)."""
    acknowledged: int | None = None
    redelivered: int | None = None
    """None: the plan does not count it per partition."""
    ids: int | None = None
    """Ids the plan names on the partition (a skip, an undo, a redrive's dead letters)."""
    gone: bool = False


@dataclass(frozen=True)
class Effects:
    """What the operation does to messages, counted (a whole batch counts its messages)."""

    acknowledged: int = 0
    """To be acknowledged: no longer delivered to the subscription."""
    redelivered: int = 0
    """To be delivered (again) to the subscription."""
    unchanged: int = 0
    """Named by the plan but already as the operation would leave them: left as is."""
    unchanged_as: str = "already acknowledged"
    """What :attr:`unchanged` already are (an undo's: ``no longer acknowledged``)."""
    dropped: int | None = None
    """Dropped with the subscription (an unsubscribe only)."""


@dataclass(frozen=True)
class MessageRow:
    """One message the plan names, as the preview lists it. ``key``, ``properties`` and
    ``payload`` are message content: each door decides in one place whether its reader
    sees them."""

    id: str
    partition: str = ""
    note: str = ""
    """``whole batch of 4``, ``already acknowledged``: how the plan treats it."""
    key: str | None = None
    publish_time: str = ""
    deliver_at: str = ""
    properties: Mapping[str, str] | str = field(default_factory=dict)
    """The producer's name/value pairs, or (masked) how many there were."""
    payload: str | None = None
    """A payload excerpt (or why none is shown: encrypted, masked); None: the plan keeps
    none."""
    payload_size: int | None = None
    content: bool = True
    """Whether the plan keeps content for it (an undo lists ids only)."""


@dataclass(frozen=True)
class Preview:
    """What the approver reads of one request; see the module's docstring."""

    operation: str
    heading: str
    """Plain text, counting what changes (``Skip 1 message(s), 1 id(s); 2 already
    acknowledged``): counts and fixed words only, never text another person wrote."""
    topic: str
    subscription: str
    request: PreviewRequest
    partitions: tuple[PartitionChange, ...]
    effects: Effects
    details: tuple[tuple[str, str], ...] = ()
    """Ordered (label, plain text) rows."""
    messages: tuple[MessageRow, ...] = ()
    messages_not_listed: int = 0
    """Ids the plan names beyond :attr:`messages`, applied exactly as planned all the same."""
    moves_mark_delete: bool = False
    """Whether the partition rows say mark-delete positions (a reset)."""
    backlog: tuple[int, int] | None = None
    """The whole subscription's backlog (messages) before and after, exact at planning time;
    None where the plan does not count it."""

    def to_json(self) -> dict[str, Any]:
        """The preview as JSON values (camelCase), for a door that renders it itself."""
        r = self.request
        return {
            "operation": self.operation,
            "heading": self.heading,
            "topic": self.topic,
            "subscription": self.subscription,
            "request": {
                "requester": r.requester,
                "role": r.role,
                "reason": r.reason,
                "ticket": r.ticket,
                "approvalsNeeded": r.approvals_needed,
                "undoneSkipApprovals": None
                if r.undone_skip_approvals is None
                else list(r.undone_skip_approvals),
            },
            "partitions": [
                {
                    "partition": p.partition,
                    "backlogBefore": p.backlog_before,
                    "backlogAfter": p.backlog_after,
                    "markDeleteBefore": p.mark_delete_before,
                    "nextReadAfter": p.next_read_after,
                    "acknowledged": p.acknowledged,
                    "redelivered": p.redelivered,
                    "ids": p.ids,
                    "gone": p.gone,
                }
                for p in self.partitions
            ],
            "effects": {
                "acknowledged": self.effects.acknowledged,
                "redelivered": self.effects.redelivered,
                "unchanged": self.effects.unchanged,
                "unchangedAs": self.effects.unchanged_as,
                "dropped": self.effects.dropped,
            },
            "backlog": None if self.backlog is None else list(self.backlog),
            "details": [[label, value] for label, value in self.details],
            "messagesNotListed": self.messages_not_listed,
        }


def request_of(
    record: PlanRecord, undone_skip_approvals: Sequence[str] | None = None
) -> PreviewRequest:
    """The request part of a preview, from a record's binding and document."""
    return PreviewRequest(
        requester=record.binding.requester,
        role=record.binding.role,
        reason=str(record.document.get("reason") or ""),
        ticket=record.document.get("ticket") or None,
        approvals_needed=record.required_approvals,
        undone_skip_approvals=None
        if undone_skip_approvals is None
        else tuple(undone_skip_approvals),
    )

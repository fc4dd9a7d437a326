"""The gated skips: by message ids, by matching (from a scan's result), the head of the
backlog (``skip -n``) and the whole backlog (``clear-backlog``).

All four plan a :class:`~cursorops.core.skipping.skip_plan.SkipPlan`, are recorded as ``skip`` and
apply an approved record the same way; they differ in what they ask for and in what
their preview document says (a predicate, the head). A head's record says ``head`` in
its document, which its digest covers: its apply accepts any subscription type, as
Pulsar's ``skip -n`` does, where a skip of chosen messages needs a Shared or Key_Shared
subscription.

The preview document (:func:`skip_document`) is what the approver reads besides the
plan: the request, the exact backlog before and after per partition, and the first
messages described (key, times, properties, a payload excerpt), built from the stores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from cursorops.core.authz import Operation
from cursorops.core.content import shown
from cursorops.core.durations import format_time_ms
from cursorops.core.errors import InvalidArgumentError
from cursorops.core.gating.operation import (
    SKIP,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatedOperation,
    GatingServices,
    Planned,
)
from cursorops.core.gating.preview import (
    Effects,
    MessageRow,
    PartitionChange,
    Preview,
    count,
    predicate_text,
    request_of,
    time_text,
)
from cursorops.core.ids.message_id import MessageId
from cursorops.core.ids.topic_name import TopicName
from cursorops.core.skipping.skip import SkipOutcome
from cursorops.core.skipping.skip_plan import SkipPlan

if TYPE_CHECKING:
    from cursorops.core.gating.plan_record import PlanRecord
    from cursorops.core.store.values import TopicInfo

PREVIEW_ROWS = 50
"""Messages the preview describes; the rest are counted."""
PAYLOAD_EXCERPT = 60
"""Characters of a payload the preview shows."""


def _ids(value: object, what: str) -> tuple[MessageId, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidArgumentError(f"Invalid {what}: expected a list of message ids")
    ids = tuple(value)
    if not all(isinstance(m, MessageId) for m in ids):
        raise InvalidArgumentError(f"Invalid {what}: expected message ids")
    return ids


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


@dataclass(frozen=True, kw_only=True)
class SkipMessages(GatedArguments):
    """Skip exactly ``ids`` (``topic`` may name one partition: then only ids of it)."""

    ids: tuple[MessageId, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "ids", _ids(self.ids, "message ids"))
        if not self.ids:
            raise InvalidArgumentError("No message ids given")


@dataclass(frozen=True, kw_only=True)
class SkipMatching(GatedArguments):
    """Skip what a scan matched: ``matches`` are the scan's output (its match list, as ids),
    ``predicate`` the document it ran, shown to the approver. The ids are validated against
    the stores as any skip's are; the scan itself runs before (on Spark)."""

    predicate: Mapping[str, Any]
    matches: tuple[MessageId, ...]
    request: str | None = None
    """The digest of the request record the scan ran for
    (:mod:`cursorops.core.gating.request_record`), kept in the plan's document: the plan
    record is chained to the request it answers."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.request is not None and not _is_digest(self.request):
            raise InvalidArgumentError("Invalid request digest: expected 64 hexadecimal digits")
        if not isinstance(self.predicate, Mapping):
            raise InvalidArgumentError("Invalid predicate: expected a predicate document")
        object.__setattr__(self, "matches", _ids(self.matches, "matches"))
        if not self.matches:
            raise InvalidArgumentError("The predicate matches no unacknowledged message")


@dataclass(frozen=True, kw_only=True)
class HeadArguments(GatedArguments):
    """A skip of the head of a subscription's backlog, of :attr:`limit` messages per
    partition (None: all of them)."""

    @property
    def limit(self) -> int | None:
        return None


@dataclass(frozen=True, kw_only=True)
class SkipHead(HeadArguments):
    """Skip the first ``messages`` unacknowledged messages of each partition (``skip -n``;
    a batch counts its messages)."""

    messages: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.messages, bool) or not isinstance(self.messages, int):
            raise InvalidArgumentError(f"Invalid number of messages {self.messages!r}")
        if self.messages < 1:
            raise InvalidArgumentError(
                f"Invalid number of messages {self.messages!r}: expected 1 or more"
            )

    @property
    def limit(self) -> int | None:
        return self.messages


@dataclass(frozen=True, kw_only=True)
class ClearBacklog(HeadArguments):
    """Skip every message the subscription has not acknowledged (``clear-backlog``)."""


S = TypeVar("S", bound=GatedArguments)
_S = TypeVar("_S", bound="_Skip[Any]")


def _described(services: GatingServices, role: str, plan: SkipPlan) -> list[dict[str, Any]]:
    """Key, publish time, deliver-at, properties and a payload excerpt of the first items."""
    out = []
    for d in services.analysis.describe_messages(role, plan, PREVIEW_ROWS):
        excerpt = d.payload_excerpt[:PAYLOAD_EXCERPT].decode("utf-8", "replace")
        if d.encryption_keys is not None:
            # An encrypted payload is never shown, not even as replacement characters.
            excerpt = f"(encrypted with {', '.join(d.encryption_keys)})"
        elif d.chunks:
            excerpt += f" (chunked message, {d.chunks} chunks)"
        out.append(
            {
                "id": d.message_id.triplet(),
                "partition": d.topic_partition,
                "key": d.key,
                "publishTime": format_time_ms(d.publish_time_ms),
                "deliverAt": format_time_ms(d.deliver_at_ms),
                "properties": dict(d.properties),
                "payload": excerpt
                + ("…" if d.payload_size > PAYLOAD_EXCERPT and d.encryption_keys is None else ""),
                "payloadSize": d.payload_size,
                "wholeBatchOf": d.whole_batch_of,
                "alreadyAcknowledged": d.already_acknowledged,
            }
        )
    return out


def skip_document(
    services: GatingServices,
    caller: Caller,
    arguments: GatedArguments,
    plan: SkipPlan,
    *,
    predicate: Mapping[str, Any] | None = None,
    head: HeadArguments | None = None,
) -> dict[str, Any]:
    """What the preview shows of ``plan``: the request, the exact backlog, the messages;
    a ``predicate`` it matched, or the ``head`` it is."""
    projection = services.analysis.project_backlog(caller.role, plan)
    document: dict[str, Any] = {
        "requester": caller.requester,
        "role": caller.role,
        "reason": arguments.reason,
        "ticket": arguments.ticket,
        "partitions": list(plan.partitions()),
        "backlog": {
            "before": projection.before,
            "after": projection.after,
            "perPartition": {
                p.topic_partition: {"before": p.before, "after": p.after, "ids": p.items}
                for p in projection.partitions
            },
        },
        "messages": _described(services, caller.role, plan),
        "total": len(plan),
        "totalMessages": plan.messages,
        "alreadyAcknowledged": int(plan.columns.already_acknowledged.sum()),
    }
    if predicate is not None:
        document["predicate"] = dict(predicate)
    if head is not None:
        document["head"] = {"messages": head.limit}
    return document


def skip_applied(outcome: SkipOutcome) -> Applied:
    return Applied(
        SKIP,
        changed=len(outcome.skipped),
        unchanged=len(outcome.acknowledged_meanwhile) + len(outcome.already_acknowledged),
        outcome=outcome.to_pulsar_json(),
        result=outcome,
    )


def head_text(limit: int | None) -> str:
    """What a head skip chose, in words."""
    if limit is None:
        return "the whole backlog (clear-backlog), as it was at planning time"
    return (
        f"the first {int(limit)} unacknowledged message(s) of each partition (skip -n; "
        "batches count their messages)"
    )


def _short(partition: str) -> str:
    return partition.rsplit("-partition-", 1)[-1] if "-partition-" in partition else ""


def skip_preview(record: PlanRecord, content: bool = True) -> Preview:
    """A skip record's preview: the heading counts the messages that change (the ids not
    acknowledged already, a whole batch its messages), the backlog per partition as
    planned, the messages described."""
    doc = shown(record.document, content)
    columns = record.skip_plan().columns
    whole = (columns.batch_index < 0) & (columns.batch_size > 0)
    weight = np.where(whole, columns.batch_size, 1)
    already = columns.already_acknowledged
    changing, left = int(weight[~already].sum()), int(weight[already].sum())
    ids = int((~already).sum())
    heading = f"Skip {count(changing)}, {count(ids, 'id')}"
    if left:
        heading += f"; {left} already acknowledged"
    backlog = doc["backlog"]
    partitions = tuple(
        PartitionChange(
            partition,
            backlog_before=v["before"],
            backlog_after=v["after"],
            acknowledged=max(v["before"] - v["after"], 0),
            ids=v["ids"],
        )
        for partition, v in backlog["perPartition"].items()
    )
    details: list[tuple[str, str]] = []
    if doc.get("predicate") is not None:
        details.append(("Matching", predicate_text(doc["predicate"])))
    if "head" in doc:
        details.append(("Chosen as", head_text(doc["head"].get("messages"))))
    details.append(
        ("Ids named", f"{len(columns)}, {int(already.sum())} of them acknowledged already")
    )
    messages = tuple(
        MessageRow(
            id=m["id"],
            partition=_short(m["partition"]),
            note=", ".join(
                n
                for n in (
                    f"whole batch of {m['wholeBatchOf']}" if m["wholeBatchOf"] else "",
                    "already acknowledged" if m["alreadyAcknowledged"] else "",
                )
                if n
            ),
            key=m["key"],
            publish_time=time_text(m["publishTime"]),
            deliver_at=time_text(m["deliverAt"]),
            properties=m["properties"],
            payload=m["payload"],
            payload_size=m.get("payloadSize"),
        )
        for m in doc["messages"]
    )
    return Preview(
        operation=SKIP,
        heading=heading,
        topic=record.topic,
        subscription=record.subscription,
        request=request_of(record),
        partitions=partitions,
        effects=Effects(acknowledged=changing, unchanged=left),
        details=tuple(details),
        messages=messages,
        messages_not_listed=max(len(columns) - len(messages), 0),
        backlog=(backlog["before"], backlog["after"]),
    )


class _Skip(GatedOperation[SkipPlan, S]):
    """What every skip shares: the skip permission on the topic, the preview and the
    approved apply."""

    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        return skip_preview(record, content)

    def targets(self, services: GatingServices, role: str, arguments: S) -> Sequence[TopicInfo]:
        base = TopicName.parse(arguments.topic).base
        return (services.access.authorized_topic(role, Operation.SKIP, base),)

    def apply_approved(
        self, services: GatingServices, plan: SkipPlan, approval: Approval
    ) -> Applied:
        # A head's planning wrote "head" into the document, which the digest covers.
        head = "head" in approval.record.document
        return skip_applied(services.cursor_ops.apply_approved_skip(plan, approval, any_type=head))


class SkipMessagesOperation(_Skip[SkipMessages]):
    def plan(
        self, services: GatingServices, caller: Caller, arguments: SkipMessages
    ) -> Planned[SkipPlan]:
        name = TopicName.parse(arguments.topic)
        plan = services.cursor_ops.plan_skip(
            caller.role, name.base, arguments.subscription, arguments.ids
        )
        if name.is_partition:
            plan.check_only_on(str(name))
        return Planned(plan, skip_document(services, caller, arguments, plan))

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: SkipMessages
    ) -> Applied:
        return skip_applied(
            services.cursor_ops.skip_messages(
                caller.role, arguments.topic, arguments.subscription, arguments.ids, via=caller.via
            )
        )


class SkipMatchingOperation(_Skip[SkipMatching]):
    def plan(
        self, services: GatingServices, caller: Caller, arguments: SkipMatching
    ) -> Planned[SkipPlan]:
        plan = services.cursor_ops.plan_skip(
            caller.role, arguments.topic, arguments.subscription, arguments.matches
        )
        document = skip_document(services, caller, arguments, plan, predicate=arguments.predicate)
        if arguments.request is not None:
            document["request"] = arguments.request
        return Planned(plan, document)

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: SkipMatching
    ) -> Applied:
        outcome = services.cursor_ops.skip_messages(
            caller.role, arguments.topic, arguments.subscription, arguments.matches, via=caller.via
        )
        return skip_applied(outcome)


class SkipHeadOperation(_Skip[HeadArguments]):
    """``skip -n`` (:class:`SkipHead`) and ``clear-backlog`` (:class:`ClearBacklog`)."""

    def plan(
        self, services: GatingServices, caller: Caller, arguments: HeadArguments
    ) -> Planned[SkipPlan]:
        plan = services.cursor_ops.plan_skip_head(
            caller.role, arguments.topic, arguments.subscription, arguments.limit
        )
        if not len(plan):
            raise InvalidArgumentError(
                f"Subscription {arguments.subscription} of {arguments.topic} has no backlog: "
                "nothing to skip"
            )
        return Planned(plan, skip_document(services, caller, arguments, plan, head=arguments))

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: HeadArguments
    ) -> Applied:
        outcome = services.cursor_ops.skip_head(
            caller.role, arguments.topic, arguments.subscription, arguments.limit, via=caller.via
        )
        return skip_applied(outcome)


def _skip(cls: type[_S], name: str, arguments: type[GatedArguments], workflow: str) -> _S:
    return cls(name, SKIP, SkipPlan, arguments, workflow, step="skip", title="Skip messages")


SKIP_MESSAGES = _skip(
    SkipMessagesOperation, "skip-messages", SkipMessages, "cursorops_skip_messages"
)
SKIP_MATCHING = _skip(
    SkipMatchingOperation, "skip-matching", SkipMatching, "cursorops_skip_matching"
)
SKIP_HEAD = _skip(SkipHeadOperation, "skip-head", SkipHead, "cursorops_skip_head")
CLEAR_BACKLOG = _skip(SkipHeadOperation, "clear-backlog", ClearBacklog, "cursorops_skip_head")

__all__ = [
    "CLEAR_BACKLOG",
    "SKIP_HEAD",
    "SKIP_MATCHING",
    "SKIP_MESSAGES",
    "ClearBacklog",
    "HeadArguments",
    "SkipHead",
    "SkipMatching",
    "SkipMessages",
    "head_text",
    "skip_document",
    "skip_preview",
]

"""Redrive, the gated operation: a subscription's dead-lettered messages published back to its
topic, for it alone.

A Pulsar client with a dead-letter policy publishes a message that exceeded its redeliveries to
``<topic>-<subscription>-DLQ`` (:func:`~cursorops.core.domain.ids.topic_name.dead_letter_topic`).
Redriving takes the messages still on that topic, optionally those a predicate matches
(:mod:`cursorops.core.domain.analysis.predicates`), and publishes them back to the topic so that
only the failing subscription sees them again: in the transaction of the publish, every other
subscription of the topic acknowledges the new messages and every subscription of the
dead-letter topic acknowledges the originals.

Which messages are "on" the dead-letter topic: those at least one of its subscriptions has not
acknowledged; all of its messages when it has no subscription (the clients create one only when
the dead-letter policy names an ``initialSubscriptionName``), and then nothing is acknowledged
there: a second redrive publishes them again (``docs/decisions/``, "Redrive").

Authorization: PRODUCE on the topic (the redrive publishes there; the acknowledgements on its
other subscriptions only hide what this redrive itself publishes, no message of their backlog)
and CONSUME on the dead-letter topic (the redrive reads its messages and acknowledges them,
what a consumer of it does; SKIP, acknowledging without reading, would need the same
``consume`` grant but names the wrong act). On a namespace that requires approval (the topic's
or the dead-letter topic's) only an approved plan applies.

Kept: key, ordering key, properties, event time, payload. Not kept: the delivery time (a
redrive is delivered now) and the producer's name and sequence ids (the redrive is the
producer, ``cursorops-redrive``). Added: :data:`ORIGIN_PROPERTY` (the dead-letter message's id,
``ledger:entry[:batch]``, plus :data:`ORIGIN_TOPIC_PROPERTY`) and :data:`REDRIVE_PROPERTY` (the
plan's id, which the audit record names too: it is known before anything is written, the
record's id only once the record is). Each message is one entry, not batched; a chunked message
goes whole, its chunks as sent (:mod:`cursorops.core.domain.ids.chunked_rows`).

A :class:`RedrivePlan` is immutable and identified by the SHA-256 of its content
(``planId``, :class:`~cursorops.core.domain.portable_plan.PortablePlan`), so a plan written to a
file, previewed and applied later is the one that was previewed: ``RedrivePlan.from_json``
refuses one altered since. A redrive moves cursors on both topics, so both gate it: the
stricter namespace policy counts, and an approver must be permitted on both.

Cost: planning reads the dead-letter topic's segments and its cursors; applying reads the
planned entries again, writes the new segments and one cursor delta per acknowledging cursor,
all in one metadata transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckColumns
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.content import masked_value, shown
from cursorops.core.domain.errors import (
    InvalidArgumentError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids import chunked_rows
from cursorops.core.domain.ids.chunked_messages import Groups, check_groups, count_once
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.topic_name import TopicName, dead_letter_topic
from cursorops.core.domain.plans.preview import (
    Effects,
    MessageRow,
    PartitionChange,
    Preview,
    count,
    predicate_text,
    request_of,
    time_text,
)
from cursorops.core.domain.portable_plan import PreviewedPlan, Spelling
from cursorops.core.services.gating import apply_record
from cursorops.core.services.gating.operation import (
    REDRIVE,
    Applied,
    Approval,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from cursorops.core.store import arrow_columns
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.values import AuditEntry

if TYPE_CHECKING:
    from cursorops.core.domain.analysis.predicates import Predicate
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.store.cursor_door import CursorTransaction
    from cursorops.core.store.values import TopicInfo


ORIGIN_PROPERTY = "cursorops-redrive-origin"
"""The dead-letter message's id (``ledger:entry[:batch]``) a redriven message came from."""
ORIGIN_TOPIC_PROPERTY = "cursorops-redrive-origin-topic"
"""The dead-letter topic (partition) it came from."""
REDRIVE_PROPERTY = "cursorops-redrive-id"
"""The redrive's plan id; the ``redrive`` audit record names it as ``planId``."""
PRODUCER_NAME = "cursorops-redrive"
PREVIEW_MESSAGES = 50
"""Messages a plan keeps for its preview."""

PROVENANCE = frozenset({ORIGIN_PROPERTY, ORIGIN_TOPIC_PROPERTY, REDRIVE_PROPERTY})
"""The properties a redrive sets (replacing those of an earlier redrive)."""
_FIELDS = frozenset(
    {
        "kind",
        "topic",
        "subscription",
        "deadLetterTopic",
        "deadLetterSubscriptions",
        "otherSubscriptions",
        "ids",
        "keys",
        "sample",
        "predicate",
        "plannedAt",
    }
)
"""What a plan's content holds, no more (and :data:`CHUNKED` when it holds a chunked message)."""
CHUNKED = "chunkedMessages"
"""The content's field of the ids that are chunks of one message, present only when some are:
a plan without a chunked message is spelled, and identified, as before the field."""


@dataclass(frozen=True)
class RedriveMessage:
    """One dead-letter message as a plan's preview shows it."""

    message_id: MessageId
    key: str | None
    properties: Mapping[str, str]
    publish_time: int

    def to_json(self) -> dict[str, Any]:
        return {
            "messageId": id_text(self.message_id),
            "key": self.key,
            "properties": dict(self.properties),
            "publishTime": self.publish_time,
        }


@dataclass(frozen=True)
class RedrivePlan(PreviewedPlan):
    """What a redrive would publish, planned against the stores as they were at
    ``planned_at`` (the broker's clock); immutable, identified by its content hash.

    ``ids`` are the dead-letter messages (``partition`` -1 when the dead-letter topic
    is not partitioned), in the order they are published, ``keys`` theirs: every chunk of a
    chunked message. ``chunked_messages``: which ids are chunks of one message
    (:meth:`~cursorops.core.domain.ids.chunked_messages.ChunkedMessages.groups`), so that what
    counts messages counts it once.
    """

    SPELLING: ClassVar[Spelling] = Spelling.SORTED
    KIND: ClassVar[str] = "redrive plan"

    topic: str
    subscription: str
    dead_letter_topic: str
    dead_letter_subscriptions: tuple[str, ...]
    other_subscriptions: tuple[str, ...]
    """The topic's subscriptions that would acknowledge the new messages (as planned;
    applying reads them again)."""
    ids: tuple[MessageId, ...]
    keys: tuple[str | None, ...]
    sample: tuple[RedriveMessage, ...]
    """The first :data:`PREVIEW_MESSAGES` ids (a chunked message's chunks each)."""
    predicate: Mapping[str, Any] | None
    planned_at: int
    chunked_messages: Groups = ()

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.ids):
            raise InvalidArgumentError("Invalid redrive plan: one key per message")
        try:
            check_groups([list(g) for g in self.chunked_messages], len(self.ids))
        except ValueError as exc:
            raise InvalidArgumentError(f"Invalid redrive plan: {exc}") from exc

    @property
    def messages(self) -> int:
        """Messages planned, a chunked message once (what the approval quorum counts)."""
        return count_once(np.ones(len(self.ids), np.bool_), self.chunked_messages)

    def content(self) -> dict[str, Any]:
        return {
            "kind": "redrive",
            "topic": self.topic,
            "subscription": self.subscription,
            "deadLetterTopic": self.dead_letter_topic,
            "deadLetterSubscriptions": list(self.dead_letter_subscriptions),
            "otherSubscriptions": list(self.other_subscriptions),
            "ids": [[m.partition, m.ledger_id, m.entry_id, m.batch_index] for m in self.ids],
            "keys": list(self.keys),
            "sample": [m.to_json() | {"partition": m.message_id.partition} for m in self.sample],
            "predicate": None if self.predicate is None else dict(self.predicate),
            "plannedAt": self.planned_at,
        } | ({CHUNKED: [list(g) for g in self.chunked_messages]} if self.chunked_messages else {})

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> RedrivePlan:
        if content.get("kind") != "redrive":
            raise ValueError("not a redrive plan")
        if set(content) - {CHUNKED} != _FIELDS:
            raise ValueError(
                f"fields {sorted((set(content) - {CHUNKED}) ^ _FIELDS)} missing or unexpected"
            )
        if content.get(CHUNKED, True) == []:
            raise ValueError(f"{CHUNKED} is left out when there is none")
        sample = tuple(
            RedriveMessage(
                _parse_id(m["messageId"], int(m["partition"])),
                _optional_text(m["key"]),
                {str(k): str(v) for k, v in dict(m["properties"]).items()},
                int(m["publishTime"]),
            )
            for m in content["sample"]
        )
        predicate = content["predicate"]
        return cls(
            topic=str(content["topic"]),
            subscription=str(content["subscription"]),
            dead_letter_topic=str(content["deadLetterTopic"]),
            dead_letter_subscriptions=tuple(map(str, content["deadLetterSubscriptions"])),
            other_subscriptions=tuple(map(str, content["otherSubscriptions"])),
            ids=tuple(
                MessageId(int(led), int(ent), int(part), int(index))
                for part, led, ent, index in content["ids"]
            ),
            keys=tuple(_optional_text(k) for k in content["keys"]),
            sample=sample,
            predicate=None if predicate is None else dict(predicate),
            planned_at=int(content["plannedAt"]),
            chunked_messages=check_groups(content.get(CHUNKED, []), len(content["ids"])),
        )

    def preview(self) -> dict[str, Any]:
        """Counts (a chunked message once; ``ids`` counts every chunk) and the first
        :data:`PREVIEW_MESSAGES` ids, as JSON values."""
        keyed = count_once([k is not None for k in self.keys], self.chunked_messages)
        return {
            "planId": self.plan_id,
            "topic": self.topic,
            "subscription": self.subscription,
            "deadLetterTopic": self.dead_letter_topic,
            "deadLetterSubscriptions": list(self.dead_letter_subscriptions),
            "otherSubscriptions": list(self.other_subscriptions),
            "predicate": None if self.predicate is None else dict(self.predicate),
            "messages": self.messages,
            "ids": len(self.ids),
            "keyedMessages": keyed,
            "distinctKeys": len({k for k in self.keys if k is not None}),
            "plannedAt": self.planned_at,
            "firstMessages": [m.to_json() for m in self.sample],
        }


@dataclass(frozen=True)
class RedriveOutcome:
    """What an apply published: ``redriven`` (dead-letter id) and ``published`` (its new id),
    aligned; ``acknowledged_meanwhile``: planned messages every dead-letter subscription
    had acknowledged by then (not published)."""

    topic: str
    subscription: str
    dead_letter_topic: str
    plan_id: str
    redrive_id: int
    """The ``redrive`` audit record's id."""
    redriven: tuple[MessageId, ...]
    published: tuple[MessageId, ...]
    acknowledged_meanwhile: tuple[MessageId, ...]
    acknowledged_on: tuple[str, ...]
    """The topic's other subscriptions, which acknowledged the new messages."""
    dead_letter_subscriptions: tuple[str, ...]
    """The dead-letter topic's subscriptions, which acknowledged the originals."""

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "deadLetterTopic": self.dead_letter_topic,
            "planId": self.plan_id,
            "redriveId": self.redrive_id,
            "redriven": len(self.redriven),
            "acknowledgedMeanwhile": [id_text(m) for m in self.acknowledged_meanwhile],
            "acknowledgedOn": list(self.acknowledged_on),
            "deadLetterSubscriptions": list(self.dead_letter_subscriptions),
            "messages": [
                {"deadLetterId": id_text(old), "messageId": id_text(new)}
                for old, new in zip(self.redriven, self.published, strict=True)
            ],
        }


def id_text(message_id: MessageId) -> str:
    """``ledger:entry[:batch]``, after ``partition/`` on a partitioned topic's message."""
    triplet = message_id.triplet()
    return triplet if message_id.partition < 0 else f"{message_id.partition}/{triplet}"


def _parse_id(text: object, partition: int) -> MessageId:
    if not isinstance(text, str):
        raise ValueError(f"message id {text!r} is not text")
    return MessageId.parse_triplet(text.rpartition("/")[2], partition)


def _optional_text(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{value!r} is not text")
    return value


@dataclass(frozen=True, kw_only=True)
class RedriveDeadLetters(GatedArguments):
    """Redrive the subscription's dead-letter topic (``<topic>-<subscription>-DLQ``, or
    ``dead_letter_topic``): every message on it, or those ``predicate`` matches."""

    dead_letter_topic: str | None = None
    predicate: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dead_letter_topic is not None and not isinstance(self.dead_letter_topic, str):
            raise InvalidArgumentError("Invalid dead-letter topic: must be a text")
        object.__setattr__(self, "dead_letter_topic", self.dead_letter_topic or None)
        if self.predicate is not None and not isinstance(self.predicate, Mapping):
            raise InvalidArgumentError("Invalid predicate: expected a predicate document")


def _applied(outcome: RedriveOutcome) -> Applied:
    return Applied(
        REDRIVE,
        len(outcome.redriven),
        len(outcome.acknowledged_meanwhile),
        outcome.to_json(),
        result=outcome,
    )


def redrive_preview(record: PlanRecord, plan: RedrivePlan, content: bool = True) -> Preview:
    """The dead letters published again to the topic for the subscription alone (redelivered
    to it), acknowledged on the dead-letter topic by its subscriptions; per dead-letter
    partition, the ids named."""
    per_partition: dict[str, int] = {}
    for m in plan.ids:
        name = (
            plan.dead_letter_topic
            if m.partition < 0
            else f"{plan.dead_letter_topic}-partition-{m.partition}"
        )
        per_partition[name] = per_partition.get(name, 0) + 1
    dead = plan.dead_letter_subscriptions
    others = plan.other_subscriptions
    keyed = sum(1 for k in plan.keys if k is not None)
    return Preview(
        operation=REDRIVE,
        heading=f"Redrive {count(plan.messages)} from the dead-letter topic",
        topic=record.topic,
        subscription=record.subscription,
        request=request_of(record),
        partitions=tuple(PartitionChange(p, ids=n) for p, n in per_partition.items()),
        effects=Effects(redelivered=plan.messages, acknowledged=plan.messages if dead else 0),
        details=(
            ("From the dead-letter topic", plan.dead_letter_topic),
            (
                "Which",
                predicate_text(shown(plan.predicate, content), none="every message on it"),
            ),
            (
                "Redelivered as",
                f"new messages on the topic, delivered to subscription {plan.subscription} only",
            ),
            (
                "Acknowledged on the dead-letter topic by",
                ", ".join(dead) if dead else "no subscription (it has none)",
            ),
            (
                "Acknowledged at once on the topic's other subscriptions",
                ", ".join(others) if others else "none (it has no other)",
            ),
            ("Ids", f"{len(plan.ids)} ({keyed} with a key)"),
            ("Planned at", time_text(plan.planned_at)),
        ),
        messages=tuple(
            MessageRow(
                id_text(m.message_id),
                "" if m.message_id.partition < 0 else str(m.message_id.partition),
                key=m.key if content else masked_value("key", m.key),
                publish_time=time_text(m.publish_time),
                properties=dict(m.properties)
                if content
                else masked_value("properties", dict(m.properties)),
            )
            for m in plan.sample
        ),
        messages_not_listed=max(len(plan.ids) - len(plan.sample), 0),
    )


# The producer's routing, the predicates and the cursor checks over Arrow rows (they load
# pyarrow.compute) are imported where they are used: a command that does not redrive does
# not load them with the Broker.


def plan_redrive(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    *,
    predicate: Predicate | Mapping[str, object] | str | None = None,
    dead_letter: str | None = None,
) -> RedrivePlan:
    """The dead-letter messages a redrive would publish, changing nothing.

    ``dead_letter``: the dead-letter topic when the client's policy named its own
    (default ``<topic>-<subscription>-DLQ``). ``predicate``: a
    :class:`~cursorops.core.domain.analysis.predicates.Predicate` or its document; only the
    messages it matches. Refused (nothing to plan) when the dead-letter topic
    does not exist or holds no message to redrive.
    """
    from cursorops.core.domain.analysis.predicates import optional_predicate
    from cursorops.core.domain.delivery.unacked_rows import unacked_rows

    info, dlq = authorized(services, role, topic, subscription, dead_letter)
    chosen = optional_predicate(predicate, services.clock())
    other = _other_subscriptions(services, info, subscription)
    with services.metadata.reading() as view:
        dlq_subs = tuple(s.name for s in view.subscriptions(dlq.name))
    ids: list[MessageId] = []
    groups: list[tuple[int, ...]] = []
    keys: list[str | None] = []
    sample: list[RedriveMessage] = []
    for index, name in enumerate(dlq.partition_names()):
        table = services.ledgers.read_table(TopicName.parse(name))
        # On the dead-letter topic: not acknowledged by one of its subscriptions at least.
        live = np.ones(table.num_rows, np.bool_)
        if dlq_subs and table.num_rows:
            layout = services.context.layout(name)
            live[:] = False
            for sub in dlq_subs:
                live |= unacked_rows(services.context.cursor_state(name, sub, layout), table)
        if chosen is not None and table.num_rows:
            live &= chosen.mask(table)
        rows = table.filter(pa.array(chunked_rows.whole_messages(table, live)))
        chunked_rows.refuse_sealed_batches(rows, name)
        partition = index if dlq.partitions else -1
        found = _ids(rows, None, partition)
        groups += [tuple(len(ids) + i for i in g) for g in chunked_rows.groups(rows)]
        ids += found
        keys += rows.column("key").to_pylist()
        room = PREVIEW_MESSAGES - len(sample)
        if room > 0:
            head = rows.slice(0, room)
            sample += [
                RedriveMessage(m, k, dict(p), t)
                for m, k, p, t in zip(
                    found[:room],
                    head.column("key").to_pylist(),
                    head.column("properties").to_pylist(),
                    head.column("publish_time").to_pylist(),
                    strict=True,
                )
            ]
    if not ids:
        raise InvalidArgumentError(
            f"Nothing to redrive: {dlq.name} holds no message"
            + (" its subscriptions have not acknowledged" if dlq_subs else "")
            + (" matching the predicate" if chosen is not None else "")
        )
    return RedrivePlan(
        info.name,
        subscription,
        dlq.name,
        dlq_subs,
        other,
        tuple(ids),
        tuple(keys),
        tuple(sample),
        None if chosen is None else chosen.to_json(),
        services.clock(),
        tuple(groups),
    )


def apply_redrive(
    services: GatingServices, role: str, plan: RedrivePlan, *, via: str = "broker"
) -> RedriveOutcome:
    """:func:`_apply` at once; refused where a namespace requires approval."""
    return _apply(services, role, plan, via, None)


def _apply(
    services: GatingServices, role: str, plan: RedrivePlan, via: str, approval: Approval | None
) -> RedriveOutcome:
    """Publish the plan's messages still on the dead-letter topic, for the plan's
    subscription alone, in ONE metadata transaction with the acknowledgements on the
    topic's other subscriptions and on the dead-letter topic's, the ``redrive`` audit
    record (``via`` names the front door) and an approved plan's claim.

    The plan may be stale or forged: authorization, the topics and the
    subscription are checked again, and every planned message must still be in
    the dead-letter topic's ledgers. Which are still to redrive is decided from
    the dead-letter cursors read under their row locks; one every dead-letter
    subscription acknowledged since planning is reported, not published.
    Killed part-way, nothing of it is visible: segment files written for a
    transaction that never committed are never listed. On a namespace that
    requires approval (the topic's or the dead-letter topic's) it is refused unless
    ``approval`` (an approved plan record, claimed in the same transaction).
    """
    from cursorops.core.domain.analysis.columns import int_column
    from cursorops.core.domain.delivery.unacked_rows import unacked_rows

    info, dlq = authorized(services, role, plan.topic, plan.subscription, plan.dead_letter_topic)
    if info.name != plan.topic or dlq.name != plan.dead_letter_topic:
        raise InvalidArgumentError(
            f"Invalid redrive plan {plan.plan_id}: topic names are not canonical"
        )
    if approval is None:
        services.access.refuse_without_approval(info, "redrive", "the cursorops_redrive workflow")
        services.access.refuse_without_approval(dlq, "redrive", "the cursorops_redrive workflow")
    if not plan.ids:
        raise InvalidArgumentError(f"Invalid redrive plan {plan.plan_id}: no message")
    if len(set(plan.ids)) != len(plan.ids):
        raise InvalidArgumentError(
            f"Invalid redrive plan {plan.plan_id}: a message is listed twice; nothing redriven"
        )
    dlq_names = dlq.partition_names()
    rows, layouts = _planned_rows(services, plan, dlq, dlq_names)
    at_ms = services.clock()
    # Taken before the transaction: a pass over every planned message.
    plan_id = plan.plan_id
    targets = _Targets(info)
    partition_of = np.asarray(rows.column("topic_partition").to_pylist(), dtype=object)
    ticket = apply_record.ticket(approval, REDRIVE)
    with services.metadata.cursor_transaction() as work:
        subs = work.lock_subscriptions([info.name, dlq.name])  # shared, before any cursor
        if plan.subscription not in subs[info.name]:
            raise SubscriptionNotFoundError.of(info.name, plan.subscription)
        dlq_subs = tuple(subs[dlq.name])
        others = tuple(n for n in subs[info.name] if n != plan.subscription)
        # The dead-letter cursors under their row locks, in the lock order of every
        # multi-cursor writer (partition, then subscription): what is redriven is what
        # they have not all acknowledged now.
        pending = np.zeros(rows.num_rows, np.bool_) if dlq_subs else None
        locked: list[tuple[int, str]] = []
        for name in sorted(set(dlq_names)):
            in_partition = np.flatnonzero(partition_of == name)
            if not dlq_subs or not in_partition.size:
                continue
            part = rows.take(pa.array(in_partition))
            for sub in dlq_subs:
                ((cursor_id, record),) = work.read(dlq.name, sub, [name])
                state = replay(record, layouts[name])
                assert pending is not None
                pending[in_partition] |= unacked_rows(state, part)
                locked.append((cursor_id, name))
        if pending is not None:
            pending = chunked_rows.whole_messages(rows, pending, complete_only=False)
        go = np.arange(rows.num_rows) if pending is None else np.flatnonzero(pending)
        chosen = rows.take(pa.array(go, pa.int64()))
        published = _publish(services, work, targets, chosen, plan_id, at_ms)
        for name, sub in sorted((p, s) for p in targets.written for s in others):
            ledger_ids, entry_ids = targets.written[name]
            whole = np.full(len(ledger_ids), -1, np.int64)
            ack = AckColumns.of(ledger_ids, entry_ids, whole, np.zeros_like(whole))
            work.append_to(name, sub, [cursor_codec.encode_columns(ack)], ticket=ticket)
        for cursor_id, name in locked:
            mine = np.flatnonzero(partition_of[go] == name)
            if not mine.size:
                continue
            acked = chosen.take(pa.array(mine))
            ack = AckColumns.of(
                int_column(acked.column("ledger_id")),
                int_column(acked.column("entry_id")),
                int_column(acked.column("batch_index")),
                int_column(acked.column("batch_size")),
            )
            work.append(cursor_id, [cursor_codec.encode_columns(ack)], ticket=ticket)
        redriven = _ids(chosen, dlq)
        meanwhile = () if pending is None else tuple(_ids(rows.filter(pa.array(~pending)), dlq))
        fields: dict[str, object] = {
            "planId": plan_id,
            "deadLetterTopic": dlq.name,
            "deadLetterSubscriptions": list(dlq_subs),
            "acknowledgedOn": list(others),
            "deadLetterIds": [id_text(m) for m in redriven],
            "newIds": [id_text(m) for m in published],
            "acknowledgedMeanwhile": [id_text(m) for m in meanwhile],
            "predicate": None if plan.predicate is None else dict(plan.predicate),
        }
        detail = apply_record.audit_detail(fields, via, approval)
        # Recorded on both topics: the dead-letter topic's cursors move too, and its
        # namespace's auditor reads its own topic's log.
        on_dead_letters = {**detail, "redrivenTo": info.name}
        audit_id = apply_record.record_apply(
            work,
            AuditEntry(REDRIVE, info.name, plan.subscription, role, detail, at_ms),
            approval,
            also=[AuditEntry(REDRIVE, dlq.name, None, role, on_dead_letters, at_ms)],
            redriven=len(redriven),
            acknowledgedMeanwhile=len(meanwhile),
        )
    return RedriveOutcome(
        info.name,
        plan.subscription,
        dlq.name,
        plan_id,
        audit_id,
        tuple(redriven),
        tuple(published),
        meanwhile,
        others,
        dlq_subs,
    )


# -- the parts -------------------------------------------------------------------------


def authorized(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    dead_letter: str | None,
) -> tuple[TopicInfo, TopicInfo]:
    """The topic (PRODUCE) and its dead-letter topic (CONSUME), both authorized before
    anything is looked up; the failing subscription must exist."""
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    dlq_name = (
        dead_letter_topic(name, subscription)
        if dead_letter is None
        else TopicName.parse(dead_letter)
    )
    for given in (name, dlq_name):
        if given.is_partition:
            raise InvalidArgumentError(f"'{given}' names a partition; give the topic")
    # Both checks before any look-up: a refusal reveals nothing of what exists.
    services.access.check(role, Operation.PRODUCE, name.tenant, str(name), name.namespace_name)
    services.access.check(
        role, Operation.CONSUME, dlq_name.tenant, str(dlq_name), dlq_name.namespace_name
    )
    info = services.metadata.get_topic(str(name))
    services.metadata.get_subscription(info.name, subscription)
    try:
        dlq = services.metadata.get_topic(str(dlq_name))
    except TopicNotFoundError as exc:
        raise TopicNotFoundError(
            f"No dead-letter topic {dlq_name} for subscription '{subscription}' of "
            f"{info.name}: nothing to redrive"
        ) from exc
    if dlq.name == info.name:
        raise InvalidArgumentError("A topic cannot be its own dead-letter topic")
    return info, dlq


def _other_subscriptions(
    services: GatingServices, info: TopicInfo, subscription: str
) -> tuple[str, ...]:
    with services.metadata.reading() as view:
        return tuple(s.name for s in view.subscriptions(info.name) if s.name != subscription)


def _planned_rows(
    services: GatingServices, plan: RedrivePlan, dlq: TopicInfo, names: Sequence[str]
) -> tuple[pa.Table, dict[str, LedgerLayout]]:
    """The plan's messages as the dead-letter topic holds them now, in the plan's order,
    with a ``topic_partition`` column; every one must still be there."""
    if any(not -1 <= m.partition < max(dlq.partitions, 1) for m in plan.ids) or any(
        (m.partition >= 0) != bool(dlq.partitions) for m in plan.ids
    ):
        raise InvalidArgumentError(
            f"Invalid redrive plan {plan.plan_id}: a message names a partition "
            f"{dlq.name} does not have; nothing redriven"
        )
    layouts: dict[str, LedgerLayout] = {}
    parts: list[pa.Table] = []
    order: list[np.ndarray] = []
    by_partition: dict[int, list[int]] = {}
    for number, m in enumerate(plan.ids):
        by_partition.setdefault(m.partition, []).append(number)
    for partition, numbers in sorted(by_partition.items()):
        name = names[max(partition, 0)]
        layouts[name] = services.context.layout(name)
        wanted = [plan.ids[n] for n in numbers]
        table = services.ledgers.read_entries(
            TopicName.parse(name), sorted({m.position for m in wanted})
        )
        row_of = {
            key: row
            for row, key in enumerate(
                zip(
                    table.column("ledger_id").to_pylist(),
                    table.column("entry_id").to_pylist(),
                    table.column("batch_index").to_pylist(),
                    strict=True,
                )
            )
        }
        picked = [row_of.get((m.ledger_id, m.entry_id, m.batch_index)) for m in wanted]
        if None in picked:
            gone = wanted[picked.index(None)]
            raise InvalidArgumentError(
                f"Invalid redrive plan {plan.plan_id}: {id_text(gone)} is not in "
                f"{name}; nothing redriven"
            )
        taken = table.take(pa.array(picked, pa.int64()))
        parts.append(
            taken.append_column("topic_partition", pa.array([name] * taken.num_rows, pa.string()))
        )
        order.append(np.asarray(numbers, np.int64))
    rows = pa.concat_tables(parts)
    # Back to the plan's order: the order the messages are published in.
    return rows.take(pa.array(np.argsort(np.concatenate(order), kind="stable"))), layouts


def _publish(
    services: GatingServices,
    work: CursorTransaction,
    targets: _Targets,
    rows: pa.Table,
    plan_id: str,
    at_ms: int,
) -> list[MessageId]:
    """Append ``rows`` to the topic in the cursor transaction, one entry per message; their
    new ids, in order. Keyed messages go to their key's partition (the clients'
    routing); the others round-robin from partition 0."""
    from cursorops.core.domain.message_schema import MESSAGE_SCHEMA
    from cursorops.core.services.producer import key_partition

    n = rows.num_rows
    if not n:
        return []
    # A chunked message's chunks share their first's sequence id.
    first = chunked_rows.first_rows(rows)
    keys = rows.column("key").to_pylist()
    count = len(targets.names)
    if count == 1:
        slots = np.zeros(n, np.int64)
    else:
        slots = np.array(
            [i % count if k is None else key_partition(k, count) for i, k in enumerate(keys)],
            np.int64,
        )[first]
    origins = [id_text(m) for m in _ids(rows.take(pa.array(first)), None)]
    source = rows.column("topic_partition").to_pylist()
    properties = [
        [(k, v) for k, v in pairs if k not in PROVENANCE]
        + [(ORIGIN_PROPERTY, o), (ORIGIN_TOPIC_PROPERTY, t), (REDRIVE_PROPERTY, plan_id)]
        for pairs, o, t in zip(rows.column("properties").to_pylist(), origins, source, strict=True)
    ]
    columns = {
        "batch_index": arrow_columns.from_numpy(np.full(n, -1, np.int32)),
        "batch_size": arrow_columns.from_numpy(np.zeros(n, np.int32)),
        "publish_time": arrow_columns.from_numpy(np.full(n, at_ms, np.int64)),
        "deliver_at": pa.nulls(n, pa.int64()),
        "key": rows.column("key").combine_chunks(),
        "properties": pa.array(properties, MESSAGE_SCHEMA.field("properties").type),
        "payload": rows.column("payload").combine_chunks(),
        "producer_name": arrow_columns.repeated_string(PRODUCER_NAME, n),
        "sequence_id": arrow_columns.from_numpy(first),
        "event_time": rows.column("event_time").combine_chunks(),
        "ordering_key": rows.column("ordering_key").combine_chunks(),
        **chunked_rows.chunk_columns(
            rows, first, properties, PRODUCER_NAME, f"{PRODUCER_NAME}-{plan_id[:16]}", at_ms
        ),
    }
    parts = []
    groups = []
    for slot in np.unique(slots).tolist():
        numbers = np.flatnonzero(slots == slot)
        index = pa.array(numbers)
        groups.append((slot, numbers))
        parts.append(
            (
                targets.topics[slot],
                np.ones(len(numbers), np.int64),
                {name: column.take(index) for name, column in columns.items()},
            )
        )
    written = services.ledgers.append_columns_many(parts, work=work)
    ledger_ids = np.empty(n, np.int64)
    entry_ids = np.empty(n, np.int64)
    for (slot, numbers), positions in zip(groups, written, strict=True):
        ledger_ids[numbers] = [p.ledger_id for p in positions]
        entry_ids[numbers] = [p.entry_id for p in positions]
        targets.written[targets.names[slot]] = (ledger_ids[numbers], entry_ids[numbers])
    partition = slots if targets.partitioned else np.full(n, -1, np.int64)
    return MessageId.of_store_many(
        ledger_ids.tolist(), entry_ids.tolist(), partition.tolist(), [-1] * n, [0] * n
    )


class _Targets:
    """The partitions a redrive publishes to, and what it wrote to each."""

    def __init__(self, info: TopicInfo) -> None:
        self.names = info.partition_names()
        self.topics = [TopicName.parse(name) for name in self.names]
        self.partitioned = info.partitions > 0
        self.written: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        """Partition -> the ledger and entry ids written there."""


def _ids(rows: pa.Table, dlq: TopicInfo | None, partition: int = -1) -> list[MessageId]:
    """The ids of dead-letter rows: on ``partition``, or, given a partitioned ``dlq``, on the
    partition their ``topic_partition`` names."""
    partitions = [partition] * rows.num_rows
    if dlq is not None and dlq.partitions:
        names = rows.column("topic_partition").to_pylist()
        partitions = [TopicName.parse(name).partition_index for name in names]
    ledger, entry, index, size = (
        rows.column(c).to_pylist() for c in ("ledger_id", "entry_id", "batch_index", "batch_size")
    )
    return MessageId.of_store_many(ledger, entry, partitions, index, size)


class RedriveOperation(PreviewedOperation[RedrivePlan, RedriveDeadLetters]):
    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        return redrive_preview(record, self.plan_of(record), content)

    def topics(self, plan: RedrivePlan) -> tuple[str, ...]:
        return (plan.topic, plan.dead_letter_topic)

    def targets(
        self, services: GatingServices, role: str, arguments: RedriveDeadLetters
    ) -> Sequence[TopicInfo]:
        return authorized(
            services, role, arguments.topic, arguments.subscription, arguments.dead_letter_topic
        )

    def plan_for(
        self, services: GatingServices, role: str, arguments: RedriveDeadLetters
    ) -> RedrivePlan:
        return plan_redrive(
            services,
            role,
            arguments.topic,
            arguments.subscription,
            predicate=arguments.predicate,
            dead_letter=arguments.dead_letter_topic,
        )

    def apply_plan(
        self,
        services: GatingServices,
        role: str,
        plan: RedrivePlan,
        via: str,
        approval: Approval | None,
    ) -> Applied:
        return _applied(_apply(services, role, plan, via, approval))


OPERATION: RedriveOperation = RedriveOperation(
    "redrive",
    REDRIVE,
    RedrivePlan,
    RedriveDeadLetters,
    "cursorops_redrive",
    "redrive",
    "Redrive dead letters",
)


__all__ = [
    "CHUNKED",
    "OPERATION",
    "ORIGIN_PROPERTY",
    "ORIGIN_TOPIC_PROPERTY",
    "PREVIEW_MESSAGES",
    "PRODUCER_NAME",
    "PROVENANCE",
    "REDRIVE_PROPERTY",
    "RedriveDeadLetters",
    "RedriveMessage",
    "RedriveOutcome",
    "RedrivePlan",
    "apply_redrive",
    "id_text",
    "plan_redrive",
]

"""A redrive's plan and outcome: what a redrive of a dead-letter topic would publish, and
what it did (:mod:`cursorops.core.broker.redrive` plans and applies them).

A :class:`RedrivePlan` is immutable and identified by the SHA-256 of its content
(``planId``, :class:`~cursorops.core.portable_plan.PortablePlan`), so a plan written to a file,
previewed and applied later is the one that was previewed: ``RedrivePlan.from_json``
refuses one altered since.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from cursorops.core.errors import InvalidArgumentError
from cursorops.core.ids.chunked_messages import Groups, check_groups, count_once
from cursorops.core.ids.message_id import MessageId
from cursorops.core.portable_plan import PreviewedPlan, Spelling

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
    (:meth:`~cursorops.core.ids.chunked_messages.ChunkedMessages.groups`), so that what counts
    messages counts it once.
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


__all__ = [
    "CHUNKED",
    "ORIGIN_PROPERTY",
    "ORIGIN_TOPIC_PROPERTY",
    "PREVIEW_MESSAGES",
    "PRODUCER_NAME",
    "PROVENANCE",
    "REDRIVE_PROPERTY",
    "RedriveMessage",
    "RedriveOutcome",
    "RedrivePlan",
    "id_text",
]

"""A skip plan: the validated messages a skip will acknowledge, as one portable object.

:meth:`core.broker.Broker.plan_skip` returns a :class:`SkipPlan`;
:meth:`core.broker.Broker.apply_skip` takes one. In between it may travel as
JSON (:meth:`SkipPlan.to_json` / :meth:`SkipPlan.from_json`): through an
Airflow XCom, a REST body, a file the CLI wrote, or a Spark job's driver. The
plan is what a reviewer approves, so it carries an id derived from its content
(:attr:`SkipPlan.plan_id`); a document whose id does not match its content is
refused. A matching id proves nothing about the store: applying re-validates
every item against the current ledgers and cursor.

A plan never writes anything by itself, and building one reads nothing: this
module imports neither store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from core.errors import InvalidSkipPlanError
from core.message_id import MessageId

PLAN_FORMAT = 1
"""Version of the JSON document; a document of another version is refused."""

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

_ITEM_FIELDS = (
    "topicPartition",
    "partition",
    "ledgerId",
    "entryId",
    "batchIndex",
    "batchSize",
    "deliverAt",
    "alreadyAcknowledged",
)
_PLAN_FIELDS = ("format", "planId", "topic", "subscription", "plannedAt", "partOf", "items")


@dataclass(frozen=True)
class PlannedSkip:
    """One message of a plan: where it is, and what planning saw of it.

    ``batch_index`` -1 means the whole entry. ``already_acknowledged`` and
    ``deliver_at`` (epoch ms, None when not delayed) are as seen at planning
    time; applying decides again from the cursor as it is then.
    """

    topic_partition: str
    partition: int
    """The partition index, -1 for a non-partitioned topic."""
    ledger_id: int
    entry_id: int
    batch_index: int
    batch_size: int
    """0 for a non-batched entry."""
    deliver_at: int | None
    already_acknowledged: bool

    @property
    def message_id(self) -> MessageId:
        return MessageId.of_store(
            self.ledger_id, self.entry_id, self.partition, self.batch_index, self.batch_size
        )

    def to_json(self) -> dict[str, object]:
        return {
            "topicPartition": self.topic_partition,
            "partition": self.partition,
            "ledgerId": self.ledger_id,
            "entryId": self.entry_id,
            "batchIndex": self.batch_index,
            "batchSize": self.batch_size,
            "deliverAt": self.deliver_at,
            "alreadyAcknowledged": self.already_acknowledged,
        }

    @classmethod
    def from_json(cls, document: object, where: str) -> PlannedSkip:
        item = _object(document, where, _ITEM_FIELDS)
        deliver_at = item["deliverAt"]
        return cls(
            topic_partition=_text(item["topicPartition"], f"{where}.topicPartition"),
            partition=_integer(item["partition"], f"{where}.partition", -1, INT32_MAX),
            ledger_id=_integer(item["ledgerId"], f"{where}.ledgerId", 0),
            entry_id=_integer(item["entryId"], f"{where}.entryId", 0),
            batch_index=_integer(item["batchIndex"], f"{where}.batchIndex", -1, INT32_MAX),
            batch_size=_integer(item["batchSize"], f"{where}.batchSize", 0, INT32_MAX),
            deliver_at=None
            if deliver_at is None
            else _integer(deliver_at, f"{where}.deliverAt", 0),
            already_acknowledged=_flag(item["alreadyAcknowledged"], f"{where}.alreadyAcknowledged"),
        )


@dataclass(frozen=True)
class SkipPlan:
    """The validated messages of one skip on one subscription; immutable.

    Items are in the order planning produced them (partition by partition).
    ``part_of`` is the id of the whole plan when this one is a single
    partition's share of it (:meth:`for_partition`).
    """

    topic: str
    subscription: str
    items: tuple[PlannedSkip, ...]
    planned_at_ms: int
    part_of: str | None = None

    @cached_property
    def plan_id(self) -> str:
        """SHA-256 of the canonical JSON of everything else in the plan (64 hex digits)."""
        body = json.dumps(self._body(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    def message_ids(self) -> list[MessageId]:
        return [item.message_id for item in self.items]

    def partitions(self) -> tuple[str, ...]:
        """The topic partitions the plan touches, in partition order."""
        seen = {item.topic_partition: item.partition for item in self.items}
        return tuple(sorted(seen, key=lambda name: (seen[name], name)))

    def for_partition(self, topic_partition: str) -> SkipPlan:
        """This plan's items on one topic partition, as a plan of its own (``part_of`` set).

        Applying every partition's share separately makes one transaction per
        partition; applying the whole plan makes one for all.
        """
        if topic_partition not in self.partitions():
            raise InvalidSkipPlanError(
                f"Plan {self.plan_id} has no item on '{topic_partition}'; its partitions: "
                f"{', '.join(self.partitions()) or 'none'}"
            )
        return SkipPlan(
            self.topic,
            self.subscription,
            tuple(item for item in self.items if item.topic_partition == topic_partition),
            self.planned_at_ms,
            part_of=self.part_of or self.plan_id,
        )

    def _body(self) -> dict[str, object]:
        return {
            "format": PLAN_FORMAT,
            "topic": self.topic,
            "subscription": self.subscription,
            "plannedAt": self.planned_at_ms,
            "partOf": self.part_of,
            "items": [item.to_json() for item in self.items],
        }

    def to_json(self) -> dict[str, object]:
        """The plan as a JSON-ready dict, ``planId`` included."""
        return {"planId": self.plan_id, **self._body()}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, document: object) -> SkipPlan:
        """A plan from :meth:`to_json`'s dict or its text; refuses a malformed or altered one."""
        if isinstance(document, (str, bytes)):
            try:
                document = json.loads(document)
            except ValueError as exc:
                raise InvalidSkipPlanError(f"Invalid skip plan: not JSON: {exc}") from exc
        body = _object(document, "plan", _PLAN_FIELDS)
        if body["format"] != PLAN_FORMAT or isinstance(body["format"], bool):
            raise InvalidSkipPlanError(
                f"Invalid skip plan: format {body['format']!r}, expected {PLAN_FORMAT}"
            )
        items = body["items"]
        if not isinstance(items, list):
            raise InvalidSkipPlanError("Invalid skip plan: items must be a list")
        part_of = body["partOf"]
        plan = cls(
            topic=_text(body["topic"], "topic"),
            subscription=_text(body["subscription"], "subscription"),
            items=tuple(PlannedSkip.from_json(item, f"items[{i}]") for i, item in enumerate(items)),
            planned_at_ms=_integer(body["plannedAt"], "plannedAt", 0),
            part_of=None if part_of is None else _text(part_of, "partOf"),
        )
        if body["planId"] != plan.plan_id:
            raise InvalidSkipPlanError(
                f"Invalid skip plan: planId {body['planId']!r} does not match its content "
                f"({plan.plan_id}); the plan was altered after planning"
            )
        return plan


def _object(document: object, where: str, names: Sequence[str]) -> Mapping[str, object]:
    if not isinstance(document, Mapping):
        raise InvalidSkipPlanError(f"Invalid skip plan: {where} must be an object")
    missing = [name for name in names if name not in document]
    unknown = sorted(set(document) - set(names))
    if missing or unknown:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(map(str, unknown))}"] if unknown else []
        )
        raise InvalidSkipPlanError(f"Invalid skip plan: {where}: {'; '.join(parts)}")
    return document


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidSkipPlanError(f"Invalid skip plan: {where} must be a non-empty string")
    return value


def _integer(value: object, where: str, minimum: int, maximum: int = INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidSkipPlanError(
            f"Invalid skip plan: {where} must be an integer from {minimum} to {maximum}, "
            f"got {value!r}"
        )
    return value


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidSkipPlanError(f"Invalid skip plan: {where} must be true or false")
    return value

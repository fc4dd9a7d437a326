"""A skip plan: the validated messages a skip will acknowledge, as one portable object.

:func:`cursorops.core.services.gating.skip.plan_skip` returns a :class:`SkipPlan`;
:func:`cursorops.core.services.gating.skip.apply_skip` takes one. In between it may travel as
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

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.errors import (
    InvalidArgumentError,
    InvalidInputError,
    InvalidSkipPlanError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.portable_plan import PortablePlan, Spelling

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
_PLAN_ATTRIBUTES = frozenset({"topic", "subscription", "_columns", "planned_at_ms", "part_of"})
_PLAN_FIELDS = ("format", "topic", "subscription", "plannedAt", "partOf", "items")


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


@dataclass(frozen=True, eq=False)
class SkipColumns:
    """A plan's items as parallel arrays, one row per message (its in-memory form).

    Holding arrays, not one :class:`PlannedSkip` per message, keeps planning and
    applying 100,000s of ids cheap; :meth:`item` builds one where a caller asks.
    ``names`` lists each topic partition once, in order of first appearance, and
    ``name_index`` points each row at its name. ``deliver_at`` is meaningful
    where ``delayed`` is set (a message planned without a delivery time has none).
    """

    names: tuple[str, ...]
    name_index: npt.NDArray[np.int64]
    partition: npt.NDArray[np.int64]
    ledger_id: npt.NDArray[np.int64]
    entry_id: npt.NDArray[np.int64]
    batch_index: npt.NDArray[np.int64]
    batch_size: npt.NDArray[np.int64]
    deliver_at: npt.NDArray[np.int64]
    delayed: npt.NDArray[np.bool_]
    already_acknowledged: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return int(self.ledger_id.size)

    @classmethod
    def of_items(cls, items: Sequence[PlannedSkip]) -> SkipColumns:
        """The columns of ``items``; a value that fits no int64 is refused."""
        codes: dict[str, int] = {}
        name_index = [codes.setdefault(i.topic_partition, len(codes)) for i in items]

        def column(values: list[int]) -> npt.NDArray[np.int64]:
            try:
                return np.array(values, dtype=np.int64)
            except OverflowError as exc:
                raise InvalidSkipPlanError(
                    f"Invalid skip plan: an item holds a number outside int64: {exc}"
                ) from exc

        return cls(
            names=tuple(codes),
            name_index=np.array(name_index, dtype=np.int64),
            partition=column([i.partition for i in items]),
            ledger_id=column([i.ledger_id for i in items]),
            entry_id=column([i.entry_id for i in items]),
            batch_index=column([i.batch_index for i in items]),
            batch_size=column([i.batch_size for i in items]),
            deliver_at=column([-1 if i.deliver_at is None else i.deliver_at for i in items]),
            delayed=np.array([i.deliver_at is not None for i in items], dtype=np.bool_),
            already_acknowledged=np.array(
                [bool(i.already_acknowledged) for i in items], dtype=np.bool_
            ),
        )

    def take(self, rows: npt.NDArray[np.int64]) -> SkipColumns:
        """The given rows, in that order, with ``names`` renumbered to the rows kept."""
        kept = self.name_index[rows]
        used, first = np.unique(kept, return_index=True)
        order = used[np.argsort(first, kind="stable")]
        renumber = np.full(len(self.names), -1, dtype=np.int64)
        renumber[order] = np.arange(order.size, dtype=np.int64)
        return SkipColumns(
            names=tuple(self.names[k] for k in order.tolist()),
            name_index=renumber[kept],
            partition=self.partition[rows],
            ledger_id=self.ledger_id[rows],
            entry_id=self.entry_id[rows],
            batch_index=self.batch_index[rows],
            batch_size=self.batch_size[rows],
            deliver_at=self.deliver_at[rows],
            delayed=self.delayed[rows],
            already_acknowledged=self.already_acknowledged[rows],
        )

    def _lists(self) -> Iterator[tuple[Any, ...]]:
        """Each row as plain Python values, in :meth:`item`'s argument order."""
        return zip(
            self.name_index.tolist(),
            self.partition.tolist(),
            self.ledger_id.tolist(),
            self.entry_id.tolist(),
            self.batch_index.tolist(),
            self.batch_size.tolist(),
            self.deliver_at.tolist(),
            self.delayed.tolist(),
            self.already_acknowledged.tolist(),
            strict=True,
        )

    def items(self) -> tuple[PlannedSkip, ...]:
        names = self.names
        return tuple(
            PlannedSkip(names[n], p, led, ent, b, s, d if late else None, acked)
            for n, p, led, ent, b, s, d, late, acked in self._lists()
        )

    def item(self, row: int) -> PlannedSkip:
        return PlannedSkip(
            self.names[int(self.name_index[row])],
            int(self.partition[row]),
            int(self.ledger_id[row]),
            int(self.entry_id[row]),
            int(self.batch_index[row]),
            int(self.batch_size[row]),
            int(self.deliver_at[row]) if self.delayed[row] else None,
            bool(self.already_acknowledged[row]),
        )

    def message_ids(self) -> list[MessageId]:
        """Each row's message id (partition, batch index and batch size included)."""
        return MessageId.of_store_many(
            self.ledger_id.tolist(),
            self.entry_id.tolist(),
            self.partition.tolist(),
            self.batch_index.tolist(),
            self.batch_size.tolist(),
        )

    def triplets(self) -> list[str]:
        """Each row's :meth:`MessageId.triplet
        <cursorops.core.domain.ids.message_id.MessageId.triplet>`
        (``ledger:entry``, plus ``:batchIndex`` when >= 0), without building the ids."""
        return [
            f"{ledger}:{entry}:{index}" if index >= 0 else f"{ledger}:{entry}"
            for ledger, entry, index in zip(
                self.ledger_id.tolist(),
                self.entry_id.tolist(),
                self.batch_index.tolist(),
                strict=True,
            )
        ]

    def same_as(self, other: SkipColumns) -> bool:
        return self.names == other.names and all(
            np.array_equal(getattr(self, name), getattr(other, name)) for name in _ARRAY_FIELDS
        )

    def canonical_items(self) -> str:
        """The JSON array of the items exactly as ``json.dumps(..., sort_keys=True,
        separators=(",", ":"))`` writes their :meth:`PlannedSkip.to_json` dicts.

        Written directly from the arrays: the content hash of a 1,000,000-id plan
        then costs one string format per row instead of a dict and an encoder walk.
        (Laying each column into slices of one list of pieces measured slower.)
        """
        names = [json.dumps(name) for name in self.names]
        return (
            "["
            + ",".join(
                f'{{"alreadyAcknowledged":{"true" if acked else "false"},"batchIndex":{b},'
                f'"batchSize":{s},"deliverAt":{d if late else "null"},"entryId":{ent},'
                f'"ledgerId":{led},"partition":{p},"topicPartition":{names[n]}}}'
                for n, p, led, ent, b, s, d, late, acked in self._lists()
            )
            + "]"
        )


_ARRAY_FIELDS = (
    "name_index",
    "partition",
    "ledger_id",
    "entry_id",
    "batch_index",
    "batch_size",
    "deliver_at",
    "delayed",
    "already_acknowledged",
)


class SkipPlan(PortablePlan):
    """The validated messages of one skip on one subscription; immutable.

    Items are in the order planning produced them (partition by partition).
    ``part_of`` is the id of the whole plan when this one is a single
    partition's share of it (:meth:`for_partition`). ``items`` may be given as
    :class:`PlannedSkip` objects or as :class:`SkipColumns`; the plan keeps
    columns and builds :attr:`items` only when asked.
    """

    SPELLING: ClassVar[Spelling] = Spelling.ID_FIRST
    KIND: ClassVar[str] = "skip plan"
    INVALID: ClassVar[type[InvalidInputError]] = InvalidSkipPlanError

    def __init__(
        self,
        topic: str,
        subscription: str,
        items: Sequence[PlannedSkip] | SkipColumns,
        planned_at_ms: int,
        part_of: str | None = None,
    ) -> None:
        self.topic = topic
        self.subscription = subscription
        self._columns = items if isinstance(items, SkipColumns) else SkipColumns.of_items(items)
        self.planned_at_ms = planned_at_ms
        self.part_of = part_of

    def __setattr__(self, name: str, value: object) -> None:
        if name in _PLAN_ATTRIBUTES and name in self.__dict__:
            raise AttributeError(f"SkipPlan is immutable: cannot set {name}")
        object.__setattr__(self, name, value)

    @property
    def columns(self) -> SkipColumns:
        """The items as arrays (no object per message)."""
        return self._columns

    @cached_property
    def items(self) -> tuple[PlannedSkip, ...]:
        """One :class:`PlannedSkip` per message, built on first use."""
        return self._columns.items()

    def __len__(self) -> int:
        return len(self._columns)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SkipPlan):
            return NotImplemented
        return (
            self.topic == other.topic
            and self.subscription == other.subscription
            and self.planned_at_ms == other.planned_at_ms
            and self.part_of == other.part_of
            and self._columns.same_as(other._columns)
        )

    def __hash__(self) -> int:
        return hash(self.plan_id)

    def __repr__(self) -> str:
        return (
            f"SkipPlan(topic={self.topic!r}, subscription={self.subscription!r}, "
            f"items={len(self)}, planned_at_ms={self.planned_at_ms}, part_of={self.part_of!r}, "
            f"plan_id={self.plan_id!r})"
        )

    @property
    def messages(self) -> int:
        """How many messages the plan names: a whole batched entry counts its batch size."""
        columns = self._columns
        whole = (columns.batch_index < 0) & (columns.batch_size > 0)
        return int(len(columns) - int(whole.sum()) + int(columns.batch_size[whole].sum()))

    @cached_property
    def canonical(self) -> str:
        """``json.dumps(self.content(), sort_keys=True, separators=(",", ":"))``, written
        from the columns (the keys below are in sorted order): the content hash of a
        1,000,000-id plan costs no dict per item."""
        return (
            f'{{"format":{PLAN_FORMAT},"items":{self._columns.canonical_items()},'
            f'"partOf":{json.dumps(self.part_of)},"plannedAt":{json.dumps(self.planned_at_ms)},'
            f'"subscription":{json.dumps(self.subscription)},"topic":{json.dumps(self.topic)}}}'
        )

    def message_ids(self) -> list[MessageId]:
        return self._columns.message_ids()

    def partitions(self) -> tuple[str, ...]:
        """The topic partitions the plan touches, in partition order."""
        columns = self._columns
        if not len(columns):
            return ()
        # Each name's partition is its last item's, as a dict of the items would keep.
        reversed_codes = columns.name_index[::-1]
        codes, first = np.unique(reversed_codes, return_index=True)
        last = columns.partition.size - 1 - first
        seen = dict(
            zip(
                (columns.names[c] for c in codes.tolist()),
                columns.partition[last].tolist(),
                strict=True,
            )
        )
        return tuple(sorted(seen, key=lambda name: (seen[name], name)))

    def check_only_on(self, topic_partition: str) -> None:
        """Refuse a plan with ids outside ``topic_partition``: a skip asked of one partition
        by name (``t-partition-2``, as pulsar-admin and Pulsar's REST path take it)."""
        elsewhere = sorted(set(self.partitions()) - {topic_partition})
        if elsewhere:
            raise InvalidArgumentError(
                f"Message ids of other partitions given to {topic_partition}: "
                f"{', '.join(elsewhere)}; nothing skipped"
            )

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
        code = self._columns.names.index(topic_partition)
        return SkipPlan(
            self.topic,
            self.subscription,
            self._columns.take(np.flatnonzero(self._columns.name_index == code)),
            self.planned_at_ms,
            part_of=self.part_of or self.plan_id,
        )

    def content(self) -> dict[str, Any]:
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
        return {"planId": self.plan_id, **self.content()}

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> SkipPlan:
        body = _object(content, "plan", _PLAN_FIELDS)
        if body["format"] != PLAN_FORMAT or isinstance(body["format"], bool):
            raise InvalidSkipPlanError(
                f"Invalid skip plan: format {body['format']!r}, expected {PLAN_FORMAT}"
            )
        items = body["items"]
        if not isinstance(items, list):
            raise InvalidSkipPlanError("Invalid skip plan: items must be a list")
        part_of = body["partOf"]
        return cls(
            topic=_text(body["topic"], "topic"),
            subscription=_text(body["subscription"], "subscription"),
            items=[PlannedSkip.from_json(item, f"items[{i}]") for i, item in enumerate(items)],
            planned_at_ms=_integer(body["plannedAt"], "plannedAt", 0),
            part_of=None if part_of is None else _text(part_of, "partOf"),
        )


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

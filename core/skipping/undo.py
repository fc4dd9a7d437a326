"""Undo of a skip: the plan that names what to take back, what applying it did, and the
applied skips as the audit log lists them.

A skip's id is the id of its ``skip`` audit record, written in the transaction of
its acknowledgements; that record lists the messages the skip acknowledged
(``skipped``). An undo takes back the acknowledgement of exactly those messages,
the ones still acknowledged when it applies, and records an ``undo-skip`` audit
record naming the skip: a skip is undone at most once. A chunked message is
taken back whole: every chunk of one the record names.

An :class:`UndoPlan` is what an operator previews (or a reviewer approves, where
the namespace requires approval): it travels as JSON with an id derived from its
content (:class:`~cursorops.core.portable_plan.PortablePlan`), and a document whose id does
not match its content is refused. A matching id proves nothing about the store: applying plans
the undo again from the audit log and refuses a plan that names other messages.

Pure: this module reads no store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from cursorops.core.errors import InvalidArgumentError, InvalidInputError, InvalidSkipPlanError
from cursorops.core.ids.chunked_messages import Groups, check_groups, count_once
from cursorops.core.portable_plan import PreviewedPlan, Spelling

UNDO_PLAN_FORMAT = 1
PREVIEW_IDS = 50
"""Message ids a preview lists at most."""

_INT64_MAX = 2**63 - 1
CHUNKED = "chunkedMessages"
"""A partition's field of the ids that are chunks of one message, present only when some are:
a plan without a chunked message is spelled, and identified, as before the field."""

__all__ = [
    "PREVIEW_IDS",
    "UNDO_PLAN_FORMAT",
    "AppliedSkip",
    "UndoOutcome",
    "UndoPartition",
    "UndoPlan",
    "check_skip_id",
    "parse_triplets",
    "triplets",
]


def parse_triplets(texts: Sequence[object], where: str) -> npt.NDArray[np.int64]:
    """``ledger:entry[:batchIndex]`` texts as an ``(n, 3)`` int64 array (batch index -1 when
    absent); InvalidSkipPlanError naming ``where`` on anything else.

    Parsed as one joined text in numpy (a skip lists 100,000s of ids); anything odd is
    parsed again one text at a time, to name the first bad one.
    """
    if all(isinstance(text, str) for text in texts):
        rows = _parse_joined(texts)  # type: ignore[arg-type]
        if rows is not None:
            return rows
    return _parse_each(texts, where)


def _parse_joined(texts: Sequence[str]) -> npt.NDArray[np.int64] | None:
    """The rows of well-formed texts of plain digits; None when any text is not."""
    count = len(texts)
    fields = np.fromiter(map(str.count, texts, repeat(":", count)), np.int64, count) + 1
    joined = ":".join(texts)
    if np.any((fields < 2) | (fields > 3)) or not joined.replace(":", "").isdigit():
        return None if count else np.zeros((0, 3), dtype=np.int64)
    digits = joined.split(":")
    if max(map(len, digits)) > 18:
        return None  # past int64's safe width: the careful path checks the range
    values = np.array(digits, dtype=np.int64)
    starts = np.zeros(count, dtype=np.int64)
    np.cumsum(fields[:-1], out=starts[1:])
    rows = np.empty((count, 3), dtype=np.int64)
    rows[:, 0] = values[starts]
    rows[:, 1] = values[starts + 1]
    rows[:, 2] = np.where(fields == 3, values[np.minimum(starts + 2, values.size - 1)], -1)
    if np.any(rows[:, 2] > 2**31 - 1):
        return None
    return rows


def _parse_each(texts: Sequence[object], where: str) -> npt.NDArray[np.int64]:
    rows = np.empty((len(texts), 3), dtype=np.int64)
    for i, text in enumerate(texts):
        parts = text.split(":") if isinstance(text, str) else ()
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            values = [int(part) for part in parts]
        except ValueError:
            raise InvalidSkipPlanError(
                f"Invalid {where}[{i}]: {text!r} is not ledgerId:entryId[:batchIndex]"
            ) from None
        if len(values) == 2:
            values.append(-1)
        if not (0 <= values[0] <= _INT64_MAX and 0 <= values[1] <= _INT64_MAX) or not (
            -1 <= values[2] <= 2**31 - 1
        ):
            raise InvalidSkipPlanError(f"Invalid {where}[{i}]: {text!r} is out of range")
        rows[i] = values
    return rows


def triplets(
    ledger_ids: Sequence[int], entry_ids: Sequence[int], batch_indexes: Sequence[int]
) -> list[str]:
    """``ledger:entry[:batchIndex]`` of each message, as pulsar-admin prints them."""
    return [
        f"{led}:{ent}" if index < 0 else f"{led}:{ent}:{index}"
        for led, ent, index in zip(ledger_ids, entry_ids, batch_indexes, strict=True)
    ]


@dataclass(frozen=True)
class UndoPartition:
    """The messages of one topic partition an undo takes back, in the skip's order."""

    topic_partition: str
    ledger_ids: tuple[int, ...]
    entry_ids: tuple[int, ...]
    batch_indexes: tuple[int, ...]
    """-1: the whole entry."""
    chunked_messages: Groups = ()
    """Which ids are chunks of one message
    (:meth:`~cursorops.core.ids.chunked_messages.ChunkedMessages.groups`)."""

    def __len__(self) -> int:
        """Ids, every chunk of a chunked message."""
        return len(self.ledger_ids)

    @property
    def messages(self) -> int:
        """Messages, a chunked message once."""
        return self.count(np.ones(len(self), np.bool_))

    def count(self, flags: npt.ArrayLike) -> int:
        """How many messages the flagged ids are (one flag per id), a chunked message once
        (:func:`~cursorops.core.ids.chunked_messages.count_once`)."""
        return count_once(flags, self.chunked_messages)

    def same_ids(self, other: UndoPartition) -> bool:
        return (self.topic_partition, self.ledger_ids, self.entry_ids, self.batch_indexes) == (
            other.topic_partition,
            other.ledger_ids,
            other.entry_ids,
            other.batch_indexes,
        )

    def arrays(self) -> tuple[npt.NDArray[np.int64], ...]:
        """``(ledger ids, entry ids, batch indexes)`` as int64 arrays."""
        return tuple(
            np.array(column, dtype=np.int64)
            for column in (self.ledger_ids, self.entry_ids, self.batch_indexes)
        )

    def triplets(self) -> list[str]:
        return triplets(self.ledger_ids, self.entry_ids, self.batch_indexes)


@dataclass(frozen=True)
class UndoPlan(PreviewedPlan):
    """What undoing skip ``skip_id`` would take back, planned at ``planned_at_ms``.

    ``partitions`` hold the skip's messages per topic partition (each still on a
    retained ledger when planned); ``still_acknowledged`` counts those acknowledged
    then (only they change), a chunked message once, when any of its chunks is. The
    original skip's when, who, door and why come from its audit record and, for an
    approved skip, its plan record.
    """

    SPELLING: ClassVar[Spelling] = Spelling.ID_FIRST
    KIND: ClassVar[str] = "undo plan"
    INVALID: ClassVar[type[InvalidInputError]] = InvalidSkipPlanError

    topic: str
    subscription: str
    skip_id: int
    partitions: tuple[UndoPartition, ...]
    still_acknowledged: int
    planned_at_ms: int
    skipped_at_ms: int
    skipped_by: str
    skipped_via: str | None = None
    reason: str | None = None
    ticket: str | None = None
    approved_by: tuple[str, ...] = field(default=())

    @property
    def messages(self) -> int:
        """Messages the skip acknowledged, and this undo names, a chunked message once."""
        return sum(part.messages for part in self.partitions)

    @property
    def ids(self) -> int:
        """Ids this undo names: every chunk of a chunked message."""
        return sum(len(part) for part in self.partitions)

    def content(self) -> dict[str, Any]:
        return {
            "format": UNDO_PLAN_FORMAT,
            "topic": self.topic,
            "subscription": self.subscription,
            "skipId": self.skip_id,
            "plannedAt": self.planned_at_ms,
            "stillAcknowledged": self.still_acknowledged,
            "skip": {
                "at": self.skipped_at_ms,
                "by": self.skipped_by,
                "via": self.skipped_via,
                "reason": self.reason,
                "ticket": self.ticket,
                "approvedBy": list(self.approved_by),
            },
            "partitions": [
                {"topicPartition": part.topic_partition, "ids": part.triplets()}
                | (
                    {CHUNKED: [list(g) for g in part.chunked_messages]}
                    if part.chunked_messages
                    else {}
                )
                for part in self.partitions
            ],
        }

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> UndoPlan:
        body = _fields(content, "undo plan", _PLAN_FIELDS)
        if body["format"] != UNDO_PLAN_FORMAT or isinstance(body["format"], bool):
            raise InvalidSkipPlanError(
                f"Invalid undo plan: format {body['format']!r}, expected {UNDO_PLAN_FORMAT}"
            )
        skip = _fields(body["skip"], "undo plan skip", _SKIP_FIELDS)
        listed = body["partitions"]
        if not isinstance(listed, list):
            raise InvalidSkipPlanError("Invalid undo plan: partitions must be a list")
        partitions = []
        for i, entry in enumerate(listed):
            names: tuple[str, ...] = ("topicPartition", "ids")
            if isinstance(entry, Mapping) and CHUNKED in entry:
                names += (CHUNKED,)
            part = _fields(entry, f"undo plan partitions[{i}]", names)
            ids = part["ids"]
            if not isinstance(ids, list):
                raise InvalidSkipPlanError(f"Invalid undo plan: partitions[{i}].ids must be a list")
            rows = parse_triplets(ids, f"partitions[{i}].ids")
            try:
                groups = check_groups(part.get(CHUNKED, []), len(ids))
                if part.get(CHUNKED) == []:
                    raise ValueError(f"{CHUNKED} is left out when there is none")
            except ValueError as exc:
                raise InvalidSkipPlanError(f"Invalid undo plan: partitions[{i}]: {exc}") from exc
            partitions.append(
                UndoPartition(
                    _text(part["topicPartition"], f"partitions[{i}].topicPartition"),
                    tuple(rows[:, 0].tolist()),
                    tuple(rows[:, 1].tolist()),
                    tuple(rows[:, 2].tolist()),
                    groups,
                )
            )
        approved_by = skip["approvedBy"]
        if not isinstance(approved_by, list) or not all(isinstance(a, str) for a in approved_by):
            raise InvalidSkipPlanError("Invalid undo plan: skip.approvedBy must be a list of text")
        return cls(
            topic=_text(body["topic"], "topic"),
            subscription=_text(body["subscription"], "subscription"),
            skip_id=_integer(body["skipId"], "skipId"),
            partitions=tuple(partitions),
            still_acknowledged=_integer(body["stillAcknowledged"], "stillAcknowledged", 0),
            planned_at_ms=_integer(body["plannedAt"], "plannedAt", 0),
            skipped_at_ms=_integer(skip["at"], "skip.at", 0),
            skipped_by=_text(skip["by"], "skip.by"),
            skipped_via=_optional_text(skip["via"], "skip.via"),
            reason=_optional_text(skip["reason"], "skip.reason"),
            ticket=_optional_text(skip["ticket"], "skip.ticket"),
            approved_by=tuple(approved_by),
        )

    def preview(self) -> dict[str, Any]:
        """What a reviewer reads: the skip (when, who, why), the counts, the first ids."""
        listed: list[str] = []
        for part in self.partitions:
            if len(listed) >= PREVIEW_IDS:
                break
            listed += triplets(
                part.ledger_ids[: PREVIEW_IDS - len(listed)],
                part.entry_ids[: PREVIEW_IDS - len(listed)],
                part.batch_indexes[: PREVIEW_IDS - len(listed)],
            )
        return {
            "planId": self.plan_id,
            "topic": self.topic,
            "subscription": self.subscription,
            "skipId": self.skip_id,
            "skippedAt": self.skipped_at_ms,
            "skippedBy": self.skipped_by,
            "skippedVia": self.skipped_via,
            "reason": self.reason,
            "ticket": self.ticket,
            "approvedBy": list(self.approved_by),
            "messages": self.messages,
            "stillAcknowledged": self.still_acknowledged,
            "perPartition": {part.topic_partition: part.messages for part in self.partitions},
            "ids": listed,
            "idsNotListed": self.ids - len(listed),
        }

    def same_messages(self, other: UndoPlan) -> bool:
        """Whether both name the same ids of the same skip, partition by partition (which
        are chunks of one message only decides counts)."""
        return (
            (self.topic, self.subscription, self.skip_id)
            == (other.topic, other.subscription, other.skip_id)
            and len(self.partitions) == len(other.partitions)
            and all(a.same_ids(b) for a, b in zip(self.partitions, other.partitions, strict=True))
        )


_PLAN_FIELDS = (
    "format",
    "topic",
    "subscription",
    "skipId",
    "plannedAt",
    "stillAcknowledged",
    "skip",
    "partitions",
)
_SKIP_FIELDS = ("at", "by", "via", "reason", "ticket", "approvedBy")


@dataclass(frozen=True)
class UndoOutcome:
    """What applying an undo did: ``unacknowledged`` are the skip's messages taken back,
    ``not_acknowledged`` those no longer acknowledged when it applied (left as they were);
    ``undo_id`` is the id of the ``undo-skip`` audit record."""

    topic: str
    subscription: str
    skip_id: int
    undo_id: int
    plan_id: str
    unacknowledged: tuple[str, ...]
    not_acknowledged: tuple[str, ...]
    per_partition: Mapping[str, int]
    """Messages taken back, per topic partition."""

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "skipId": self.skip_id,
            "undoId": self.undo_id,
            "planId": self.plan_id,
            "unacknowledged": list(self.unacknowledged),
            "notAcknowledged": list(self.not_acknowledged),
            "perPartition": dict(self.per_partition),
        }


@dataclass(frozen=True)
class AppliedSkip:
    """One applied skip as the audit log has it, and whether it was undone."""

    skip_id: int
    at_ms: int
    topic: str
    subscription: str | None
    role: str
    via: str | None
    ids: int
    """Message ids the skip acknowledged (an id of a whole batch counts once)."""
    undone_by: int | None = None
    """The ``undo-skip`` record's id, None while the skip stands."""
    undone_at_ms: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "skipId": self.skip_id,
            "at": self.at_ms,
            "topic": self.topic,
            "subscription": self.subscription,
            "role": self.role,
            "via": self.via,
            "ids": self.ids,
            "undone": self.undone_by is not None,
            "undoId": self.undone_by,
            "undoneAt": self.undone_at_ms,
        }


def _fields(document: object, where: str, names: Sequence[str]) -> Mapping[str, object]:
    if not isinstance(document, Mapping):
        raise InvalidSkipPlanError(f"Invalid {where}: must be an object")
    missing = [name for name in names if name not in document]
    unknown = sorted(str(name) for name in set(document) - set(names))
    if missing or unknown:
        said = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(unknown)}"] if unknown else []
        )
        raise InvalidSkipPlanError(f"Invalid {where}: {'; '.join(said)}")
    return document


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidSkipPlanError(f"Invalid undo plan: {where} must be a non-empty string")
    return value


def _optional_text(value: object, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _integer(value: object, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _INT64_MAX:
        raise InvalidSkipPlanError(
            f"Invalid undo plan: {where} must be an integer from {minimum} to {_INT64_MAX}, "
            f"got {value!r}"
        )
    return value


def check_skip_id(value: object) -> int:
    """A skip id as given (CLI, REST, Python): a positive int64, else InvalidArgumentError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _INT64_MAX:
        raise InvalidArgumentError(f"Invalid skip id {value!r}: expected a positive integer")
    return value

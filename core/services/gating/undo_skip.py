"""Undo-skip, the gated operation: a skip's acknowledgements taken back, and the applied
skips of a topic as the audit log lists them.

A skip's id is the id of its ``skip`` audit record, written in the transaction of
its acknowledgements; that record lists the messages the skip acknowledged
(``skipped``). An undo takes back the acknowledgement of exactly those messages,
the ones still acknowledged when it applies, and records an ``undo-skip`` audit
record naming the skip: a skip is undone at most once. A chunked message is
taken back whole: every chunk of one the record names.

An :class:`UndoPlan` is what an operator previews (or a reviewer approves, where
the namespace requires approval): it travels as JSON with an id derived from its
content (:class:`~cursorops.core.domain.portable_plan.PortablePlan`), and a document whose id does
not match its content is refused. A matching id proves nothing about the store: applying plans
the undo again from the audit log and refuses a plan that names other messages.

Here are the request's arguments (:class:`UndoSkip`), the plan, its preview, the applied
skips (:func:`list_skips`), and the apply (at once, or of an approved record) through
the cursor door with its audit record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.acks.unacknowledge import acknowledged, unacknowledge
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import (
    InvalidArgumentError,
    InvalidInputError,
    InvalidSkipPlanError,
    SkipAlreadyUndoneError,
    SkipNotFoundError,
)
from cursorops.core.domain.ids.chunked_messages import Groups, check_groups, count_once
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.ids.triplets import parse_triplets, triplets
from cursorops.core.domain.plans.preview import (
    Effects,
    MessageRow,
    PartitionChange,
    Preview,
    count,
    request_of,
    time_text,
)
from cursorops.core.domain.portable_plan import PreviewedPlan, Spelling
from cursorops.core.services.gating import apply_record
from cursorops.core.services.gating.operation import (
    SKIP,
    UNDO_SKIP,
    Applied,
    Approval,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.values import AuditEntry, AuditRecord

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.store.values import TopicInfo


_INT64_MAX = 2**63 - 1

UNDO_PLAN_FORMAT = 1
PREVIEW_IDS = 50
"""Message ids a preview lists at most."""

CHUNKED = "chunkedMessages"
"""A partition's field of the ids that are chunks of one message, present only when some are:
a plan without a chunked message is spelled, and identified, as before the field."""


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
    (:meth:`~cursorops.core.domain.ids.chunked_messages.ChunkedMessages.groups`)."""

    def __len__(self) -> int:
        """Ids, every chunk of a chunked message."""
        return len(self.ledger_ids)

    @property
    def messages(self) -> int:
        """Messages, a chunked message once."""
        return self.count(np.ones(len(self), np.bool_))

    def count(self, flags: npt.ArrayLike) -> int:
        """How many messages the flagged ids are (one flag per id), a chunked message once
        (:func:`~cursorops.core.domain.ids.chunked_messages.count_once`)."""
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


@dataclass(frozen=True, kw_only=True)
class UndoSkip(GatedArguments):
    """Undo skip ``skip_id`` (the id of its audit record) of the subscription."""

    skip_id: int

    def __post_init__(self) -> None:
        super().__post_init__()
        check_skip_id(self.skip_id)


def _applied(outcome: UndoOutcome) -> Applied:
    return Applied(
        UNDO_SKIP,
        len(outcome.unacknowledged),
        len(outcome.not_acknowledged),
        outcome.to_json(),
        result=outcome,
    )


def _short(partition: str) -> str:
    return partition.rsplit("-partition-", 1)[-1] if "-partition-" in partition else ""


def undo_preview(record: PlanRecord, plan: UndoPlan) -> Preview:
    """What the undo takes back: the skip's messages still acknowledged are redelivered,
    those no longer acknowledged are left as is; the skip itself (when, by whom, why, and who
    approved it: from its audit record) as details and in the request."""
    listed: list[MessageRow] = []
    for part in plan.partitions:
        for triplet in part.triplets()[: PREVIEW_IDS - len(listed)]:
            listed.append(MessageRow(triplet, _short(part.topic_partition), content=False))
    left = max(plan.messages - plan.still_acknowledged, 0)
    heading = f"Undo skip {plan.skip_id}: redeliver {count(plan.still_acknowledged)}"
    if left:
        heading += f"; {left} no longer acknowledged"
    skip = f"{plan.skip_id}, applied at {time_text(plan.skipped_at_ms)} by {plan.skipped_by}"
    if plan.skipped_via:
        skip += f" via {plan.skipped_via}"
    return Preview(
        operation=UNDO_SKIP,
        heading=heading,
        topic=record.topic,
        subscription=record.subscription,
        request=request_of(record, undone_skip_approvals=plan.approved_by),
        partitions=tuple(
            PartitionChange(part.topic_partition, ids=len(part)) for part in plan.partitions
        ),
        effects=Effects(
            redelivered=plan.still_acknowledged,
            unchanged=left,
            unchanged_as="no longer acknowledged",
        ),
        details=(
            ("Skip undone", skip),
            ("Its reason", plan.reason or "none given"),
            ("Its ticket", plan.ticket or "none"),
            (
                "Its approvals",
                ", ".join(plan.approved_by)
                if plan.approved_by
                else "none (applied where no approval was required)",
            ),
            ("Messages it acknowledged", f"{plan.messages} ({count(plan.ids, 'id')})"),
            ("Planned at", time_text(plan.planned_at_ms)),
        ),
        messages=tuple(listed),
        messages_not_listed=max(plan.ids - len(listed), 0),
    )


MAX_IDS_NAMED = 10
"""Ids an error names at most."""


def list_skips(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str | None = None,
    *,
    limit: int = 100,
) -> list[AppliedSkip]:
    """The topic's newest ``limit`` applied skips (of one subscription), newest first, each
    with its undo when it was undone. Authorized as GET_STATS, as the audit log is."""
    info = services.access.authorized_topic(role, Operation.GET_STATS, topic)
    skips = services.metadata.audit_log(info.name, limit, kinds=(SKIP,), subscription=subscription)
    undos = _undos(services.metadata.audit_log(info.name, None, kinds=(UNDO_SKIP,)))
    listed = []
    for record in skips:
        undo = undos.get(record.id)
        skipped = record.detail.get("skipped")
        via = record.detail.get("via")
        listed.append(
            AppliedSkip(
                skip_id=record.id,
                at_ms=record.at_ms,
                topic=record.topic,
                subscription=record.subscription,
                role=record.role,
                via=via if isinstance(via, str) else None,
                ids=len(skipped) if isinstance(skipped, list) else 0,
                undone_by=None if undo is None else undo.id,
                undone_at_ms=None if undo is None else undo.at_ms,
            )
        )
    return listed


def plan_undo_skip(
    services: GatingServices, role: str, topic: str | TopicName, subscription: str, skip_id: int
) -> UndoPlan:
    """Plan taking back skip ``skip_id`` of ``subscription``; changes nothing.

    The skip is its ``skip`` audit record on this topic and subscription
    (SkipNotFoundError otherwise), not undone yet (SkipAlreadyUndoneError).
    Every message it acknowledged must still be on a retained ledger of the
    topic, else the whole undo is refused (InvalidArgumentError naming the
    ids). A chunked message is taken back whole: the plan names every chunk of
    each one the skip's record names. The plan counts those acknowledged now.
    Authorized as SKIP on the topic, the permission the skip needed.
    """
    plan, _ = _plan(services, role, topic, subscription, skip_id)
    return plan


def _plan(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    skip_id: int,
    *,
    count: bool = True,
) -> tuple[UndoPlan, dict[str, LedgerLayout]]:
    """The plan, and the ledger layouts of the partitions it touches. Without ``count``
    no cursor is read (an apply decides under the locks) and ``still_acknowledged`` is 0."""
    info = services.access.authorized_topic(role, Operation.SKIP, topic)
    record = _skip_record(services, info, subscription, check_skip_id(skip_id))
    undone = _undos(services.metadata.audit_log(info.name, None, kinds=(UNDO_SKIP,)))
    if skip_id in undone:
        raise _already_undone(skip_id, undone[skip_id])
    skipped = record.detail.get("skipped")
    if not isinstance(skipped, list):
        raise SkipNotFoundError(f"Audit record {skip_id} lists no skipped messages")
    rows = parse_triplets(skipped, f"skip {skip_id} skipped")
    with services.metadata.reading() as view:
        view.subscription(info.name, subscription)
        ledger_lists = view.ledgers_of(info.partition_names())
    partition_names = list(ledger_lists)
    owned = sorted(
        (ledger.ledger_id, ledger.entries, code)
        for code, name in enumerate(partition_names)
        for ledger in ledger_lists[name]
    )
    known = np.array([o[0] for o in owned], dtype=np.int64)
    entries = np.array([o[1] for o in owned], dtype=np.int64)
    codes = np.array([o[2] for o in owned], dtype=np.int64)
    # Each message's partition, by its ledger (ledger ids are unique across the store).
    slot = np.minimum(np.searchsorted(known, rows[:, 0]), max(known.size - 1, 0))
    retained = (
        (known[slot] == rows[:, 0]) & (rows[:, 1] < entries[slot])
        if known.size
        else np.zeros(len(rows), dtype=np.bool_)
    )
    missing = np.flatnonzero(~retained).tolist()
    if missing:
        shown = ", ".join(str(skipped[i]) for i in missing[:MAX_IDS_NAMED])
        more = f" and {len(missing) - MAX_IDS_NAMED} more" if len(missing) > MAX_IDS_NAMED else ""
        raise InvalidArgumentError(
            f"Cannot undo skip {skip_id}: ledger no longer retained for {shown}{more}; "
            "nothing undone"
        )
    code_of = codes[slot] if known.size else np.zeros(0, dtype=np.int64)
    layouts = {
        name: LedgerLayout.of((i.ledger_id, i.entries) for i in ledgers)
        for name, ledgers in ledger_lists.items()
    }
    partitions = []
    still = 0
    for code, name in enumerate(partition_names):
        mine = np.flatnonzero(code_of == code)
        if not mine.size:
            continue
        part = _whole_chunked_messages(
            services,
            UndoPartition(
                name,
                tuple(rows[mine, 0].tolist()),
                tuple(rows[mine, 1].tolist()),
                tuple(rows[mine, 2].tolist()),
            ),
            layouts[name],
        )
        partitions.append(part)
        if count:
            state = services.context.cursor_state(name, subscription, layouts[name])
            still += part.count(acknowledged(state, *part.arrays()))
    detail = record.detail
    approvers = detail.get("approvedBy")
    why = _why(services, detail.get("planDigest"))
    plan = UndoPlan(
        topic=info.name,
        subscription=subscription,
        skip_id=skip_id,
        partitions=tuple(partitions),
        still_acknowledged=still,
        planned_at_ms=services.clock(),
        skipped_at_ms=record.at_ms,
        skipped_by=record.role,
        skipped_via=_text_or_none(detail.get("via")),
        reason=why.get("reason"),
        ticket=why.get("ticket"),
        approved_by=tuple(str(a) for a in approvers) if isinstance(approvers, list) else (),
    )
    return plan, {p.topic_partition: layouts[p.topic_partition] for p in partitions}


def _whole_chunked_messages(
    services: GatingServices, part: UndoPartition, layout: LedgerLayout
) -> UndoPartition:
    """``part`` and, after its messages, the other chunks of each chunked message it
    names (position order): an undo takes a chunked message back whole, whichever of
    its chunks the skip's record lists (:mod:`cursorops.core.domain.ids.chunked_messages`); with
    which are chunks of one message, for its counts."""
    if services.context.entry_arrays(part.topic_partition, layout).chunk_rest is None:
        return part
    chunks = services.context.chunked_messages(part.topic_partition)
    ledgers, entries = chunks.whole(part.ledger_ids, part.entry_ids)
    listed = set(zip(part.ledger_ids, part.entry_ids, strict=True))
    added = [
        (ledger, entry)
        for ledger, entry in zip(ledgers.tolist(), entries.tolist(), strict=True)
        if (ledger, entry) not in listed
    ]
    ledger_ids = part.ledger_ids + tuple(a[0] for a in added)
    entry_ids = part.entry_ids + tuple(a[1] for a in added)
    return UndoPartition(
        part.topic_partition,
        ledger_ids,
        entry_ids,
        part.batch_indexes + (-1,) * len(added),
        chunks.groups(ledger_ids, entry_ids),
    )


def _skip_record(
    services: GatingServices, info: TopicInfo, subscription: str, skip_id: int
) -> AuditRecord:
    record = services.metadata.audit_record(skip_id)
    if record is None or record.topic != info.name:
        raise SkipNotFoundError(f"No skip {skip_id} on {info.name}")
    if record.kind == UNDO_SKIP:
        raise InvalidArgumentError(
            f"{skip_id} is the id of an undo (of skip {record.detail.get('skipId')}), not of "
            "a skip: an undo is not undone; skip the messages again (cursorops topics "
            "skip-messages) to acknowledge them again"
        )
    if record.kind != SKIP:
        raise SkipNotFoundError(f"No skip {skip_id} on {info.name}: it records a {record.kind}")
    if record.subscription != subscription:
        raise SkipNotFoundError(
            f"No skip {skip_id} on subscription '{subscription}' of {info.name}: it skipped "
            f"on '{record.subscription}'"
        )
    return record


def _why(services: GatingServices, digest: object) -> dict[str, str]:
    """Reason and ticket of an approved skip, from its plan record."""
    if not isinstance(digest, str):
        return {}
    record = services.metadata.plans.get(digest)
    if record is None:
        return {}
    return {
        key: value
        for key in ("reason", "ticket")
        if isinstance(value := record.document.get(key), str) and value
    }


def apply_undo_skip(
    services: GatingServices, role: str, plan: UndoPlan, *, via: str = "broker"
) -> UndoOutcome:
    """:func:`_apply` at once; refused on a namespace that requires approval
    (ApprovalRequiredError): only an approved plan record applies there."""
    return _apply(services, role, plan, via, None)


def _apply(
    services: GatingServices, role: str, plan: UndoPlan, via: str, approval: Approval | None
) -> UndoOutcome:
    """Take back the acknowledgement of the plan's messages still acknowledged, in one
    transaction with the ``undo-skip`` audit record (and an approved plan's claim).

    The plan may be stale or forged: it is planned again from
    the audit log (authorization, the skip, not undone, every ledger retained)
    and refused unless it names the same messages. Under the cursors' row locks
    the skip is checked again for an undo committed meanwhile; each cursor is
    written as one replacing delta (:func:`cursorops.core.domain.acks.unacknowledge.unacknowledge`):
    a later cumulative acknowledgement that passed a message moves the
    mark-delete position back before it, and keeps everything else acknowledged.
    """
    info = services.access.authorized_topic(role, Operation.SKIP, plan.topic)
    if approval is None:
        services.access.refuse_without_approval(
            info, "undo-skip", "the cursorops_undo_skip workflow"
        )
    if info.name != plan.topic:
        raise InvalidSkipPlanError(
            f"Invalid undo plan: topic '{plan.topic}' is not a canonical topic name ('{info.name}')"
        )
    again, layouts = _plan(services, role, plan.topic, plan.subscription, plan.skip_id, count=False)
    if not again.same_messages(plan):
        raise InvalidSkipPlanError(
            f"Invalid undo plan {plan.plan_id}: it does not name the messages skip "
            f"{plan.skip_id} acknowledged; nothing undone"
        )
    plan_id = plan.plan_id
    parts = again.partitions
    at_ms = services.clock()
    ticket = apply_record.ticket(approval, UNDO_SKIP)
    with services.metadata.cursor_transaction() as work:
        read = work.read(info.name, plan.subscription, [p.topic_partition for p in parts])
        # Under the row locks every undo of this skip committed before is visible.
        undone = _undos(work.audit_records(info.name, (UNDO_SKIP,)))
        if plan.skip_id in undone:
            raise _already_undone(plan.skip_id, undone[plan.skip_id])
        taken: list[str] = []
        left: list[str] = []
        per_partition: dict[str, int] = {}
        for part, (cursor_id, record) in zip(parts, read, strict=True):
            layout = layouts[part.topic_partition]
            state = replay(record, layout)
            columns = part.arrays()
            acked = acknowledged(state, *columns)
            names = part.triplets()
            taken += [n for n, a in zip(names, acked.tolist(), strict=True) if a]
            left += [n for n, a in zip(names, acked.tolist(), strict=True) if not a]
            per_partition[part.topic_partition] = int(acked.sum())
            if acked.any():
                after = unacknowledge(state, layout, *columns)
                work.append(cursor_id, [cursor_codec.encode(after, replace=True)], ticket=ticket)
        fields = {
            "skipId": plan.skip_id,
            "planId": plan_id,
            "unacknowledged": taken,
            "notAcknowledged": left,
            "perPartition": per_partition,
        }
        detail = apply_record.audit_detail(fields, via, approval)
        entry = AuditEntry(UNDO_SKIP, info.name, plan.subscription, role, detail, at_ms)
        undo_id = apply_record.record_apply(work, entry, approval, unacknowledged=len(taken))
    return UndoOutcome(
        topic=info.name,
        subscription=plan.subscription,
        skip_id=plan.skip_id,
        undo_id=undo_id,
        plan_id=plan_id,
        unacknowledged=tuple(taken),
        not_acknowledged=tuple(left),
        per_partition=per_partition,
    )


def _undos(records: list[AuditRecord]) -> dict[int, AuditRecord]:
    """The ``undo-skip`` records by the skip id each names."""
    found: dict[int, AuditRecord] = {}
    for record in records:
        skip_id = record.detail.get("skipId")
        if isinstance(skip_id, int) and not isinstance(skip_id, bool):
            found.setdefault(skip_id, record)
    return found


def _already_undone(skip_id: int, undo: AuditRecord) -> SkipAlreadyUndoneError:
    return SkipAlreadyUndoneError(
        f"Skip {skip_id} was undone already (undo {undo.id} by '{undo.role}'); nothing undone"
    )


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class UndoSkipOperation(PreviewedOperation[UndoPlan, UndoSkip]):
    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        # No message content in it: ids, counts, positions, the skip's own record.
        return undo_preview(record, self.plan_of(record))

    def targets(
        self, services: GatingServices, role: str, arguments: UndoSkip
    ) -> Sequence[TopicInfo]:
        return (services.access.authorized_topic(role, Operation.SKIP, arguments.topic),)

    def plan_for(self, services: GatingServices, role: str, arguments: UndoSkip) -> UndoPlan:
        return plan_undo_skip(
            services, role, arguments.topic, arguments.subscription, arguments.skip_id
        )

    def apply_plan(
        self,
        services: GatingServices,
        role: str,
        plan: UndoPlan,
        via: str,
        approval: Approval | None,
    ) -> Applied:
        return _applied(_apply(services, role, plan, via, approval))


OPERATION: UndoSkipOperation = UndoSkipOperation(
    "undo-skip", UNDO_SKIP, UndoPlan, UndoSkip, "cursorops_undo_skip", "undo_skip", "Undo a skip"
)


__all__ = [
    "OPERATION",
    "PREVIEW_IDS",
    "UNDO_PLAN_FORMAT",
    "AppliedSkip",
    "UndoOutcome",
    "UndoPartition",
    "UndoPlan",
    "UndoSkip",
    "apply_undo_skip",
    "check_skip_id",
    "list_skips",
    "plan_undo_skip",
]

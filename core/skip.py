"""Skip by message id (PIP-423): acknowledge chosen messages for a subscription.

Where Pulsar's proposal is weak, this is not:

- Every id is routed to its own partition. Ledger ids are unique across the
  store (as BookKeeper's are), so even a bare triplet names one partition; an
  id that carries a partition must agree with its ledger.
- Validation is all-or-nothing and happens before anything is written: an
  unknown entry, a position beyond the last entry, a batch index out of range
  or on a non-batched entry: a clear error naming every bad id, nothing acked.
- Already acknowledged ids (whole entries or indexes) are reported as such.
- A batch-index skip acknowledges exactly that index (batch-index
  acknowledgement is always on).

Skipping a delayed message before its time cancels it: the read path never
delivers an acknowledged message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.cursor import AckTarget, CursorState
from core.errors import (
    EntryNotFoundError,
    InvalidBatchIndexError,
    InvalidMessageIdError,
    InvalidSkipPayloadError,
    PositionOutOfRangeError,
)
from core.ledger_layout import LedgerLayout
from core.message_id import MessageId, decode_base64
from core.position import Position, match_positions

MAX_ERRORS_LISTED = 10

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class SkipLookup:
    """One partition's entries as skip validation looks ids up in them: the ledger layout
    and, per committed entry, its position, batch size and delivery time."""

    layout: LedgerLayout
    ledger_ids: np.ndarray
    entry_ids: np.ndarray
    batch_sizes: np.ndarray
    deliver_at: np.ndarray
    """Per entry, -1 when not delayed."""

    def rows_of(self, positions: Sequence[Position]) -> np.ndarray:
        """Row of each position, -1 where there is no such entry (vectorised, collision-free)."""
        return match_positions(
            np.fromiter((p.ledger_id for p in positions), dtype=np.int64, count=len(positions)),
            np.fromiter((p.entry_id for p in positions), dtype=np.int64, count=len(positions)),
            self.ledger_ids,
            self.entry_ids,
        )


@dataclass(frozen=True)
class SkipItem:
    message_id: MessageId
    """With its partition filled in."""
    topic_partition: str
    batch_size: int
    deliver_at: int | None
    already_acknowledged: bool

    @property
    def target(self) -> AckTarget:
        mid = self.message_id
        return AckTarget(mid.position, mid.batch_index, self.batch_size)


@dataclass(frozen=True)
class SkipOutcome:
    """What applying a skip plan did; ``skipped + already_acknowledged +
    acknowledged_meanwhile`` are the plan's messages, each in exactly one list."""

    topic: str
    subscription: str
    plan_id: str
    """The applied plan's :attr:`~core.skip_plan.SkipPlan.plan_id`."""
    skipped: list[MessageId] = field(default_factory=list)
    """Acknowledged by this apply."""
    already_acknowledged: list[MessageId] = field(default_factory=list)
    """Acknowledged already when the plan was made."""
    acknowledged_meanwhile: list[MessageId] = field(default_factory=list)
    """Acknowledged by someone else between planning and applying."""
    per_partition: dict[str, int] = field(default_factory=dict)
    """Newly acknowledged ids per topic partition of the plan."""
    part_of: str | None = None
    """The whole plan's id when a single partition's share was applied."""

    def to_pulsar_json(
        self, render_id: Callable[[MessageId], object] = MessageId.triplet
    ) -> dict[str, object]:
        """The one JSON shape of a skip's outcome: CLI, Spark job, audit record, REST.

        Each message id as ``render_id`` makes it: a triplet
        (``ledger:entry:batchIndex``, as pulsar-admin prints them) by default.
        """
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "planId": self.plan_id,
            "partOf": self.part_of,
            "skipped": [render_id(m) for m in self.skipped],
            "alreadyAcknowledged": [render_id(m) for m in self.already_acknowledged],
            "acknowledgedMeanwhile": [render_id(m) for m in self.acknowledged_meanwhile],
            "perPartition": dict(self.per_partition),
        }


def parse_triplets(texts: Sequence[str]) -> list[MessageId]:
    return [MessageId.parse_triplet(t) for t in texts]


def parse_base64_ids(texts: Sequence[str]) -> list[MessageId]:
    return [MessageId.from_base64(t) for t in texts]


def parse_payload(body: object) -> list[MessageId]:
    """The three request shapes of PIP-423's REST endpoint.

    - a bare JSON array of base64 ``MessageIdData``;
    - ``{"type": "byteArray", "messageIds": [b64, ...]}`` (no ``type`` = byteArray);
    - ``{"type": "messageId", "messageIds": [{"ledgerId": 1, "entryId": 2, "batchIndex": 0}]}``
      (numbers may be numeric strings; ``type`` is case-insensitive; a negative or
      absent batchIndex means the whole entry, in this shape only).

    A number is a JSON integer or a string of ASCII decimal digits with an
    optional leading '-', within int64 (batchIndex: int32); booleans, floats,
    spaces and non-ASCII digits are refused. Base64 may leave out its padding,
    as Java's decoder allows. Every failure is one InvalidSkipPayloadError line.
    """
    if isinstance(body, list):
        return _byte_array_ids(body)
    if not isinstance(body, Mapping):
        raise InvalidSkipPayloadError(
            "Invalid skipByMessageIds payload: expected a JSON array or object"
        )
    unknown = set(body) - {"type", "messageIds"}
    if unknown:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: unknown field(s) {_names(unknown)}"
        )
    kind = body.get("type", "byteArray")
    if not isinstance(kind, str):
        raise InvalidSkipPayloadError("Invalid skipByMessageIds payload: type must be a string")
    ids = body.get("messageIds")
    if not isinstance(ids, list):
        raise InvalidSkipPayloadError("Invalid skipByMessageIds payload: messageIds must be a list")
    if kind.lower() == "bytearray":
        return _byte_array_ids(ids)
    if kind.lower() == "messageid":
        return [_object_id(item, i) for i, item in enumerate(ids)]
    raise InvalidSkipPayloadError(
        f"Invalid skipByMessageIds payload: unknown type '{kind}' (byteArray or messageId)"
    )


def _names(keys: Iterable[object]) -> str:
    """Unknown field names for an error line: quoted (no raw newline), at most ten."""
    shown = sorted(repr(str(k))[:40] for k in keys)
    return "[" + ", ".join(shown[:10]) + (", ..." if len(shown) > 10 else "") + "]"


def _byte_array_ids(items: list[object]) -> list[MessageId]:
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] must be a base64 string"
            )
        try:
            decode_base64(item)
        except InvalidMessageIdError as exc:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] is not base64: {item[:80]!r}"
            ) from exc
        try:
            out.append(MessageId.from_base64(item))
        except InvalidMessageIdError as exc:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}]: {exc}"
            ) from exc
    return out


# ASCII decimal digits only: str.isdigit() and int() also take "²", "١٢" and "１２".
_DECIMAL = re.compile(r"-?[0-9]{1,20}", re.ASCII)


def _number(value: object, what: str, low: int, high: int) -> int:
    """A JSON integer or a numeric string (ASCII decimal, optional '-'), within [low, high].

    Booleans and floats are refused, as Jackson refuses them for a ``long``.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _DECIMAL.fullmatch(value):
        number = int(value)
    else:
        shown = repr(value) if isinstance(value, str | int | float) else type(value).__name__
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: {what} must be a number (an integer, or a "
            f"string of ASCII decimal digits with an optional '-'), got {shown[:80]}"
        )
    if not low <= number <= high:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: {what} {number} out of range [{low}, {high}]"
        )
    return number


def _object_id(item: object, i: int) -> MessageId:
    if not isinstance(item, Mapping):
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] must be an object"
        )
    unknown = set(item) - {"ledgerId", "entryId", "batchIndex"}
    if unknown:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] has unknown field(s) "
            f"{_names(unknown)}"
        )
    for required in ("ledgerId", "entryId"):
        if required not in item:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] lacks {required}"
            )
    ledger_id = _number(item["ledgerId"], f"messageIds[{i}].ledgerId", _INT64_MIN, _INT64_MAX)
    entry_id = _number(item["entryId"], f"messageIds[{i}].entryId", _INT64_MIN, _INT64_MAX)
    batch = item.get("batchIndex")
    # This shape alone lets an absent or negative batchIndex mean the whole entry (PIP-423).
    batch_index = (
        -1
        if batch is None
        else max(_number(batch, f"messageIds[{i}].batchIndex", _INT32_MIN, _INT32_MAX), -1)
    )
    if ledger_id < 0 or entry_id < 0:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] has a negative ledgerId or entryId"
        )
    return MessageId(ledger_id, entry_id, -1, batch_index)


def validate(
    ids: Sequence[MessageId],
    partition_of_ledger: Mapping[int, tuple[str, int]],
    facts: Mapping[str, SkipLookup],
    states: Mapping[str, CursorState],
) -> list[SkipItem]:
    """Check every id; return one item per distinct id, or raise naming every bad one.

    ``partition_of_ledger`` maps each ledger of the topic to ``(topic partition
    name, partition index)``; ``facts`` and ``states`` are keyed by topic
    partition name. Nothing is changed here.
    """
    problems = _Problems()
    seen: set[tuple[int, int, int]] = set()
    items: list[SkipItem] = []
    for name, named in _route(ids, partition_of_ledger, problems).items():
        items += _check_partition(name, named, facts[name], states[name], problems, seen)
    problems.raise_if_any()
    return items


class _Problems:
    """Every bad id's line; the error class is the first problem's."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.first_error: type[Exception] | None = None

    def fail(self, kind: type[Exception], text: str) -> None:
        self.first_error = self.first_error or kind
        self.lines.append(text)

    def raise_if_any(self) -> None:
        if self.lines:
            shown = self.lines[:MAX_ERRORS_LISTED]
            more = len(self.lines) - len(shown)
            text = "; ".join(shown) + (f"; and {more} more" if more else "")
            raise (self.first_error or InvalidMessageIdError)(f"Nothing skipped: {text}")


def _route(
    ids: Sequence[MessageId],
    partition_of_ledger: Mapping[int, tuple[str, int]],
    problems: _Problems,
) -> dict[str, list[MessageId]]:
    """Each id under the partition its ledger belongs to, carrying that partition's index."""
    fail = problems.fail
    by_partition: dict[str, list[MessageId]] = {}
    for mid in ids:
        if mid.ledger_id < 0 or mid.entry_id < 0:
            fail(InvalidMessageIdError, f"{_named(mid)}: ledgerId and entryId must be >= 0")
            continue
        if mid.partition < -1:
            fail(InvalidMessageIdError, f"{_named(mid)}: partition {mid.partition} is not valid")
            continue
        owner = partition_of_ledger.get(mid.ledger_id)
        if owner is None:
            if mid.ledger_id > max(partition_of_ledger, default=-1):
                fail(PositionOutOfRangeError, f"{_named(mid)}: beyond the last entry of the topic")
            else:
                fail(EntryNotFoundError, f"{_named(mid)}: no ledger {mid.ledger_id} in this topic")
            continue
        name, index = owner
        if mid.partition >= 0 and mid.partition != index:
            fail(
                InvalidMessageIdError,
                f"{_named(mid)}: carries partition {mid.partition}, but ledger "
                f"{mid.ledger_id} belongs to partition {index}",
            )
            continue
        by_partition.setdefault(name, []).append(
            MessageId.of_store(mid.ledger_id, mid.entry_id, index, mid.batch_index, 0)
        )
    return by_partition


def _check_partition(
    name: str,
    named: Sequence[MessageId],
    fact: SkipLookup,
    state: CursorState,
    problems: _Problems,
    seen: set[tuple[int, int, int]],
) -> list[SkipItem]:
    """The items of one partition's ids; each bad id is added to ``problems``."""
    fail = problems.fail
    last_entry = fact.layout.last_position
    # Range-checked against the real ledgers before any lookup: an entry id
    # past its ledger's end names nothing, whatever the next ledger holds.
    mids = []
    for mid in named:
        held = fact.layout.entries_of(mid.ledger_id)
        if mid.entry_id < held:
            mids.append(mid)
        elif mid.position > last_entry:
            fail(PositionOutOfRangeError, f"{_named(mid)}: beyond the last entry {last_entry}")
        else:
            fail(
                EntryNotFoundError,
                f"{_named(mid)}: no such entry, ledger {mid.ledger_id} holds {held} "
                f"entries (0 to {held - 1})",
            )
    rows = fact.rows_of([Position(m.ledger_id, m.entry_id) for m in mids])
    found = np.maximum(rows, 0) if fact.batch_sizes.size else np.zeros(0, dtype=np.int64)
    batch_sizes = fact.batch_sizes[found].tolist()
    deliver_ats = fact.deliver_at[found].tolist()
    items = []
    for i, (mid, row) in enumerate(zip(mids, rows.tolist(), strict=True)):
        if row < 0:
            fail(EntryNotFoundError, f"{_named(mid)}: no such entry")
            continue
        batch_size = batch_sizes[i]
        problem = _batch_index_problem(mid, batch_size)
        if problem is not None:
            fail(InvalidBatchIndexError, problem)
            continue
        identity = (mid.ledger_id, mid.entry_id, mid.batch_index)
        if identity in seen:
            continue
        seen.add(identity)
        deliver_at = deliver_ats[i]
        position = Position(mid.ledger_id, mid.entry_id)
        items.append(
            SkipItem(
                message_id=MessageId.of_store(
                    mid.ledger_id, mid.entry_id, mid.partition, mid.batch_index, batch_size
                ),
                topic_partition=name,
                batch_size=batch_size,
                deliver_at=deliver_at if deliver_at >= 0 else None,
                already_acknowledged=state.is_acked(position, mid.batch_index),
            )
        )
    return items


def _batch_index_problem(mid: MessageId, batch_size: int) -> str | None:
    # -1 is the whole entry (the protobuf default, the triplet without
    # :batchIndex); any other negative index is invalid (PIP-423).
    if mid.batch_index < -1:
        return (
            f"Invalid batchIndex: {mid.batch_index}, batchSize={batch_size} (entry {mid.position})"
        )
    if mid.batch_index >= 0 and batch_size == 0:
        return f"Invalid batchIndex: {mid.batch_index}, entry {mid.position} is not batched"
    if mid.batch_index >= batch_size > 0:
        return f"Invalid batchIndex: {mid.batch_index}, batchSize={batch_size}"
    return None


def _named(mid: MessageId) -> str:
    """``ledger:entry[:batchIndex]`` for errors, any batch index shown but -1 (whole entry)."""
    text = f"{mid.ledger_id}:{mid.entry_id}"
    return text if mid.batch_index == -1 else f"{text}:{mid.batch_index}"

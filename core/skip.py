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

import base64
import binascii
from collections.abc import Mapping, Sequence
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
from core.message_id import MessageId
from core.position import Position

MAX_ERRORS_LISTED = 10


@dataclass(frozen=True)
class EntryFacts:
    """What skip validation needs to know about the entries of one partition."""

    layout: LedgerLayout
    ledger_ids: np.ndarray
    entry_ids: np.ndarray
    batch_sizes: np.ndarray
    deliver_at: np.ndarray
    """Per entry, -1 when not delayed."""

    def rows_of(self, positions: Sequence[Position]) -> np.ndarray:
        """Row of each position, -1 where there is no such entry (vectorised)."""
        keys = (self.ledger_ids.astype(np.int64) << 32) + self.entry_ids.astype(np.int64)
        wanted = np.fromiter(
            ((p.ledger_id << 32) + p.entry_id for p in positions),
            dtype=np.int64,
            count=len(positions),
        )
        rows = np.searchsorted(keys, wanted)
        rows = np.minimum(rows, max(keys.size - 1, 0))
        found = keys.size > 0
        ok = (keys[rows] == wanted) if found else np.zeros(len(positions), dtype=bool)
        return np.where(ok, rows, -1)


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


@dataclass
class SkipOutcome:
    topic: str
    subscription: str
    skipped: list[MessageId] = field(default_factory=list)
    already_acknowledged: list[MessageId] = field(default_factory=list)
    per_partition: dict[str, int] = field(default_factory=dict)
    """Newly acknowledged ids per topic partition."""

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "skipped": [m.triplet() for m in self.skipped],
            "alreadyAcknowledged": [m.triplet() for m in self.already_acknowledged],
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
      absent batchIndex means the whole entry).
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
            f"Invalid skipByMessageIds payload: unknown field(s) {sorted(unknown)}"
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


def _byte_array_ids(items: list[object]) -> list[MessageId]:
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] must be a base64 string"
            )
        try:
            base64.b64decode(item, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] is not base64: {item!r}"
            ) from exc
        try:
            out.append(MessageId.from_base64(item))
        except InvalidMessageIdError as exc:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}]: {exc}"
            ) from exc
    return out


def _number(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise InvalidSkipPayloadError(f"Invalid skipByMessageIds payload: {what} must be a number")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise InvalidSkipPayloadError(
        f"Invalid skipByMessageIds payload: {what} must be a number, got {value!r}"
    )


def _object_id(item: object, i: int) -> MessageId:
    if not isinstance(item, Mapping):
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] must be an object"
        )
    unknown = set(item) - {"ledgerId", "entryId", "batchIndex"}
    if unknown:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] has unknown field(s) "
            f"{sorted(unknown)}"
        )
    for required in ("ledgerId", "entryId"):
        if required not in item:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] lacks {required}"
            )
    ledger_id = _number(item["ledgerId"], f"messageIds[{i}].ledgerId")
    entry_id = _number(item["entryId"], f"messageIds[{i}].entryId")
    batch = item.get("batchIndex")
    batch_index = -1 if batch is None else _number(batch, f"messageIds[{i}].batchIndex")
    if ledger_id < 0 or entry_id < 0:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] has a negative ledgerId or entryId"
        )
    return MessageId(ledger_id, entry_id, -1, max(batch_index, -1))


def validate(
    ids: Sequence[MessageId],
    partition_of_ledger: Mapping[int, tuple[str, int]],
    facts: Mapping[str, EntryFacts],
    states: Mapping[str, CursorState],
) -> list[SkipItem]:
    """Check every id; return one item per distinct id, or raise naming every bad one.

    ``partition_of_ledger`` maps each ledger of the topic to ``(topic partition
    name, partition index)``; ``facts`` and ``states`` are keyed by topic
    partition name. Nothing is changed here.
    """
    problems: list[str] = []
    first_error: type[Exception] | None = None
    items: list[SkipItem] = []
    seen: set[tuple[int, int, int]] = set()

    def fail(kind: type[Exception], text: str) -> None:
        nonlocal first_error
        first_error = first_error or kind
        problems.append(text)

    by_partition: dict[str, list[MessageId]] = {}
    for mid in ids:
        owner = partition_of_ledger.get(mid.ledger_id)
        if owner is None:
            if mid.ledger_id > max(partition_of_ledger, default=-1):
                fail(
                    PositionOutOfRangeError, f"{mid.triplet()}: beyond the last entry of the topic"
                )
            else:
                fail(
                    EntryNotFoundError, f"{mid.triplet()}: no ledger {mid.ledger_id} in this topic"
                )
            continue
        name, index = owner
        if mid.partition >= 0 and mid.partition != index:
            fail(
                InvalidMessageIdError,
                f"{mid.triplet()}: carries partition {mid.partition}, but ledger "
                f"{mid.ledger_id} belongs to partition {index}",
            )
            continue
        by_partition.setdefault(name, []).append(
            MessageId.of_store(mid.ledger_id, mid.entry_id, index, mid.batch_index, 0)
        )
    for name, mids in by_partition.items():
        fact = facts[name]
        state = states[name]
        rows = fact.rows_of([Position(m.ledger_id, m.entry_id) for m in mids])
        found = np.maximum(rows, 0) if fact.batch_sizes.size else np.zeros(0, dtype=np.int64)
        batch_sizes = fact.batch_sizes[found].tolist()
        deliver_ats = fact.deliver_at[found].tolist()
        last_entry = fact.layout.last_position
        for i, (mid, row) in enumerate(zip(mids, rows.tolist(), strict=True)):
            if row < 0:
                if mid.position > last_entry:
                    fail(
                        PositionOutOfRangeError,
                        f"{mid.triplet()}: beyond the last entry {last_entry}",
                    )
                else:
                    fail(EntryNotFoundError, f"{mid.triplet()}: no such entry")
                continue
            batch_size = batch_sizes[i]
            if mid.batch_index >= 0 and batch_size == 0:
                fail(
                    InvalidBatchIndexError,
                    f"Invalid batchIndex: {mid.batch_index}, entry {mid.position} is not batched",
                )
                continue
            if mid.batch_index >= batch_size > 0:
                fail(
                    InvalidBatchIndexError,
                    f"Invalid batchIndex: {mid.batch_index}, batchSize={batch_size}",
                )
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
    if problems:
        shown = problems[:MAX_ERRORS_LISTED]
        more = len(problems) - len(shown)
        text = "; ".join(shown) + (f"; and {more} more" if more else "")
        raise (first_error or InvalidMessageIdError)(f"Nothing skipped: {text}")
    return items


def group_targets(items: Sequence[SkipItem]) -> dict[str, list[AckTarget]]:
    """The acknowledgements to write, per topic partition (already acknowledged left out)."""
    grouped: dict[str, list[AckTarget]] = {}
    for item in items:
        if not item.already_acknowledged:
            grouped.setdefault(item.topic_partition, []).append(item.target)
    return grouped

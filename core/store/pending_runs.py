"""Pending messages as runs: one stored row per stretch of a ledger, not one per message.

A dispatch of 1,000 messages to one consumer records one run (more only when
it crosses a ledger or spans more than :data:`RUN_SPAN_ENTRIES` entries), so
recording, releasing and re-reading what is pending costs statements per run,
and numpy work per message. A run keeps every member exactly: its entry,
batch index, redelivery count and key hash as arrays in one blob, so the
pending set stays the set of messages it was (acknowledging or releasing some
messages of a run rewrites that run without the others changing).

The span bound lets a lookup by position range find every run that may hold a
position there with a range scan of the primary key: a run holding entry
``e`` of ledger ``l`` starts in ledger ``l`` after ``e - RUN_SPAN_ENTRIES``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]

RUN_SPAN_ENTRIES = 4096
"""A run's last entry is less than this many entries after its first."""

_MAX_INDEX = 2**31 - 1
"""Batch indexes are below this (an Integer column)."""

NO_KEY_HASH = -1
"""The key hash of a member not dispatched on Key_Shared."""

_FIELDS = 4
"""Stored per member: entry, batch index, redelivery count, key hash (one ledger per run)."""

_WIDE = np.dtype("<i8")
"""The first format: the four fields as int64 arrays, 32 bytes per member."""

_FORMAT = 2
_HEADER = struct.Struct(f"<BI{_FIELDS}B{_FIELDS}q")
"""The compact format's header: format, members, each field's width and base."""

_UNSIGNED: dict[int, np.dtype[np.unsignedinteger]] = {
    1: np.dtype("<u1"),
    2: np.dtype("<u2"),
    4: np.dtype("<u4"),
    8: np.dtype("<u8"),
}


def _width(span: int) -> int:
    """Bytes per value of a field whose values lie within ``span`` of its smallest (0: equal)."""
    if span == 0:
        return 0
    return next(width for width in (1, 2, 4) if span < 1 << (8 * width)) if span < 1 << 32 else 8


@dataclass(frozen=True)
class Members:
    """Pending messages as aligned arrays."""

    ledger: Ints
    entry: Ints
    index: Ints
    redelivery: Ints
    key_hash: Ints

    @classmethod
    def empty(cls) -> Members:
        none = np.zeros(0, np.int64)
        return cls(none, none, none, none, none)

    @classmethod
    def concat(cls, parts: Sequence[Members]) -> Members:
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(
            np.concatenate([p.ledger for p in parts]),
            np.concatenate([p.entry for p in parts]),
            np.concatenate([p.index for p in parts]),
            np.concatenate([p.redelivery for p in parts]),
            np.concatenate([p.key_hash for p in parts]),
        )

    def __len__(self) -> int:
        return len(self.entry)

    def take(self, rows: Flags | Ints) -> Members:
        return Members(
            self.ledger[rows],
            self.entry[rows],
            self.index[rows],
            self.redelivery[rows],
            self.key_hash[rows],
        )

    def bumped(self, by: int) -> Members:
        if by == 0:
            return self
        return Members(self.ledger, self.entry, self.index, self.redelivery + by, self.key_hash)

    def in_order(self) -> Members:
        """The members sorted by position (ledger, entry, batch index)."""
        order = np.lexsort((self.index, self.entry, self.ledger))
        if np.all(order[1:] > order[:-1]):
            return self
        return self.take(order)

    def among(self, other: Members) -> Flags:
        """True for each member whose position is also one of ``other``'s.

        ``self`` is one run's members: one ledger, sorted, fewer than
        RUN_SPAN_ENTRIES entries from the first. In that domain ``(entry
        offset, batch index + 1)`` packs into one int64 without collision (the
        offset below 2**12, the index + 1 in [0, 2**31]); positions of
        ``other`` outside it match nothing.
        """
        found = np.zeros(len(self), np.bool_)
        if not len(self) or not len(other):
            return found
        ledger, first = int(self.ledger[0]), int(self.entry[0])
        offset = other.entry - first
        inside = (
            (other.ledger == ledger)
            & (offset >= 0)
            & (offset < RUN_SPAN_ENTRIES)
            & (other.index >= -1)
            & (other.index < _MAX_INDEX)
        )
        if not inside.any():
            return found
        wanted = np.sort((offset[inside] << 32) | (other.index[inside] + 1))
        mine = ((self.entry - first) << 32) | (self.index + 1)
        at = np.minimum(np.searchsorted(wanted, mine), len(wanted) - 1)
        return np.asarray(wanted[at] == mine, dtype=np.bool_)


@dataclass(frozen=True)
class HeldRun:
    """One stored run of a subscription's pending messages and who holds it."""

    topic_partition: str
    members: Members
    holder: str | None
    """The name of the consumer it was delivered to; None: released, due for redelivery."""
    lease_expires_ms: int | None
    """When the holder's lease lapses (the next dispatch then releases the run)."""


def encode(members: Members) -> bytes:
    """A run's members as stored (its ledger is stored once, beside them).

    Each field as offsets from its smallest value, in as few bytes as they
    need (none when all are equal): a dispatch's run of 1,000 batched
    messages takes about 4 KB, not the 32 KB of int64 columns, which is what
    each dispatch's commit writes. The length is never a multiple of 32,
    which tells the format from the first one (still read).
    """
    fields = (members.entry, members.index, members.redelivery, members.key_hash)
    widths: list[int] = []
    bases: list[int] = []
    body: list[bytes] = []
    for values in fields:
        low = int(values.min()) if len(values) else 0
        width = _width(int(values.max()) - low) if len(values) else 0
        widths.append(width)
        bases.append(low)
        if width:
            offsets = values.astype(np.uint64) - np.uint64(low % (1 << 64))
            body.append(offsets.astype(_UNSIGNED[width]).tobytes())
    blob = _HEADER.pack(_FORMAT, len(members), *widths, *bases) + b"".join(body)
    return blob + b"\0" if len(blob) % (_FIELDS * _WIDE.itemsize) == 0 else blob


def decode(ledger: int, blob: bytes | memoryview, bumps: int = 0) -> Members:
    """The members :func:`encode` stored, with ``bumps`` added to their redelivery counts."""
    if len(blob) % (_FIELDS * _WIDE.itemsize) == 0:
        table = np.frombuffer(blob, dtype=_WIDE).reshape(_FIELDS, -1).astype(np.int64)
        fields = [table[0], table[1], table[2], table[3]]
    else:
        _, count, *layout = _HEADER.unpack_from(blob)
        widths, bases = layout[:_FIELDS], layout[_FIELDS:]
        at = _HEADER.size
        fields = []
        for width, base in zip(widths, bases, strict=True):
            if not width:
                fields.append(np.full(count, base, np.int64))
                continue
            offsets = np.frombuffer(blob, dtype=_UNSIGNED[width], count=count, offset=at)
            # Unsigned arithmetic wraps like the encoder's: base + offset is the value.
            fields.append((offsets.astype(np.uint64) + np.uint64(base % (1 << 64))).view(np.int64))
            at += width * count
    entry, index, redelivery, key_hash = fields
    count = len(entry)
    return Members(np.full(count, ledger, np.int64), entry, index, redelivery + bumps, key_hash)


@dataclass(frozen=True)
class Run:
    """Members of one ledger, in position order, spanning fewer than RUN_SPAN_ENTRIES entries."""

    ledger_id: int
    members: Members

    @property
    def first(self) -> tuple[int, int]:
        return int(self.members.entry[0]), int(self.members.index[0])

    @property
    def last(self) -> tuple[int, int]:
        return int(self.members.entry[-1]), int(self.members.index[-1])


def runs_of(members: Members) -> list[Run]:
    """``members`` cut into runs: at each new ledger and before the span would exceed its bound."""
    ordered = members.in_order()
    count = len(ordered)
    runs: list[Run] = []
    ledger_starts = np.flatnonzero(np.diff(ordered.ledger) != 0) + 1
    bounds = [0, *ledger_starts.tolist(), count]
    for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
        entries = ordered.entry[begin:end]
        at = 0
        while at < end - begin:
            stop = int(np.searchsorted(entries, entries[at] + RUN_SPAN_ENTRIES, side="left"))
            rows = np.arange(begin + at, begin + stop)
            runs.append(Run(int(ordered.ledger[begin]), ordered.take(rows)))
            at = stop
    return runs


__all__ = [
    "NO_KEY_HASH",
    "RUN_SPAN_ENTRIES",
    "Members",
    "Run",
    "decode",
    "encode",
    "runs_of",
]

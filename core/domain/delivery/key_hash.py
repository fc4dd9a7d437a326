"""Key_Shared's sticky-key hashes and consistent-hashing consumer selection.

Pulsar 4's default selector (``ConsistentHashingStickyKeyConsumerSelector``):
a message's key hashes with Murmur3 (32 bit) into the hash space
``0..65535``; every consumer puts :data:`POINTS_PER_CONSUMER` points on a ring
over the same space, and a hash belongs to the consumer whose point is the
first at or after it (wrapping around). The ranges split automatically as
consumers join and leave, and the assignment is a pure function of the set of
live consumers, so every process computes the same one without storing it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from cursorops.core.domain.errors import InvalidArgumentError

HASH_RANGE_SIZE = 65_536
"""Pulsar's sticky-key hash space: ``0..65535``."""

POINTS_PER_CONSUMER = 100
"""Pulsar's ``subscriptionKeySharedConsistentHashingReplicaPoints`` default."""

NONE_KEY = b"NONE_KEY"
"""What Pulsar hashes for a message without a key."""

_M32 = 0xFFFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit, unsigned."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _M32
    length = len(data)
    full = length - length % 4
    for i in range(0, full, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * c2) & _M32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    tail = data[full:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * c2) & _M32
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


def sticky_key_hash(key: str | bytes | None) -> int:
    """The key's hash in ``0..65535`` (a missing key hashes as Pulsar's ``NONE_KEY``); an
    ordering key is bytes, a message key text (hashed as its UTF-8 bytes)."""
    if key is None:
        data = NONE_KEY
    elif isinstance(key, bytes):
        data = key
    else:
        data = key.encode("utf-8", "surrogatepass")
    return (murmur3_32(data) & 0x7FFFFFFF) % HASH_RANGE_SIZE


HashRanges = tuple[tuple[int, int], ...]
"""A sticky consumer's hash ranges: ``(start, end)``, both inclusive, ascending."""


def sticky_ranges(ranges: Sequence[tuple[int, int]]) -> HashRanges:
    """Validated sticky hash ranges (Pulsar's Key_Shared ``STICKY`` mode), sorted: each
    within ``0..65535``, start at most end, none overlapping another."""
    if not ranges:
        raise InvalidArgumentError("Sticky Key_Shared needs at least one hash range")
    ordered = tuple(sorted((int(start), int(end)) for start, end in ranges))
    for start, end in ordered:
        if not 0 <= start <= end < HASH_RANGE_SIZE:
            raise InvalidArgumentError(
                f"Invalid sticky hash range [{start}, {end}]: within 0..{HASH_RANGE_SIZE - 1}"
            )
    for (_, end), (start, _) in zip(ordered, ordered[1:], strict=False):
        if start <= end:
            raise InvalidArgumentError(f"Sticky hash ranges overlap at {start}")
    return ordered


def in_ranges(key_hash: int, ranges: HashRanges) -> bool:
    """Whether a sticky consumer owns ``key_hash``."""
    return any(start <= key_hash <= end for start, end in ranges)


def overlap(a: HashRanges, b: HashRanges) -> tuple[int, int] | None:
    """The first range of ``a`` that overlaps one of ``b``; None when they are disjoint."""
    for start, end in a:
        for other_start, other_end in b:
            if start <= other_end and other_start <= end:
                return start, end
    return None


class HashRing:
    """The consistent-hashing ring of a set of consumers, identified by stable ids."""

    def __init__(self, consumer_ids: Sequence[str]) -> None:
        points: dict[int, str] = {}
        for consumer_id in sorted(consumer_ids):
            for replica in range(POINTS_PER_CONSUMER):
                point = sticky_key_hash(f"{consumer_id}{replica}")
                # On a collision the smaller id keeps the point, as every process must agree.
                points.setdefault(point, consumer_id)
        self._points = sorted(points)
        self._owners = [points[p] for p in self._points]

    def select(self, key_hash: int) -> str | None:
        """The consumer owning ``key_hash``; None when the ring is empty."""
        if not self._points:
            return None
        index = bisect.bisect_left(self._points, key_hash)
        return self._owners[index % len(self._owners)]

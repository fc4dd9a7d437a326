"""Batch-index ack sets: which messages of one batched entry are still unacknowledged.

An entry written by a batching producer holds ``batch_size`` messages, named by
their batch index ``0 .. batch_size - 1``. Its ack set (Pulsar's
``batch_deleted_indexes``) is a bitset with Pulsar's polarity:

- a **set** bit ``i`` means message ``i`` is **still unacknowledged**;
- acknowledging index ``i`` clears bit ``i``;
- merging two ack sets of one entry is a bitwise AND (an index is acknowledged
  once either side acknowledged it), so merge order does not matter;
- an empty set (``0``) means every message of the entry is acknowledged: the
  entry as a whole moves into the individually deleted positions.

Here an ack set is a plain non-negative Python ``int`` (bit ``i`` = index ``i``),
unbounded, immutable, and cheap to AND. On the wire and on disk it is a
``long[]`` exactly as ``java.util.BitSet.toLongArray()`` writes it:
:func:`to_words` and :func:`from_words` convert.

An ack set does not know its batch size: acknowledging an index beyond the
batch is a no-op here, and checking ``0 <= index < batch_size`` is the caller's
job (it raises :class:`~cursorops.core.domain.errors.InvalidBatchIndexError` with Pulsar's
message). Every function is pure and returns a new value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from cursorops.core.domain.errors import InvalidArgumentError, InvalidBatchIndexError

__all__ = [
    "ack",
    "ack_many",
    "first_unacked",
    "from_words",
    "full",
    "is_acked",
    "merge",
    "to_words",
    "unacked_count",
    "unacked_indexes",
]

_WORD_MIN = -(1 << 63)
_WORD_LIMIT = 1 << 64
_WORD_MASK = _WORD_LIMIT - 1

# For each byte value, the positions of its set bits: lets unacked_indexes walk
# the set a byte at a time instead of a bit at a time.
_BYTE_BITS: tuple[tuple[int, ...], ...] = tuple(
    tuple(bit for bit in range(8) if value >> bit & 1) for value in range(256)
)


def _check_bits(bits: int) -> None:
    if bits < 0:
        raise InvalidArgumentError(f"an ack set is a non-negative int, got {bits}")


def _check_index(index: int) -> None:
    if index < 0:
        raise InvalidBatchIndexError(f"Invalid batchIndex: {index}")


def full(batch_size: int) -> int:
    """The ack set of a batch of ``batch_size`` messages, none acknowledged.

    Bits ``0 .. batch_size - 1`` are set. ``batch_size`` must be >= 1, else
    :class:`~cursorops.core.domain.errors.InvalidArgumentError`. Cost: O(batch_size / 64).
    """
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")
    return (1 << batch_size) - 1


def ack(bits: int, index: int) -> int:
    """``bits`` with batch index ``index`` acknowledged (its bit cleared).

    Idempotent: acknowledging an index that is already acknowledged, or that
    lies beyond the batch, returns ``bits`` unchanged. A negative index raises
    :class:`~cursorops.core.domain.errors.InvalidBatchIndexError`. Cost: O(len(bits) / 64).
    """
    _check_bits(bits)
    _check_index(index)
    if index >= bits.bit_length():
        return bits
    return bits & ~(1 << index)


def ack_many(bits: int, indexes: Iterable[int]) -> int:
    """``bits`` with every batch index in ``indexes`` acknowledged.

    Same rules as :func:`ack`; all indexes are checked before anything is
    computed, so a negative one raises
    :class:`~cursorops.core.domain.errors.InvalidBatchIndexError` and nothing else happens.
    Cost: O(len(indexes) + len(bits) / 8), one mask built in a byte buffer.
    """
    _check_bits(bits)
    wanted = list(indexes)
    if not wanted:
        return bits
    lowest = min(wanted)
    _check_index(lowest)
    width = bits.bit_length()
    mask = bytearray((width + 7) // 8)
    for index in wanted:
        if index < width:
            mask[index >> 3] |= 1 << (index & 7)
    return bits & ~int.from_bytes(mask, "little")


def is_acked(bits: int, index: int) -> bool:
    """Whether batch index ``index`` is acknowledged (its bit is clear).

    An index beyond the batch reads as acknowledged, since its bit is clear.
    A negative index raises :class:`~cursorops.core.domain.errors.InvalidBatchIndexError`.
    Cost: O(len(bits) / 64).
    """
    _check_bits(bits)
    _check_index(index)
    return not (bits >> index) & 1


def merge(a: int, b: int) -> int:
    """The merge of two ack sets of one entry: ``a & b``.

    An index stays unacknowledged only if both sides have it unacknowledged.
    Commutative, associative, idempotent. Cost: O(min(len(a), len(b)) / 64).
    """
    _check_bits(a)
    _check_bits(b)
    return a & b


def unacked_count(bits: int) -> int:
    """Number of still-unacknowledged indexes (the popcount). Cost: O(len(bits) / 64)."""
    _check_bits(bits)
    return bits.bit_count()


def unacked_indexes(bits: int) -> list[int]:
    """The still-unacknowledged batch indexes, ascending.

    Cost: O(len(bits) / 8 + result), walking the bytes, skipping zero bytes.
    """
    _check_bits(bits)
    found: list[int] = []
    data = bits.to_bytes((bits.bit_length() + 7) // 8, "little")
    for byte_no, value in enumerate(data):
        if value:
            base = byte_no << 3
            found.extend(base + bit for bit in _BYTE_BITS[value])
    return found


def first_unacked(bits: int) -> int:
    """The lowest still-unacknowledged batch index, or -1 when every index is
    acknowledged. Cost: O(len(bits) / 64)."""
    _check_bits(bits)
    return (bits & -bits).bit_length() - 1


def to_words(bits: int) -> list[int]:
    """The ack set as ``java.util.BitSet.toLongArray()`` writes it.

    Index ``i`` is bit ``i % 64`` of word ``i // 64``; words are signed 64-bit
    (bit 63 set reads negative); trailing zero words are dropped, so ``0``
    gives ``[]``. This is the ``long[]`` of Pulsar's ``ack_set`` field and of
    the persisted ``batch_deleted_indexes``. Cost: O(len(bits) / 64).
    """
    _check_bits(bits)
    count = (bits.bit_length() + 63) // 64
    return list(struct.unpack(f"<{count}q", bits.to_bytes(count * 8, "little")))


def from_words(words: Sequence[int]) -> int:
    """The ack set of a ``long[]`` in ``BitSet.toLongArray()`` layout.

    The inverse of :func:`to_words`. Words may be signed or unsigned 64-bit
    (``-1`` and ``2**64 - 1`` are the same word); trailing zero words are
    allowed. A word outside ``[-2**63, 2**64)`` or not an int raises
    :class:`~cursorops.core.domain.errors.InvalidArgumentError`. Cost: O(len(words)).
    """
    if not words:
        return 0
    try:
        if min(words) < _WORD_MIN or max(words) >= _WORD_LIMIT:
            raise InvalidArgumentError(
                f"ack set words must be 64-bit, within [-2**63, 2**64): {list(words)[:8]}"
            )
        data = struct.pack(f"<{len(words)}Q", *(word & _WORD_MASK for word in words))
    except (TypeError, struct.error) as exc:
        raise InvalidArgumentError(f"ack set words must be ints: {exc}") from exc
    return int.from_bytes(data, "little")

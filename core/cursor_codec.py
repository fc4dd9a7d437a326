"""Binary encoding of cursor state, for snapshots and for journal deltas.

One format serves both, because a delta *is* a small cursor state::

    magic  b"CUR1"
    flags  u8            bit 0: REPLACE (a reset: this record replaces the state)
    mark-delete          i64 ledger, i64 entry
    individually deleted u32 length + RangeSet.serialize()
    batch ack sets       u32 count, then per entry: i64 ledger, i64 entry,
                         u32 words, words as i64 (java.util.BitSet.toLongArray())

All integers little-endian. The ack-set words are Pulsar's on-disk ``long[]``
form, so a set bit is an index still unacknowledged.
"""

from __future__ import annotations

import struct
from array import array

from core import ack_set
from core.cursor import BatchAckSets, CursorState
from core.errors import InvalidArgumentError, MetadataStoreError
from core.position import Position
from core.range_set import RangeSet

_MAGIC = b"CUR1"
_HEADER = struct.Struct("<4sBqqI")
_U32 = struct.Struct("<I")
_BATCH_HEAD = struct.Struct("<qqI")
_REPLACE = 1


def encode(state: CursorState, *, replace: bool = False) -> bytes:
    deleted = state.individually_deleted.serialize()
    parts = [
        _HEADER.pack(
            _MAGIC,
            _REPLACE if replace else 0,
            state.mark_delete.ledger_id,
            state.mark_delete.entry_id,
            len(deleted),
        ),
        deleted,
        _U32.pack(len(state.batch_acks)),
    ]
    for position, bits in sorted(state.batch_acks.items()):
        words = ack_set.to_words(bits)
        parts.append(_BATCH_HEAD.pack(position.ledger_id, position.entry_id, len(words)))
        parts.append(array("q", words).tobytes())
    return b"".join(parts)


def decode(data: bytes) -> tuple[CursorState, bool]:
    """Return ``(state, replace)``. Corrupt data raises MetadataStoreError."""
    try:
        magic, flags, ledger_id, entry_id, deleted_len = _HEADER.unpack_from(data, 0)
        if magic != _MAGIC:
            raise ValueError(f"bad magic {magic!r}")
        offset = _HEADER.size
        deleted = RangeSet.deserialize(data[offset : offset + deleted_len])
        offset += deleted_len
        (count,) = _U32.unpack_from(data, offset)
        offset += _U32.size
        batch_acks = BatchAckSets()
        for _ in range(count):
            b_ledger, b_entry, n_words = _BATCH_HEAD.unpack_from(data, offset)
            offset += _BATCH_HEAD.size
            words = array("q")
            words.frombytes(data[offset : offset + 8 * n_words])
            if len(words) != n_words:
                raise ValueError("truncated ack set")
            offset += 8 * n_words
            batch_acks[Position(b_ledger, b_entry)] = ack_set.from_words(words)
        if offset != len(data):
            raise ValueError(f"{len(data) - offset} trailing bytes")
    except (struct.error, ValueError, InvalidArgumentError) as exc:
        raise MetadataStoreError(f"Corrupt cursor record: {exc}") from exc
    state = CursorState(Position(ledger_id, entry_id), deleted, batch_acks)
    return state, bool(flags & _REPLACE)

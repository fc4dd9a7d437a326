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

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.acks.cursor import AckColumns, BatchAckSets, CursorState
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.errors import InvalidArgumentError, MetadataStoreError
from cursorops.core.domain.ids.position import EARLIEST, Position

_MAGIC = b"CUR1"
_HEADER = struct.Struct("<4sBqqI")
_U32 = struct.Struct("<I")
_BATCH_HEAD = struct.Struct("<qqI")
_BATCH_HEAD_ARRAY = np.dtype([("ledger", "<i8"), ("entry", "<i8"), ("words", "<u4")])
"""``_BATCH_HEAD`` as a packed numpy record (20 bytes, no padding)."""
_REPLACE = 1


_FEW = 64
"""Batch ack sets up to which a Python step per record costs less than numpy's set-up."""


def encode(state: CursorState, *, replace: bool = False) -> bytes:
    positions = sorted(state.batch_acks)
    sets = [state.batch_acks[position] for position in positions]
    counts = [(bits.bit_length() + 63) // 64 for bits in sets]
    if len(positions) <= _FEW:
        # A consumer's delta holds a few: the same records, packed one by one.
        records = b"".join(
            _BATCH_HEAD.pack(p.ledger_id, p.entry_id, n) + bits.to_bytes(8 * n, "little")
            for p, bits, n in zip(positions, sets, counts, strict=True)
        )
    else:
        records = _batch_records(
            np.fromiter((p.ledger_id for p in positions), np.int64, len(positions)),
            np.fromiter((p.entry_id for p in positions), np.int64, len(positions)),
            np.array(counts, dtype=np.int64),
            # What ack_set.to_words gives, one buffer for all the sets.
            b"".join(bits.to_bytes(8 * n, "little") for bits, n in zip(sets, counts, strict=True)),
        )
    return _encode(state.mark_delete, state.individually_deleted, len(positions), records, replace)


def encode_columns(delta: AckColumns, *, replace: bool = False) -> bytes:
    """The bytes :func:`encode` writes for ``delta.to_state()``, written from the arrays."""
    records = _batch_records(
        delta.batch_ledger_ids,
        delta.batch_entry_ids,
        np.diff(delta.word_starts),
        delta.words.astype("<u8").tobytes(),
    )
    return _encode(EARLIEST, delta.entries, delta.batch_ledger_ids.size, records, replace)


def _encode(
    mark_delete: Position, deleted: RangeSet, batches: int, records: bytes, replace: bool
) -> bytes:
    """The record: header, individually deleted set, then ``batches`` batch ack set
    records (ascending by position) already laid end to end in ``records``."""
    serialized = deleted.serialize()
    header = _HEADER.pack(
        _MAGIC,
        _REPLACE if replace else 0,
        mark_delete.ledger_id,
        mark_delete.entry_id,
        len(serialized),
    )
    return b"".join((header, serialized, _U32.pack(batches), records))


def _batch_records(
    ledgers: npt.NDArray[np.int64],
    entries: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    words: bytes,
) -> bytes:
    """Each batch's ``i64 ledger, i64 entry, u32 words`` and its words, laid end to end.

    Every field is a whole number of 32-bit units, so the records are placed
    into one uint32 array with two scatters: no Python step per record.
    """
    head = np.empty(ledgers.size, dtype=_BATCH_HEAD_ARRAY)
    head["ledger"] = ledgers
    head["entry"] = entries
    head["words"] = counts
    units = 5 + 2 * counts
    record_starts = np.zeros(ledgers.size, dtype=np.int64)
    np.cumsum(units[:-1], out=record_starts[1:])
    out = np.empty(int(units.sum()), dtype="<u4")
    out[(record_starts[:, None] + np.arange(5)).ravel()] = head.view("<u4")
    word_units = np.frombuffer(words, dtype="<u4")
    # A word unit lands after its own record's head and every earlier record's: 5 per head.
    heads_before = 5 * np.repeat(np.arange(1, ledgers.size + 1, dtype=np.int64), 2 * counts)
    out[np.arange(word_units.size, dtype=np.int64) + heads_before] = word_units
    return out.tobytes()


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

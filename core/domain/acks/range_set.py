"""``RangeSet``: the individually deleted positions of a cursor.

Pulsar keeps the positions acknowledged after the mark-delete position as a
range set of open-closed ranges ``(prev, last]``, stored as one roaring bitmap
per ledger (``OpenLongPairRangeSet``/``ConcurrentRoaringBitSet``). This class
does the same: ``dict[ledger_id, pyroaring.BitMap]``, one compressed bitmap of
entry ids per ledger, plus the ledger ids kept sorted.

Limits: ``ledger_id`` is a non-negative int64; ``entry_id`` is in
``[0, 2**32)``. A ledger holds at most ``Config.max_entries_per_ledger``
entries (50,000 by default), far below ``2**32``, so the 32-bit
``pyroaring.BitMap`` fits; it is faster and serializes smaller than
``BitMap64``. Adding an entry id outside the range raises
:class:`~cursorops.core.domain.errors.InvalidArgumentError`; queries with such ids simply find
nothing.

A ledger whose bitmap becomes empty is dropped, so ``ledgers()`` lists only
ledgers holding at least one position. Everything here is in memory; durable
state is :meth:`RangeSet.serialize`, stored by the cursor codec.
"""

from __future__ import annotations

import array
import bisect
import struct
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt
from pyroaring import AbstractBitMap, BitMap

from cursorops.core.domain.errors import InvalidArgumentError

__all__ = ["ENTRY_ID_LIMIT", "RangeSet"]

ENTRY_ID_LIMIT = 1 << 32
"""Entry ids stored in a :class:`RangeSet` are ``< ENTRY_ID_LIMIT``."""

_LEDGER_ID_LIMIT = 1 << 63
_REPR_MAX_RANGES = 20

_COUNT = struct.Struct("<I")
# The array typecode of an unsigned 32-bit int, the item pyroaring builds a bitmap from.
_UINT32 = next(code for code in "IL" if array.array(code).itemsize == 4)
_LEDGER_HEADER = struct.Struct("<qI")


def _check_ledger(ledger_id: int) -> None:
    if not 0 <= ledger_id < _LEDGER_ID_LIMIT:
        raise InvalidArgumentError(f"ledger_id must be in [0, 2**63), got {ledger_id}")


def _check_entry(entry_id: int) -> None:
    if not 0 <= entry_id < ENTRY_ID_LIMIT:
        raise InvalidArgumentError(f"entry_id must be in [0, 2**32), got {entry_id}")


def _run_end(bits: AbstractBitMap, entry_id: int) -> int:
    """Last entry of the run of consecutive members that starts at member ``entry_id``.

    Galloping then bisection on ``contains_range``: O(log(run length)) probes,
    each touching only the containers of the span it checks.
    """
    low = entry_id  # [entry_id, low] is all in the bitmap
    high = ENTRY_ID_LIMIT  # [entry_id, high] is not (2**32 is never a member)
    step = 1
    while low + step < high:
        probe = low + step
        if not bits.contains_range(low + 1, probe + 1):
            high = probe
            break
        low = probe
        step <<= 1
    while high - low > 1:
        middle = (low + high) // 2
        if bits.contains_range(low + 1, middle + 1):
            low = middle
        else:
            high = middle
    return low


def _runs(bits: AbstractBitMap) -> tuple[AbstractBitMap, AbstractBitMap]:
    """The first and the last entries of the maximal runs of ``bits``.

    ``x`` starts a run when ``x - 1`` is absent, ends one when ``x + 1`` is
    absent: two shifted differences, computed in C, O(containers).
    """
    starts = bits.difference(bits.shift(1))
    ends = bits.difference(bits.shift(-1))
    return starts, ends


class RangeSet:
    """A set of positions ``(ledger_id, entry_id)``, one roaring bitmap per ledger.

    Ordering is Pulsar's: lexicographic on ``(ledger_id, entry_id)``. Runs of
    consecutive entries never join across ledgers. Not thread-safe; mutable,
    so unhashable. Costs below use ``L`` for the number of ledgers and ``n``
    for the number of positions; roaring operations are O(containers touched),
    one container per 65,536 entry ids.
    """

    __slots__ = ("_bitmaps", "_ledgers")

    def __init__(self) -> None:
        """An empty set."""
        self._bitmaps: dict[int, BitMap] = {}
        self._ledgers: list[int] = []

    def _writable(self, ledger_id: int) -> BitMap:
        bits = self._bitmaps.get(ledger_id)
        if bits is None:
            bits = self._bitmaps[ledger_id] = BitMap()
            bisect.insort(self._ledgers, ledger_id)
        return bits

    def _drop_ledger(self, ledger_id: int) -> None:
        del self._bitmaps[ledger_id]
        del self._ledgers[bisect.bisect_left(self._ledgers, ledger_id)]

    def add(self, ledger_id: int, entry_id: int) -> None:
        """Add one position. Idempotent. O(log containers); O(L) if the ledger is new."""
        _check_ledger(ledger_id)
        _check_entry(entry_id)
        self._writable(ledger_id).add(entry_id)

    def add_many(self, ledger_id: int, entry_ids: Iterable[int] | AbstractBitMap) -> None:
        """Add many entries of one ledger.

        All ids are checked before any is added: one out of ``[0, 2**32)``
        raises :class:`~cursorops.core.domain.errors.InvalidArgumentError` and changes nothing.
        A roaring bitmap is unioned in place, O(containers); any other iterable
        is first built into a bitmap in C, O(len(entry_ids)). An empty input
        changes nothing.
        """
        _check_ledger(ledger_id)
        if isinstance(entry_ids, AbstractBitMap):
            incoming: AbstractBitMap = entry_ids
        else:
            try:
                incoming = BitMap(entry_ids)
            except (OverflowError, ValueError) as exc:
                raise InvalidArgumentError(
                    f"entry ids must be in [0, 2**32) for ledger {ledger_id}: {exc}"
                ) from exc
        if incoming:
            self._writable(ledger_id).update(incoming)

    def add_positions(self, ledger_ids: npt.ArrayLike, entry_ids: npt.ArrayLike) -> None:
        """Add each position ``(ledger_ids[i], entry_ids[i])`` (int64 arrays), as :meth:`add`.

        Every position is checked first: the first one with a ledger id below 0
        or an entry id outside ``[0, 2**32)`` raises
        :class:`~cursorops.core.domain.errors.InvalidArgumentError` (:meth:`add`'s message) and
        nothing is added. Per ledger, its entry ids become one roaring bitmap
        built in C from a buffer: O(n log n) for n positions plus O(containers),
        no Python step per position.
        """
        ledgers = np.asarray(ledger_ids, dtype=np.int64)
        entries = np.asarray(entry_ids, dtype=np.int64)
        bad = np.flatnonzero((ledgers < 0) | (entries < 0) | (entries >= ENTRY_ID_LIMIT))
        if bad.size:
            first = int(bad[0])
            _check_ledger(int(ledgers[first]))
            _check_entry(int(entries[first]))
        if ledgers.size == 0:
            return
        order = np.argsort(ledgers, kind="stable")
        sorted_ledgers = ledgers[order]
        starts = np.flatnonzero(np.diff(sorted_ledgers, prepend=sorted_ledgers[0] - 1))
        stops = [*starts[1:].tolist(), order.size]
        for start, stop in zip(starts.tolist(), stops, strict=True):
            wanted = np.ascontiguousarray(entries[order[start:stop]], dtype=np.uint32)
            self._writable(int(sorted_ledgers[start])).update(
                BitMap(array.array(_UINT32, wanted.tobytes()))
            )

    def remove_positions(self, ledger_ids: npt.ArrayLike, entry_ids: npt.ArrayLike) -> None:
        """Remove each position ``(ledger_ids[i], entry_ids[i])`` that is in the set.

        Positions not in the set (any int64 values) are ignored. Per ledger, its
        entry ids become one roaring bitmap built in C and are subtracted in
        place: O(n log n) for n positions plus O(containers), no Python step per
        position. A ledger left empty is dropped.
        """
        ledgers = np.asarray(ledger_ids, dtype=np.int64)
        entries = np.asarray(entry_ids, dtype=np.int64)
        if not self._ledgers or ledgers.size == 0:
            return
        asked = np.flatnonzero(
            (entries >= 0)
            & (entries < ENTRY_ID_LIMIT)
            & np.isin(ledgers, np.asarray(self._ledgers, dtype=np.int64))
        )
        if asked.size == 0:
            return
        order = asked[np.argsort(ledgers[asked], kind="stable")]
        sorted_ledgers = ledgers[order]
        starts = np.flatnonzero(np.diff(sorted_ledgers, prepend=sorted_ledgers[0] - 1))
        stops = [*starts[1:].tolist(), order.size]
        for start, stop in zip(starts.tolist(), stops, strict=True):
            ledger_id = int(sorted_ledgers[start])
            wanted = np.ascontiguousarray(entries[order[start:stop]], dtype=np.uint32)
            bits = self._bitmaps[ledger_id]
            bits.difference_update(BitMap(array.array(_UINT32, wanted.tobytes())))
            if not bits:
                self._drop_ledger(ledger_id)

    def add_range(self, ledger_id: int, first: int, last: int) -> None:
        """Add entries ``first`` to ``last`` of one ledger, **both inclusive**.

        ``first > last`` raises :class:`~cursorops.core.domain.errors.InvalidArgumentError`.
        O(containers spanned), independent of the number of entries.
        """
        _check_ledger(ledger_id)
        _check_entry(first)
        _check_entry(last)
        if first > last:
            raise InvalidArgumentError(f"empty range: first {first} > last {last}")
        self._writable(ledger_id).add_range(first, last + 1)

    def contains(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the position is in the set. O(log containers)."""
        bits = self._bitmaps.get(ledger_id)
        return bits is not None and 0 <= entry_id < ENTRY_ID_LIMIT and entry_id in bits

    def contains_many(
        self, ledger_ids: npt.ArrayLike, entry_ids: npt.ArrayLike
    ) -> npt.NDArray[np.bool_]:
        """:meth:`contains` of each position ``(ledger_ids[i], entry_ids[i])``, as a bool array.

        Same answers as calling :meth:`contains` per position (any int64 values;
        an entry id outside ``[0, 2**32)`` or an unknown ledger finds nothing),
        without a Python call per position: per ledger asked about, the asked
        entry ids become one roaring bitmap (built in C from a buffer), it is
        intersected with the ledger's bitmap, and the hits are found back with a
        sorted search. O(n log n) for n positions plus O(containers touched).
        """
        ledgers = np.asarray(ledger_ids, dtype=np.int64)
        entries = np.asarray(entry_ids, dtype=np.int64)
        found = np.zeros(ledgers.shape, dtype=np.bool_)
        if not self._ledgers or ledgers.size == 0:
            return found
        known = np.asarray(self._ledgers, dtype=np.int64)
        asked = np.flatnonzero(
            (entries >= 0) & (entries < ENTRY_ID_LIMIT) & np.isin(ledgers, known)
        )
        if asked.size == 0:
            return found
        order = asked[np.argsort(ledgers[asked], kind="stable")]
        sorted_ledgers = ledgers[order]
        starts = np.flatnonzero(np.diff(sorted_ledgers, prepend=sorted_ledgers[0] - 1))
        for start, stop in zip(starts.tolist(), [*starts[1:].tolist(), order.size], strict=True):
            where = order[start:stop]
            wanted = np.ascontiguousarray(entries[where], dtype=np.uint32)
            query = BitMap(array.array(_UINT32, wanted.tobytes()))
            held = self._bitmaps[int(sorted_ledgers[start])].intersection(query)
            if held:
                hits = np.frombuffer(held.to_array(), dtype=np.uint32)
                found[where] = np.isin(wanted, hits)
        return found

    def __contains__(self, pos: object) -> bool:
        """``(ledger_id, entry_id) in range_set``; also takes a ``Position``."""
        if not isinstance(pos, tuple) or len(pos) != 2:
            return False
        ledger_id, entry_id = pos
        return self.contains(ledger_id, entry_id)

    def remove_through(self, ledger_id: int, entry_id: int) -> None:
        """Drop every position ``<= (ledger_id, entry_id)``, **inclusive**.

        That is every earlier ledger entirely and the entries ``<= entry_id`` of
        ``ledger_id``: what moving the mark-delete position to
        ``(ledger_id, entry_id)`` makes redundant. Any ints are accepted:
        ``(L, -1)`` drops only the ledgers before ``L``, an entry id beyond
        ``2**32`` drops ledger ``L`` whole. O(dropped ledgers + containers
        removed + L).
        """
        cut = bisect.bisect_left(self._ledgers, ledger_id)
        for dropped in self._ledgers[:cut]:
            del self._bitmaps[dropped]
        del self._ledgers[:cut]
        bits = self._bitmaps.get(ledger_id)
        if bits is None or entry_id < 0:
            return
        bits.remove_range(0, min(entry_id + 1, ENTRY_ID_LIMIT))
        if not bits:
            self._drop_ledger(ledger_id)

    def run_end(self, ledger_id: int, entry_id: int) -> int | None:
        """End of the run of set entries that starts at ``(ledger_id, entry_id)``.

        If the position is in the set, returns the last entry id ``e`` (inclusive)
        such that every entry of ``[entry_id, e]`` of that ledger is in the set;
        runs stop at the end of the ledger. ``None`` if the position is not in
        the set. O(log(run length)) range probes, no per-entry loop.
        """
        if not self.contains(ledger_id, entry_id):
            return None
        return _run_end(self._bitmaps[ledger_id], entry_id)

    def first(self) -> tuple[int, int] | None:
        """The smallest position, or ``None`` when the set is empty. O(1)."""
        if not self._ledgers:
            return None
        ledger_id = self._ledgers[0]
        return ledger_id, self._bitmaps[ledger_id].min()

    def ledgers(self) -> list[int]:
        """The ledger ids holding at least one position, ascending (a copy). O(L)."""
        return list(self._ledgers)

    def bitmap(self, ledger_id: int) -> BitMap:
        """The ledger's bitmap of entry ids; an empty ``BitMap`` if it has none.

        This is the live internal bitmap, returned without a copy so scans stay
        cheap: **do not mutate it**. O(1).
        """
        bits = self._bitmaps.get(ledger_id)
        return bits if bits is not None else BitMap()

    def count(self, ledger_id: int, first: int, last: int) -> int:
        """Number of set entries of the ledger in ``[first, last]``, **both inclusive**.

        An empty interval (``first > last``) counts 0; bounds outside
        ``[0, 2**32)`` are clamped. O(containers spanned).
        """
        bits = self._bitmaps.get(ledger_id)
        start = max(first, 0)
        stop = min(last + 1, ENTRY_ID_LIMIT)
        if bits is None or start >= stop:
            return 0
        return bits.range_cardinality(start, stop)

    def __len__(self) -> int:
        """Total number of positions. O(L + containers)."""
        return sum(len(bits) for bits in self._bitmaps.values())

    def __bool__(self) -> bool:
        """Whether any position is in the set. O(1)."""
        return bool(self._ledgers)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        """Every position, ascending. O(n); do not mutate the set while iterating."""
        for ledger_id in self._ledgers:
            for entry_id in self._bitmaps[ledger_id]:
                yield ledger_id, entry_id

    def ranges(self) -> Iterator[tuple[int, int, int]]:
        """The maximal runs ``(ledger_id, first, last)``, **both inclusive**, ascending.

        Runs never join across ledgers, even when one ledger's last entry and
        the next ledger's first would be "adjacent". In Pulsar's open-closed
        form a run is ``(ledger_id:first-1 .. ledger_id:last]``. O(containers)
        per ledger in C, then O(runs) to yield.
        """
        for ledger_id in list(self._ledgers):
            starts, ends = _runs(self._bitmaps[ledger_id])
            for first, last in zip(starts, ends, strict=True):
                yield ledger_id, first, last

    def range_count(self) -> int:
        """Number of maximal runs: Pulsar's unacked-ranges (holes) metric.

        Computed in C without materializing the runs: O(L + containers).
        """
        return sum(bits.difference_cardinality(bits.shift(1)) for bits in self._bitmaps.values())

    def union_update(self, other: RangeSet) -> None:
        """Add every position of ``other`` (in place). O(containers of ``other``)."""
        for ledger_id in other._ledgers:
            incoming = other._bitmaps[ledger_id]
            mine = self._bitmaps.get(ledger_id)
            if mine is None:
                self._bitmaps[ledger_id] = incoming.copy()
                bisect.insort(self._ledgers, ledger_id)
            else:
                mine |= incoming

    def copy(self) -> RangeSet:
        """An independent copy. O(containers)."""
        clone = RangeSet()
        clone._bitmaps = {ledger_id: bits.copy() for ledger_id, bits in self._bitmaps.items()}
        clone._ledgers = list(self._ledgers)
        return clone

    def __eq__(self, other: object) -> bool:
        """Same positions. O(containers)."""
        if not isinstance(other, RangeSet):
            return NotImplemented
        return self._bitmaps == other._bitmaps

    def serialize(self) -> bytes:
        """A compact, stable binary form, little-endian.

        Layout: ``u32`` ledger count, then per ledger in ascending order:
        ``i64`` ledger id, ``u32`` length, and that many bytes of the ledger's
        portable roaring serialization (``BitMap.serialize()``, after
        ``run_optimize()`` so consecutive entries cost a run, not a bit).

        Size, measured: 10,000,000 random positions over 4 ledgers of
        5,000,000 entries each (half of every ledger set) serialize to
        2,525,684 bytes, 0.25 byte per position (bitmap containers: one bit per
        entry id); the same count spread over 4 ledgers of 50,000,000 entry ids
        (one in twenty set) takes 2.0 bytes per position (array containers: two
        bytes per entry). Within a ledger roaring never needs more than 2 bytes
        per position plus a few bytes per 65,536 entry ids, and a run of
        acknowledged entries costs 4 bytes whatever its length; each ledger adds
        about 30 bytes of headers. O(containers); optimizes the stored bitmaps
        in place.
        """
        parts = [_COUNT.pack(len(self._ledgers))]
        for ledger_id in self._ledgers:
            bits = self._bitmaps[ledger_id]
            bits.run_optimize()
            blob = bits.serialize()
            parts.append(_LEDGER_HEADER.pack(ledger_id, len(blob)))
            parts.append(blob)
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes) -> RangeSet:
        """The set :meth:`serialize` wrote.

        Truncated, trailing or corrupt data, unsorted or negative ledger ids and
        empty ledgers raise :class:`~cursorops.core.domain.errors.InvalidArgumentError`.
        O(len(data)).
        """
        view = memoryview(data)
        try:
            (ledger_count,) = _COUNT.unpack_from(view, 0)
        except struct.error as exc:
            raise InvalidArgumentError(f"range set: truncated header: {exc}") from exc
        offset = _COUNT.size
        result = cls()
        previous = -1
        for _ in range(ledger_count):
            try:
                ledger_id, length = _LEDGER_HEADER.unpack_from(view, offset)
            except struct.error as exc:
                raise InvalidArgumentError(
                    f"range set: truncated ledger header at byte {offset}"
                ) from exc
            offset += _LEDGER_HEADER.size
            if ledger_id <= previous:
                raise InvalidArgumentError(
                    f"range set: ledger ids not ascending ({ledger_id} after {previous})"
                )
            if offset + length > len(view):
                raise InvalidArgumentError(
                    f"range set: ledger {ledger_id} needs {length} bytes at byte {offset}, "
                    f"only {len(view) - offset} left"
                )
            try:
                bits = BitMap.deserialize(bytes(view[offset : offset + length]))
            except (ValueError, IndexError) as exc:
                raise InvalidArgumentError(
                    f"range set: corrupt bitmap of ledger {ledger_id}: {exc}"
                ) from exc
            if not bits:
                raise InvalidArgumentError(f"range set: ledger {ledger_id} is empty")
            offset += length
            result._bitmaps[ledger_id] = bits
            result._ledgers.append(ledger_id)
            previous = ledger_id
        if offset != len(view):
            raise InvalidArgumentError(
                f"range set: {len(view) - offset} trailing bytes after {ledger_count} ledgers"
            )
        return result

    def __repr__(self) -> str:
        """Pulsar's form: open-closed ranges ``[(1:2..1:5], (3:-1..3:0]]``.

        Run ``(L, first, last)`` shows as ``(L:first-1..L:last]``; past 20
        ranges the rest is shown as ``...``.
        """
        shown: list[str] = []
        for ledger_id, first, last in self.ranges():
            if len(shown) == _REPR_MAX_RANGES:
                shown.append("...")
                break
            shown.append(f"({ledger_id}:{first - 1}..{ledger_id}:{last}]")
        return "[" + ", ".join(shown) + "]"

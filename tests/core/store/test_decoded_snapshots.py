"""DecodedSnapshots: a state decoded from kept bytes is exactly the state the bytes encode,
and whatever a caller does with it never reaches another caller or the kept one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.acks import cursor_codec
from core.acks.cursor import BatchAckSets, CursorState
from core.acks.range_set import RangeSet
from core.errors import MetadataStoreError
from core.ids.position import Position
from core.store.cursor_state import DecodedSnapshots


@st.composite
def states(draw: st.DrawFn) -> CursorState:
    """A cursor after random acknowledgements: holes in several ledgers and many partly
    acknowledged batches (what random skips leave)."""
    mark = Position(draw(st.integers(0, 3)), draw(st.integers(-1, 50)))
    deleted = RangeSet()
    batches: dict[Position, int] = {}
    for ledger in range(4, 4 + draw(st.integers(1, 3))):
        entries = draw(st.lists(st.integers(0, 5_000), min_size=1, max_size=200, unique=True))
        for entry in entries:
            if draw(st.booleans()):
                deleted.add(ledger, entry)
            else:
                batches[Position(ledger, entry)] = draw(st.integers(1, 2**40))
    return CursorState(mark, deleted, BatchAckSets(batches))


def snapshot_of(state: CursorState) -> bytes:
    return cursor_codec.encode(state)


@settings(max_examples=60, deadline=None)
@given(st.lists(states(), min_size=1, max_size=4), st.lists(st.integers(0, 3), max_size=12))
def test_a_kept_state_is_the_decoded_state(chosen: list[CursorState], reads: list[int]) -> None:
    cache = DecodedSnapshots(max_bytes=64 * 1024 * 1024, small=0)  # every snapshot kept
    snapshots = [snapshot_of(state) for state in chosen]
    for index in reads + list(range(len(snapshots))):
        snapshot = snapshots[index % len(snapshots)]
        got = cache.state(bytes(snapshot))  # equal bytes, another object, as a read gives
        assert got == cursor_codec.decode(snapshot)[0]
        # The caller owns what it got: change every part of it.
        got.mark_delete = Position(10**9, 0)
        got.individually_deleted.add(10**6, 1)
        got.batch_acks[Position(10**6, 2)] = 1
        again = cache.state(snapshot)
        assert again == cursor_codec.decode(snapshot)[0]
        assert again is not got
    assert set(cache._states) == set(snapshots)


def test_kept_bytes_stay_within_the_bound_and_small_snapshots_are_not_kept() -> None:
    big = [
        CursorState(
            Position(1, -1),
            RangeSet(),
            BatchAckSets({Position(2, e): 3 for e in range(start, start + 400)}),
        )
        for start in range(0, 4_000, 400)
    ]
    snapshots = [snapshot_of(state) for state in big]
    small = snapshot_of(CursorState())
    bound = 3 * max(len(s) for s in snapshots)
    cache = DecodedSnapshots(max_bytes=bound, small=len(small) + 1)
    assert all(len(s) > len(small) for s in snapshots)
    for snapshot in snapshots:
        assert cache.state(snapshot) == cursor_codec.decode(snapshot)[0]
        assert cache._bytes <= bound
    assert 0 < len(cache._states) <= 3
    # The most recent ones are kept, the oldest went first.
    assert list(cache._states) == snapshots[-len(cache._states) :]
    cache.state(small)
    assert small not in cache._states


def test_a_corrupt_snapshot_raises_and_is_not_kept() -> None:
    state = CursorState(
        Position(1, -1), RangeSet(), BatchAckSets({Position(2, e): 5 for e in range(400)})
    )
    snapshot = bytearray(snapshot_of(state))
    del snapshot[len(snapshot) // 2 :]
    cache = DecodedSnapshots(max_bytes=1 << 20, small=0)
    with pytest.raises(MetadataStoreError):
        cache.state(bytes(snapshot))
    assert not cache._states

"""Replays: a replay that goes on from a kept state is exactly the plain replay of the
same bytes (decode the snapshot, merge every delta in order, a replacing delta starting
over), and whatever a caller does with its state never reaches another caller or the
kept one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import BatchAckSets, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.errors import MetadataStoreError
from cursorops.core.domain.ids.position import Position
from cursorops.core.store.cursor_state import REPLAYS, Replays, replay_since


@st.composite
def states(draw: st.DrawFn, most: int = 60) -> CursorState:
    """A cursor, or a delta, after random acknowledgements: holes in a few ledgers and
    partly acknowledged batches (what random skips leave)."""
    mark = Position(draw(st.integers(0, 3)), draw(st.integers(-1, 50)))
    deleted = RangeSet()
    batches: dict[Position, int] = {}
    for ledger in range(4, 4 + draw(st.integers(1, 3))):
        entries = draw(st.lists(st.integers(0, 300), max_size=most, unique=True))
        for entry in entries:
            if draw(st.booleans()):
                deleted.add(ledger, entry)
            else:
                batches[Position(ledger, entry)] = draw(st.integers(1, 2**40))
    return CursorState(mark, deleted, BatchAckSets(batches))


@st.composite
def journals(draw: st.DrawFn) -> tuple[bytes | None, list[bytes]]:
    """A stored snapshot (or none) and the deltas after it, some of them replacing."""
    snapshot = draw(st.none() | states().map(cursor_codec.encode))
    deltas = [
        cursor_codec.encode(draw(states(most=5)), replace=draw(st.integers(0, 9)) == 0)
        for _ in range(draw(st.integers(0, 8)))
    ]
    return snapshot, deltas


def plain(snapshot: bytes | None, deltas: list[bytes]) -> CursorState:
    return plain_replay(snapshot, deltas)[0]


def plain_replay(snapshot: bytes | None, deltas: list[bytes]) -> tuple[CursorState, int]:
    """The state, and how many deltas run through the last replacing one."""
    state = CursorState() if snapshot is None else cursor_codec.decode(snapshot)[0]
    replaced = 0
    for index, payload in enumerate(deltas):
        delta, replace = cursor_codec.decode(payload)
        if replace:
            state, replaced = delta, index + 1
        else:
            state.merge(delta, None)
    return state, replaced


@settings(max_examples=80, deadline=None)
@given(
    st.lists(journals(), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 8)), min_size=1, max_size=15),
)
def test_a_replay_from_a_kept_state_is_the_plain_replay(
    cursors: list[tuple[bytes | None, list[bytes]]], reads: list[tuple[int, int]]
) -> None:
    replays = Replays(max_bytes=64 * 1024 * 1024)
    for which, length in reads:
        snapshot, deltas = cursors[which % len(cursors)]
        seen = deltas[:length]  # a journal read as it was then: a prefix of today's
        # Equal bytes in other objects, as every read from the store gives.
        got, replaced = replays.replay(
            None if snapshot is None else bytes(snapshot), [*map(bytes, seen)]
        )
        assert (got, replaced) == plain_replay(snapshot, seen)
        # The caller owns what it got: change every part of it.
        got.mark_delete = Position(10**9, 0)
        got.individually_deleted.add(10**6, 1)
        got.batch_acks[Position(10**6, 2)] = 1
        again = replays.replay(snapshot, seen)[0]
        assert again == plain(snapshot, seen)
        assert again is not got


def test_a_longer_journal_goes_on_from_the_kept_state() -> None:
    snapshot = cursor_codec.encode(
        CursorState(
            Position(1, -1), RangeSet(), BatchAckSets({Position(2, e): 5 for e in range(50)})
        )
    )
    one = CursorState(Position(1, -1), RangeSet(), BatchAckSets({Position(2, 60): 1}))
    two = CursorState(Position(1, -1), RangeSet(), BatchAckSets({Position(2, 61): 1}))
    deltas = [cursor_codec.encode(one), cursor_codec.encode(two)]
    replays = Replays(max_bytes=1 << 20)
    replays.replay(snapshot, deltas[:1])
    assert replays._kept[snapshot][0] == (deltas[0],)
    assert replays.replay(snapshot, deltas)[0] == plain(snapshot, deltas)
    assert replays._kept[snapshot][0] == tuple(deltas)
    # A reader of an older journal is answered, and does not shorten what is kept.
    assert replays.replay(snapshot, deltas[:1])[0] == plain(snapshot, deltas[:1])
    assert replays._kept[snapshot][0] == tuple(deltas)


def test_kept_bytes_stay_within_the_bound() -> None:
    snapshots = [
        cursor_codec.encode(
            CursorState(
                Position(1, -1),
                RangeSet(),
                BatchAckSets({Position(2, e): 3 for e in range(start, start + 400)}),
            )
        )
        for start in range(0, 4_000, 400)
    ]
    bound = 3 * max(len(s) for s in snapshots)
    replays = Replays(max_bytes=bound)
    for snapshot in snapshots:
        assert replays.replay(snapshot, [])[0] == plain(snapshot, [])
        assert replays._bytes <= bound
    assert 0 < len(replays._kept) <= 3
    # The most recent ones are kept, the oldest went first.
    assert list(replays._kept) == snapshots[-len(replays._kept) :]


def test_a_corrupt_snapshot_raises_and_is_not_kept() -> None:
    state = CursorState(
        Position(1, -1), RangeSet(), BatchAckSets({Position(2, e): 5 for e in range(400)})
    )
    snapshot = bytearray(cursor_codec.encode(state))
    del snapshot[len(snapshot) // 2 :]
    replays = Replays(max_bytes=1 << 20)
    with pytest.raises(MetadataStoreError):
        replays.replay(bytes(snapshot), [])[0]
    assert not replays._kept


LAYOUT = LedgerLayout.of((ledger, 400) for ledger in range(8))


@settings(max_examples=60, deadline=None)
@given(journals(), st.integers(1, 4), st.integers(0, 8))
def test_a_dispatcher_replay_from_the_snapshot_is_the_plain_one_with_its_last_reset(
    journal: tuple[bytes | None, list[bytes]], step: int, first: int
) -> None:
    """A dispatcher starting from a snapshot (through this process's kept states, as an
    earlier and shorter read left them) gets the plain replay, normalized, and the version
    of the last replacing delta it read."""
    snapshot, deltas = journal
    versions = [100 + step * i for i in range(len(deltas))]
    replays_before = dict(REPLAYS._kept)
    try:
        for length in (min(first, len(deltas)), len(deltas)):
            listed = list(zip(versions[:length], deltas[:length], strict=True))
            state, last_reset = replay_since(None, None, snapshot, listed, LAYOUT)
            expected, replaced = plain_replay(snapshot, deltas[:length])
            expected.normalize(LAYOUT)
            assert state == expected
            assert last_reset == (versions[replaced - 1] if replaced else 0)
    finally:
        REPLAYS._kept.clear()
        REPLAYS._kept.update(replays_before)

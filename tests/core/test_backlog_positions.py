"""Positions are matched without packing: backlog counting over the whole id space.

``(ledger << 32) + entry`` sent an entry id of 2**32 onto entry 0 of the next
ledger and wrapped ledger ids of 2**32 and more onto small ones. These tests
hold :func:`cursorops.core.domain.ids.position.match_positions` and
:func:`cursorops.core.domain.analysis.backlog.unacked_messages`
to plain Python models, with the edges of the int64 and 2**32 ranges.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.delivery.unacked_rows import unacked_rows
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.core.domain.ids.position_match import match_positions

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Ledger ids that collided under the old packing (ledger << 32 wraps modulo 2**64).
LEDGER_EDGES = [0, 1, 2, 2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**33 + 2, 2**62, INT64_MAX]
ENTRY_EDGES = [0, 1, 2, 2**31, 2**32 - 1]

any_int64 = st.one_of(
    st.sampled_from([*LEDGER_EDGES, -1, -2, INT64_MIN, 2**32]), st.integers(INT64_MIN, INT64_MAX)
)
ledgers = st.sampled_from(LEDGER_EDGES)
entries = st.one_of(st.sampled_from(ENTRY_EDGES), st.integers(0, 2**32 - 1))
stored_positions = st.tuples(ledgers, entries)


@given(
    st.lists(st.tuples(any_int64, any_int64), max_size=30),
    st.lists(st.tuples(any_int64, any_int64), max_size=30, unique=True),
)
@example(left=[(2, 0)], right=[(1, 2**32)])
@example(left=[(1, 2**32)], right=[(2, 0)])
@example(left=[(2**32 + 1, 5)], right=[(1, 5)])
@example(left=[(1, -1)], right=[(0, 2**32 - 1)])
@example(left=[(INT64_MAX, INT64_MAX)], right=[(INT64_MAX, INT64_MAX), (INT64_MIN, -1)])
@settings(max_examples=300, deadline=None)
def test_match_positions_is_exact_equality(
    left: list[tuple[int, int]], right: list[tuple[int, int]]
) -> None:
    index = {p: i for i, p in enumerate(right)}
    got = match_positions(
        np.array([p[0] for p in left], dtype=np.int64),
        np.array([p[1] for p in left], dtype=np.int64),
        np.array([p[0] for p in right], dtype=np.int64),
        np.array([p[1] for p in right], dtype=np.int64),
    )
    # An entry id outside [0, 2**32) is never a stored entry: it matches nothing.
    expected = [index.get(p, -1) if 0 <= p[1] < 2**32 else -1 for p in left]
    assert got.tolist() == expected


def model_unacked(state_rows: list[tuple[Position, int]], state: CursorState) -> list[int]:
    out = []
    for position, batch_size in state_rows:
        if position <= state.mark_delete or state.individually_deleted.contains(*position):
            out.append(0)
        elif position in state.batch_acks:
            out.append(ack_set.unacked_count(state.batch_acks[position]))
        else:
            out.append(max(batch_size, 1))
    return out


@st.composite
def cursor_worlds(draw: st.DrawFn) -> tuple[list[tuple[Position, int]], CursorState]:
    positions = draw(st.lists(stored_positions, min_size=1, max_size=25, unique=True))
    rows = [(Position(*p), draw(st.sampled_from([0, 0, 3, 5]))) for p in positions]
    deleted = RangeSet()
    batch_acks: dict[Position, int] = {}
    for position, batch_size in rows:
        choice = draw(st.integers(0, 3))
        if choice == 1:
            deleted.add(*position)
        elif choice == 2 and batch_size:
            batch_acks[position] = ack_set.ack(ack_set.full(batch_size), 0)
    # Stray acknowledgement state (ids nobody stored; the old code counted them
    # against a real entry of another ledger).
    for ledger_id, entry_id in draw(st.lists(stored_positions, max_size=5)):
        deleted.add(ledger_id, entry_id)
    for ledger_id, entry_id in draw(st.lists(st.tuples(ledgers, any_int64), max_size=3)):
        batch_acks.setdefault(Position(ledger_id, entry_id), ack_set.ack(ack_set.full(4), 1))
    mark = draw(st.sampled_from([EARLIEST, *(p for p, _ in rows)]))
    live_batch = {p: b for p, b in batch_acks.items() if p > mark and not deleted.contains(*p)}
    return rows, CursorState(mark, deleted, live_batch)  # type: ignore[arg-type]


@pytest.mark.slow
@given(cursor_worlds(), st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None)
def test_unacked_messages_matches_a_model(world, rng) -> None:  # type: ignore[no-untyped-def]
    rows, state = world
    rng.shuffle(rows)
    got = backlog.unacked_messages(
        state,
        np.array([p.ledger_id for p, _ in rows], dtype=np.int64),
        np.array([p.entry_id for p, _ in rows], dtype=np.int64),
        np.array([b for _, b in rows], dtype=np.int64),
    )
    assert got.tolist() == model_unacked(rows, state)


def test_entry_two_to_the_32_does_not_discount_the_next_ledger() -> None:
    """The issue's example: an ack state at 1:4294967296 left 2:0 counted as acknowledged."""
    state = CursorState(batch_acks={Position(1, 2**32): ack_set.ack(ack_set.full(2), 0)})
    counts = backlog.unacked_messages(
        state, np.array([1, 2], np.int64), np.array([0, 0], np.int64), np.array([2, 2], np.int64)
    )
    assert counts.tolist() == [2, 2]


def test_ledgers_two_to_the_32_apart_are_different_ledgers() -> None:
    deleted = RangeSet()
    deleted.add(2**32 + 1, 7)
    counts = backlog.unacked_messages(
        CursorState(individually_deleted=deleted),
        np.array([1, 2**32 + 1], np.int64),
        np.array([7, 7], np.int64),
        np.array([0, 0], np.int64),
    )
    assert counts.tolist() == [1, 0]


def test_unacked_rows_of_filters_matches_is_acked() -> None:
    """The per-message path of the entry filters uses the same matching."""
    import pyarrow as pa

    bits = ack_set.ack(ack_set.full(3), 1)
    state = CursorState(batch_acks={Position(2**32 + 1, 0): bits, Position(1, 2**32): bits})
    rows = pa.table(
        {
            "ledger_id": pa.array([1, 1, 1, 2**32 + 1, 2**32 + 1, 2**32 + 1], pa.int64()),
            "entry_id": pa.array([0, 0, 0, 0, 0, 0], pa.int64()),
            "batch_index": pa.array([0, 1, 2, 0, 1, 2], pa.int32()),
            "batch_size": pa.array([3] * 6, pa.int32()),
        }
    )
    assert unacked_rows(state, rows).tolist() == [True, True, True, True, False, True]

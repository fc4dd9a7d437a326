"""Taking acknowledgements back, against the plain model of ``test_cursor``: a set of
acknowledged ``(position, batch index)``; afterwards it is the set before minus exactly
the messages taken back. And the triplets an undo reads from a skip's audit record."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.acks.unacknowledge import unacknowledge
from cursorops.core.domain.errors import InvalidArgumentError, InvalidSkipPlanError
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.core.domain.ids.triplets import parse_triplets, triplets
from tests.core.test_cursor import (
    apply_to_cursor,
    apply_to_model,
    check_matches,
    messages_of,
    scenarios,
)

Message = tuple[Position, int]


def expand(removed: list[Message], sizes: dict[Position, int]) -> set[Message]:
    """The messages a list of ids names: batch index -1 of a batch is every index of it."""
    named: set[Message] = set()
    for position, index in removed:
        if index < 0:
            named |= {m for m in messages_of({position: sizes[position]})}
        else:
            named.add((position, index))
    return named


def undo(state: CursorState, layout: LedgerLayout, removed: list[Message]) -> CursorState:
    return unacknowledge(
        state,
        layout,
        np.array([p.ledger_id for p, _ in removed], dtype=np.int64),
        np.array([p.entry_id for p, _ in removed], dtype=np.int64),
        np.array([i for _, i in removed], dtype=np.int64),
    )


@st.composite
def undo_scenarios(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    layout, sizes, ops = draw(scenarios())
    ids = [(p, -1) for p in sorted(sizes)] + [
        (p, i) for p in sorted(sizes) for i in range(sizes[p])
    ]
    removed = draw(st.lists(st.sampled_from(ids), max_size=12)) if ids else []
    return layout, sizes, ops, removed


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(undo_scenarios())
def test_exactly_the_messages_taken_back_are_unacknowledged(scenario) -> None:  # type: ignore[no-untyped-def]
    layout, sizes, ops, removed = scenario
    state = CursorState()
    model: set[Message] = set()
    for op in ops:
        apply_to_cursor(state, layout, sizes, op)
        model = apply_to_model(model, sizes, op)
    before = state.copy()
    after = undo(state, layout, removed)
    assert state == before, "the state given is left as it is"
    check_matches(after, layout, sizes, model - expand(removed, sizes))
    # The mark-delete position moves back only as far as the earliest message taken back.
    taken = {p for p, _ in expand(removed, sizes) & model}
    if taken and min(taken) <= before.mark_delete:
        assert after.mark_delete == layout.previous_position(min(taken))
    else:
        assert after.mark_delete == before.mark_delete


@settings(max_examples=200, deadline=None)
@given(undo_scenarios())
def test_acknowledging_them_again_restores_the_state(scenario) -> None:  # type: ignore[no-untyped-def]
    layout, sizes, ops, removed = scenario
    state = CursorState()
    model: set[Message] = set()
    for op in ops:
        apply_to_cursor(state, layout, sizes, op)
        model = apply_to_model(model, sizes, op)
    after = undo(state, layout, removed)
    back = [(p, i) for p, i in expand(removed, sizes) & model]
    after.merge(CursorState.ack_delta(AckTarget(p, i, sizes[p]) for p, i in back), layout)
    check_matches(after, layout, sizes, model)


def test_a_cumulative_ack_past_it_leaves_the_rest_acknowledged_individually() -> None:
    layout = LedgerLayout.of([(1, 5), (2, 0), (3, 4)])
    state = CursorState()
    state.acknowledge_cumulative(Position(3, 1), layout)
    after = undo(state, layout, [(Position(1, 2), -1), (Position(3, 0), -1)])
    assert after.mark_delete == Position(1, 1)
    expected = RangeSet()
    expected.add_range(1, 3, 4)
    expected.add(3, 1)
    assert after.individually_deleted == expected and not after.batch_acks


def test_an_index_of_a_wholly_acknowledged_batch_becomes_its_only_unacknowledged_one() -> None:
    layout = LedgerLayout.of([(7, 3)])
    state = CursorState()
    state.acknowledge_cumulative(Position(7, 2), layout)
    after = undo(state, layout, [(Position(7, 1), 4), (Position(7, 1), 9)])
    assert after.mark_delete == Position(7, 0)
    assert dict(after.batch_acks) == {Position(7, 1): (1 << 4) | (1 << 9)}
    assert list(after.individually_deleted) == [(7, 2)]


def test_nothing_acknowledged_changes_nothing() -> None:
    layout = LedgerLayout.of([(1, 3)])
    state = CursorState()
    assert undo(state, layout, [(Position(1, 0), -1)]) == CursorState()
    assert undo(state, layout, []) == CursorState(EARLIEST)


def test_a_message_below_mark_delete_needs_its_ledger() -> None:
    layout = LedgerLayout.of([(5, 3)])
    state = CursorState(mark_delete=Position(5, 2))
    with pytest.raises(InvalidArgumentError, match="no longer retained"):
        undo(state, layout, [(Position(4, 0), -1)])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.just(-1)),
            st.tuples(
                st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**31 - 1)
            ),
        ),
        max_size=20,
    )
)
def test_triplets_parse_back(ids: list[tuple[int, int, int]]) -> None:
    texts = triplets([i[0] for i in ids], [i[1] for i in ids], [i[2] for i in ids])
    assert parse_triplets(texts, "ids").tolist() == [list(i) for i in ids]


@pytest.mark.parametrize("bad", ["1", "1:2:3:4", "a:1", "1:-2", "1:2:-3", "1:2:2147483648", 7, ""])
def test_a_bad_triplet_is_named(bad: object) -> None:
    with pytest.raises(InvalidSkipPlanError, match=r"Invalid ids\[1\]"):
        parse_triplets(["1:2", bad], "ids")


def test_a_whole_entry_taken_back_from_a_partly_acknowledged_batch() -> None:
    layout = LedgerLayout.of([(2, 2)])
    state = CursorState()
    state.merge(CursorState.ack_delta([AckTarget(Position(2, 0), 1, 4)]), layout)
    after = undo(state, layout, [(Position(2, 0), -1)])
    assert after == CursorState()

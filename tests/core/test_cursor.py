"""The cursor against a plain model: a Python set of acknowledged (ledger, entry, index)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckTarget, BatchAckSets, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.errors import InvalidBatchIndexError, MetadataStoreError
from cursorops.core.domain.ids.position import EARLIEST, Position


@st.composite
def topics(draw: st.DrawFn) -> tuple[LedgerLayout, dict[Position, int]]:
    """A partition: a few ledgers (some empty), each entry batched (size >= 1) or not (0)."""
    ledger_ids = sorted(draw(st.sets(st.integers(0, 50), min_size=1, max_size=4)))
    layout = LedgerLayout.of((lid, draw(st.integers(0, 12))) for lid in ledger_ids)
    sizes = {
        Position(lid, e): draw(st.sampled_from([0, 0, 1, 3, 10]))
        for lid, n in layout
        for e in range(n)
    }
    return layout, sizes


def messages_of(sizes: dict[Position, int]) -> list[tuple[Position, int]]:
    return [(p, i) for p, n in sorted(sizes.items()) for i in (range(n) if n else [-1])]


@st.composite
def scenarios(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    layout, sizes = draw(topics())
    positions = sorted(sizes)
    ops = []
    for _ in range(draw(st.integers(0, 25))):
        if not positions:
            break
        kind = draw(st.sampled_from(["entry", "index", "index", "cumulative", "reset", "many"]))
        pos = draw(st.sampled_from(positions))
        if kind == "index" and sizes[pos]:
            ops.append(("index", pos, draw(st.integers(0, sizes[pos] - 1))))
        elif kind == "cumulative":
            index = (
                draw(st.integers(0, sizes[pos] - 1)) if sizes[pos] and draw(st.booleans()) else -1
            )
            ops.append(("cumulative", pos, index))
        elif kind == "reset":
            ops.append(("reset", pos, -1))
        elif kind == "many":
            ops.append(("many", draw(st.lists(st.sampled_from(positions), max_size=8)), -1))
        else:
            ops.append(("entry", pos, -1))
    return layout, sizes, ops


def apply_to_model(
    model: set[tuple[Position, int]], sizes: dict[Position, int], op: tuple
) -> set[tuple[Position, int]]:
    kind, pos, index = op
    everything = messages_of(sizes)
    if kind == "entry":
        return model | {m for m in everything if m[0] == pos}
    if kind == "many":
        return model | {m for m in everything if m[0] in set(pos)}
    if kind == "index":
        return model | {(pos, index)}
    if kind == "cumulative":
        done = {m for m in everything if m[0] < pos}
        if index < 0:
            done |= {m for m in everything if m[0] == pos}
        else:
            done |= {(pos, i) for i in range(index + 1)}
        return model | done
    assert kind == "reset"
    return {m for m in everything if m[0] < pos}


def apply_to_cursor(
    state: CursorState, layout: LedgerLayout, sizes: dict[Position, int], op: tuple
) -> CursorState:
    kind, pos, index = op
    if kind in ("entry", "many", "index"):
        if kind == "entry":
            targets = [AckTarget(pos)]
        elif kind == "many":
            targets = [AckTarget(p) for p in pos]
        else:
            targets = [AckTarget(pos, index, sizes[pos])]
        delta = CursorState.ack_delta(targets)
        if len(targets) == 1 and kind == "entry":
            state.acknowledge(targets, layout)  # the single-entry path
        else:
            state.merge(delta, layout)
        return delta
    if kind == "cumulative":
        return state.acknowledge_cumulative(pos, layout, index, sizes[pos])
    return state.reset(pos, layout)


def check_matches(
    state: CursorState,
    layout: LedgerLayout,
    sizes: dict[Position, int],
    model: set[tuple[Position, int]],
) -> None:
    for position, index in messages_of(sizes):
        assert state.is_acked(position, index) == ((position, index) in model), (position, index)
    for position, size in sizes.items():
        wanted = sum(1 for m in messages_of({position: size}) if m not in model)
        assert state.unacked_in_entry(position, size) == wanted
    # Normal form: nothing at or before mark-delete, auto-advance complete.
    assert all(p > state.mark_delete for p in state.individually_deleted)
    following = layout.next_position(state.mark_delete)
    assert following is None or following not in state.individually_deleted
    for position, bits in state.batch_acks.items():
        assert bits != 0
        assert position > state.mark_delete
        assert position not in state.individually_deleted
    # Exact backlog in entries and messages.
    ordered = sorted(sizes)
    counted = backlog.backlog(
        state,
        np.array([p.ledger_id for p in ordered], dtype=np.int64),
        np.array([p.entry_id for p in ordered], dtype=np.int64),
        np.array([sizes[p] for p in ordered], dtype=np.int64),
    )
    unacked = [m for m in messages_of(sizes) if m not in model]
    assert counted.messages == len(unacked)
    assert counted.entries == len({p for p, _ in unacked})
    # Snapshot round trip.
    decoded, replace = cursor_codec.decode(cursor_codec.encode(state))
    assert decoded == state and not replace


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_cursor_matches_model(scenario) -> None:  # type: ignore[no-untyped-def]
    layout, sizes, ops = scenario
    state = CursorState()
    model: set[tuple[Position, int]] = set()
    for op in ops:
        apply_to_cursor(state, layout, sizes, op)
        model = apply_to_model(model, sizes, op)
        check_matches(state, layout, sizes, model)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_deltas_merge_in_any_order(scenario, rnd) -> None:  # type: ignore[no-untyped-def]
    """Acknowledgement deltas commute: concurrent writers replay to the same state."""
    layout, sizes, ops = scenario
    ops = [op for op in ops if op[0] != "reset"]
    state = CursorState()
    deltas = [apply_to_cursor(state, layout, sizes, op) for op in ops]
    rnd.shuffle(deltas)
    replayed = CursorState()
    for delta in deltas:
        decoded, _ = cursor_codec.decode(cursor_codec.encode(delta))
        replayed.merge(decoded, None)
    replayed.normalize(layout)
    assert replayed == state


def test_auto_advance_crosses_ledgers() -> None:
    layout = LedgerLayout.of([(3, 2), (7, 0), (9, 3)])
    state = CursorState()
    state.acknowledge([AckTarget(Position(9, 0)), AckTarget(Position(3, 1))], layout)
    assert state.mark_delete == EARLIEST
    state.acknowledge([AckTarget(Position(3, 0))], layout)
    assert state.mark_delete == Position(9, 0)
    assert len(state.individually_deleted) == 0


def test_batch_index_ack_then_last_index_folds_into_entry() -> None:
    layout = LedgerLayout.of([(1, 2)])
    state = CursorState()
    state.acknowledge([AckTarget(Position(1, 1), i, 3) for i in (0, 2)], layout)
    assert state.batch_acks == {Position(1, 1): 0b010}
    assert state.unacked_in_entry(Position(1, 1), 3) == 1
    state.acknowledge([AckTarget(Position(1, 1), 1, 3)], layout)
    assert state.batch_acks == {}
    assert Position(1, 1) in state.individually_deleted
    state.acknowledge([AckTarget(Position(1, 0))], layout)
    assert state.mark_delete == Position(1, 1)


def test_cumulative_ack_with_batch_index_keeps_later_indexes() -> None:
    layout = LedgerLayout.of([(1, 3)])
    state = CursorState()
    state.acknowledge_cumulative(Position(1, 1), layout, batch_index=1, batch_size=4)
    assert state.mark_delete == Position(1, 0)
    assert state.batch_acks == {Position(1, 1): 0b1100}


@pytest.mark.parametrize("index,size", [(3, 3), (0, 0), (64, 10)])
def test_bad_batch_index_is_refused(index: int, size: int) -> None:
    state = CursorState()
    with pytest.raises(InvalidBatchIndexError, match="Invalid batchIndex"):
        state.acknowledge([AckTarget(Position(1, 0), index, size)], LedgerLayout.of([(1, 1)]))
    assert state == CursorState()


def test_corrupt_record_is_a_store_error() -> None:
    good = cursor_codec.encode(CursorState())
    for bad in (b"", b"XXXX" + good[4:], good[:-1], good + b"\0"):
        with pytest.raises(MetadataStoreError, match="Corrupt cursor record"):
            cursor_codec.decode(bad)


def test_layout_positions() -> None:
    layout = LedgerLayout.of([(5, 2), (6, 0), (8, 1)])
    assert layout.next_position(EARLIEST) == Position(5, 0)
    assert layout.next_position(Position(5, 1)) == Position(8, 0)
    assert layout.next_position(Position(8, 0)) is None
    assert layout.previous_position(Position(8, 0)) == Position(5, 1)
    assert layout.previous_position(Position(5, 0)) == EARLIEST
    assert layout.last_position == Position(8, 0)
    assert LedgerLayout.empty().last_position == EARLIEST


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("set"), st.integers(0, 3), st.integers(0, 30), st.integers(1, 7)),
            st.tuples(st.just("del"), st.integers(0, 3), st.integers(0, 30), st.just(0)),
            st.tuples(st.just("drop"), st.integers(0, 3), st.integers(0, 30), st.just(0)),
        ),
        max_size=60,
    )
)
def test_batch_ack_sets_match_a_dict(ops) -> None:  # type: ignore[no-untyped-def]
    """The heap beside the dict never changes what the dict holds."""
    sets, model = BatchAckSets(), {}
    for kind, ledger_id, entry_id, bits in ops:
        position = Position(ledger_id, entry_id)
        if kind == "set":
            sets[position] = model[position] = bits
        elif kind == "del":
            sets.pop(position, None)
            model.pop(position, None)
        else:
            sets.drop_through(position)
            model = {p: b for p, b in model.items() if p > position}
        assert dict(sets) == model

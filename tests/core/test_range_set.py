"""RangeSet against a dumb reference: a Python set of (ledger_id, entry_id) tuples."""

from __future__ import annotations

import struct
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from cursorops.core.domain.acks.range_set import ENTRY_ID_LIMIT, RangeSet
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.position import Position

Model = set[tuple[int, int]]
Op = tuple[object, ...]

TOP = ENTRY_ID_LIMIT - 1

# Entry ids cluster where runs form and where roaring changes container: near 0,
# across the 65,536 boundary, and at the very top of the 32-bit range.
entry_ids = st.one_of(
    st.integers(min_value=0, max_value=80),
    st.integers(min_value=65_520, max_value=65_560),
    st.integers(min_value=TOP - 20, max_value=TOP),
)
ledger_ids = st.integers(min_value=0, max_value=4)


@st.composite
def operations(draw: st.DrawFn) -> Op:
    kind = draw(st.sampled_from(["add", "add_many", "add_range", "remove_through"]))
    ledger_id = draw(ledger_ids)
    if kind == "add":
        return kind, ledger_id, draw(entry_ids)
    if kind == "add_many":
        return kind, ledger_id, draw(st.lists(entry_ids, max_size=30)), draw(st.booleans())
    if kind == "add_range":
        first = draw(entry_ids)
        last = min(first + draw(st.integers(min_value=0, max_value=40)), TOP)
        return kind, ledger_id, first, last
    through_ledger = draw(st.integers(min_value=-1, max_value=5))
    through_entry = draw(st.one_of(entry_ids, st.just(-1), st.just(ENTRY_ID_LIMIT + 5)))
    return kind, through_ledger, through_entry


def apply(ops: Iterable[Op]) -> tuple[RangeSet, Model]:
    range_set = RangeSet()
    model: Model = set()
    for op in ops:
        kind, ledger_id = op[0], op[1]
        assert isinstance(ledger_id, int)
        if kind == "add":
            entry_id = op[2]
            assert isinstance(entry_id, int)
            range_set.add(ledger_id, entry_id)
            model.add((ledger_id, entry_id))
        elif kind == "add_many":
            entries, as_bitmap = op[2], op[3]
            assert isinstance(entries, list)
            range_set.add_many(ledger_id, BitMap(entries) if as_bitmap else entries)
            model.update((ledger_id, entry_id) for entry_id in entries)
        elif kind == "add_range":
            first, last = op[2], op[3]
            assert isinstance(first, int) and isinstance(last, int)
            range_set.add_range(ledger_id, first, last)
            model.update((ledger_id, entry_id) for entry_id in range(first, last + 1))
        else:
            entry_id = op[2]
            assert isinstance(entry_id, int)
            range_set.remove_through(ledger_id, entry_id)
            model = {pos for pos in model if pos > (ledger_id, entry_id)}
    return range_set, model


def reference_runs(model: Model) -> list[tuple[int, int, int]]:
    runs: list[tuple[int, int, int]] = []
    for ledger_id, entry_id in sorted(model):
        if runs and runs[-1][0] == ledger_id and runs[-1][2] == entry_id - 1:
            runs[-1] = (ledger_id, runs[-1][1], entry_id)
        else:
            runs.append((ledger_id, entry_id, entry_id))
    return runs


def check_against(range_set: RangeSet, model: Model) -> None:
    ordered = sorted(model)
    assert list(range_set) == ordered
    assert len(range_set) == len(model)
    assert bool(range_set) == bool(model)
    assert range_set.first() == (ordered[0] if ordered else None)
    assert range_set.ledgers() == sorted({ledger_id for ledger_id, _ in model})

    runs = reference_runs(model)
    assert list(range_set.ranges()) == runs
    assert range_set.range_count() == len(runs)
    for ledger_id, first, last in runs:
        for entry_id in (first, (first + last) // 2, last):
            assert range_set.run_end(ledger_id, entry_id) == last
        assert range_set.count(ledger_id, first, last) == last - first + 1
        assert range_set.count(ledger_id, first - 1, last + 1) == last - first + 1

    for ledger_id in range(-1, 6):
        assert list(range_set.bitmap(ledger_id)) == [e for lg, e in ordered if lg == ledger_id]
        for entry_id in (-1, 0, 1, 40, 65_535, 65_536, TOP, ENTRY_ID_LIMIT):
            expected = (ledger_id, entry_id) in model
            assert range_set.contains(ledger_id, entry_id) == expected
            assert ((ledger_id, entry_id) in range_set) == expected
            assert (Position(ledger_id, entry_id) in range_set) == expected
            if not expected:
                assert range_set.run_end(ledger_id, entry_id) is None

    assert RangeSet.deserialize(range_set.serialize()) == range_set


op_lists = st.lists(operations(), max_size=25)


@settings(max_examples=200, deadline=None)
@given(op_lists)
def test_matches_reference(ops: list[Op]) -> None:
    range_set, model = apply(ops)
    check_against(range_set, model)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(op_lists, st.data())
def test_count_matches_reference(ops: list[Op], data: st.DataObject) -> None:
    range_set, model = apply(ops)
    for _ in range(10):
        ledger_id = data.draw(ledger_ids)
        first = data.draw(st.one_of(entry_ids, st.just(-5)))
        last = data.draw(st.one_of(entry_ids, st.just(ENTRY_ID_LIMIT + 5)))
        expected = sum(1 for lg, e in model if lg == ledger_id and first <= e <= last)
        assert range_set.count(ledger_id, first, last) == expected


@settings(max_examples=150, deadline=None)
@given(op_lists, op_lists)
def test_union_update_and_equality(left_ops: list[Op], right_ops: list[Op]) -> None:
    left, left_model = apply(left_ops)
    right, right_model = apply(right_ops)
    right_before = right.copy()

    union = left.copy()
    union.union_update(right)

    check_against(union, left_model | right_model)
    check_against(left, left_model)
    assert right == right_before
    assert (left == right) == (left_model == right_model)
    rebuilt = RangeSet()
    for ledger_id, entry_id in sorted(left_model, reverse=True):
        rebuilt.add(ledger_id, entry_id)
    assert rebuilt == left

    union.add_range(3, 0, 200)
    union.remove_through(9, 0)
    assert right == right_before
    check_against(right, right_model)


@settings(max_examples=100, deadline=None)
@given(op_lists, st.data())
def test_corrupt_data_is_refused_cleanly(ops: list[Op], data: st.DataObject) -> None:
    range_set, _ = apply(ops)
    blob = bytearray(range_set.serialize())
    cut = data.draw(st.integers(min_value=0, max_value=len(blob) - 1))
    with pytest.raises(InvalidArgumentError):
        RangeSet.deserialize(bytes(blob[:cut]))
    with pytest.raises(InvalidArgumentError):
        RangeSet.deserialize(bytes(blob) + b"\x00")
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        blob[data.draw(st.integers(min_value=0, max_value=len(blob) - 1))] = data.draw(
            st.integers(min_value=0, max_value=255)
        )
    try:
        decoded = RangeSet.deserialize(bytes(blob))
    except InvalidArgumentError:
        return
    assert list(decoded) == sorted(decoded)


def test_copy_is_independent() -> None:
    original = RangeSet()
    original.add_range(1, 0, 9)
    clone = original.copy()
    clone.add(1, 20)
    clone.remove_through(1, 3)
    assert list(original.ranges()) == [(1, 0, 9)]
    assert list(clone.ranges()) == [(1, 4, 9), (1, 20, 20)]


def test_runs_do_not_join_across_ledgers() -> None:
    range_set = RangeSet()
    range_set.add(1, TOP)
    range_set.add(2, 0)
    assert list(range_set.ranges()) == [(1, TOP, TOP), (2, 0, 0)]
    assert range_set.run_end(1, TOP) == TOP
    assert range_set.range_count() == 2


def test_run_end_of_long_runs() -> None:
    range_set = RangeSet()
    range_set.add_range(7, 0, TOP)
    assert range_set.run_end(7, 0) == TOP
    assert range_set.run_end(7, 123_456_789) == TOP
    range_set.add_range(8, 10, 1_000_000)
    range_set.add(8, 1_000_002)
    assert range_set.run_end(8, 10) == 1_000_000
    assert range_set.run_end(8, 999_999) == 1_000_000
    assert range_set.run_end(8, 1_000_001) is None
    assert range_set.run_end(8, 1_000_002) == 1_000_002


def test_remove_through_drops_earlier_ledgers_and_keeps_no_empty_ledger() -> None:
    range_set = RangeSet()
    range_set.add_range(1, 0, 5)
    range_set.add_range(3, 2, 4)
    range_set.add(5, 0)
    range_set.remove_through(3, -1)
    assert range_set.ledgers() == [3, 5]
    range_set.remove_through(3, 4)
    assert range_set.ledgers() == [5]
    range_set.remove_through(4, ENTRY_ID_LIMIT * 4)
    assert range_set.ledgers() == [5]
    range_set.remove_through(5, ENTRY_ID_LIMIT * 4)
    assert range_set.ledgers() == []
    assert range_set.first() is None
    assert len(range_set) == 0


def test_add_many_from_any_iterable_and_nothing_for_empty_input() -> None:
    range_set = RangeSet()
    range_set.add_many(2, [])
    range_set.add_many(2, BitMap())
    assert range_set.ledgers() == []
    range_set.add_many(2, (entry_id for entry_id in (5, 3, 3)))
    range_set.add_many(2, range(10, 13))
    assert list(range_set) == [(2, 3), (2, 5), (2, 10), (2, 11), (2, 12)]


def test_repr_is_pulsar_style_and_capped() -> None:
    range_set = RangeSet()
    assert repr(range_set) == "[]"
    range_set.add_range(1, 3, 5)
    range_set.add(1, 9)
    range_set.add(2, 0)
    assert repr(range_set) == "[(1:2..1:5], (1:8..1:9], (2:-1..2:0]]"
    many = RangeSet()
    many.add_many(4, range(0, 100, 2))
    text = repr(many)
    assert text.startswith("[(4:-1..4:0], (4:1..4:2], ")
    assert text.endswith("(4:37..4:38], ...]")
    assert text.count("..4:") == 20


@pytest.mark.parametrize(
    "call",
    [
        lambda rs: rs.add(-1, 0),
        lambda rs: rs.add(0, -1),
        lambda rs: rs.add(0, ENTRY_ID_LIMIT),
        lambda rs: rs.add(2**63, 0),
        lambda rs: rs.add_range(0, 5, 4),
        lambda rs: rs.add_range(0, 0, ENTRY_ID_LIMIT),
        lambda rs: rs.add_range(0, -1, 3),
        lambda rs: rs.add_many(0, [1, -1]),
        lambda rs: rs.add_many(0, [1, ENTRY_ID_LIMIT]),
        lambda rs: rs.add_many(-1, [1]),
    ],
)
def test_bad_positions_are_refused_and_change_nothing(call: object) -> None:
    range_set = RangeSet()
    range_set.add(0, 7)
    before = range_set.copy()
    with pytest.raises(InvalidArgumentError):
        call(range_set)  # type: ignore[operator]
    assert range_set == before
    assert range_set.ledgers() == [0]


def test_deserialize_refuses_malformed_layouts() -> None:
    good = RangeSet()
    good.add(1, 1)
    good.add(2, 2)
    blob = good.serialize()
    one = BitMap([1]).serialize()
    header = struct.Struct("<qI")

    def ledger(ledger_id: int, payload: bytes) -> bytes:
        return header.pack(ledger_id, len(payload)) + payload

    bad = [
        b"",
        b"\x01\x00",
        struct.pack("<I", 2) + ledger(2, one) + ledger(1, one),
        struct.pack("<I", 2) + ledger(1, one) + ledger(1, one),
        struct.pack("<I", 1) + ledger(-3, one),
        struct.pack("<I", 1) + ledger(1, BitMap().serialize()),
        struct.pack("<I", 1) + ledger(1, b"\xff" * 12),
        struct.pack("<I", 1) + header.pack(1, 1000) + one,
        struct.pack("<I", 3) + blob[4:],
    ]
    for data in bad:
        with pytest.raises(InvalidArgumentError):
            RangeSet.deserialize(data)
    assert RangeSet.deserialize(struct.pack("<I", 0)) == RangeSet()
    assert RangeSet.deserialize(blob) == good


def test_serialization_is_compact() -> None:
    runs = RangeSet()
    runs.add_range(1, 0, 49_999)
    assert len(runs.serialize()) < 40
    range_set = runs.copy()
    range_set.add_many(2, range(0, 50_000, 2))
    blob = range_set.serialize()
    assert len(blob) < 40 + 65_536 // 8 + 60
    assert RangeSet.deserialize(blob) == range_set


def test_equality_with_other_types() -> None:
    assert RangeSet() != set()
    assert RangeSet() == RangeSet()
    with pytest.raises(TypeError):
        hash(RangeSet())

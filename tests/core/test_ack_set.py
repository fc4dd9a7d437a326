"""Ack sets against a dumb reference: a Python set of acknowledged batch indexes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.errors import InvalidArgumentError, InvalidBatchIndexError

batch_sizes = st.integers(min_value=1, max_value=300)


@st.composite
def batch_and_acks(draw: st.DrawFn) -> tuple[int, set[int]]:
    batch_size = draw(batch_sizes)
    acked = draw(st.sets(st.integers(min_value=0, max_value=batch_size - 1)))
    return batch_size, acked


def reference_words(unacked: set[int]) -> list[int]:
    """``BitSet.toLongArray()`` computed bit by bit, the slow obvious way."""
    if not unacked:
        return []
    words = [0] * (max(unacked) // 64 + 1)
    for index in unacked:
        words[index // 64] |= 1 << (index % 64)
    return [word - (1 << 64) if word >= 1 << 63 else word for word in words]


def build(batch_size: int, acked: set[int], *, one_by_one: bool) -> int:
    bits = ack_set.full(batch_size)
    if one_by_one:
        for index in sorted(acked):
            bits = ack_set.ack(bits, index)
        return bits
    return ack_set.ack_many(bits, acked)


@settings(max_examples=300)
@given(batch_and_acks(), st.booleans())
def test_matches_reference(case: tuple[int, set[int]], one_by_one: bool) -> None:
    batch_size, acked = case
    bits = build(batch_size, acked, one_by_one=one_by_one)
    unacked = set(range(batch_size)) - acked

    assert bits == sum(1 << index for index in unacked)
    assert ack_set.unacked_count(bits) == len(unacked)
    assert ack_set.unacked_indexes(bits) == sorted(unacked)
    for index in range(batch_size + 70):
        assert ack_set.is_acked(bits, index) == (index not in unacked)
    assert (bits == 0) == (acked == set(range(batch_size)))


@settings(max_examples=200)
@given(batch_sizes, st.data())
def test_merge_is_and_of_acks(batch_size: int, data: st.DataObject) -> None:
    indexes = st.sets(st.integers(min_value=0, max_value=batch_size - 1))
    left_acked, right_acked = data.draw(indexes), data.draw(indexes)
    left = ack_set.ack_many(ack_set.full(batch_size), left_acked)
    right = ack_set.ack_many(ack_set.full(batch_size), right_acked)

    merged = ack_set.merge(left, right)

    assert merged == ack_set.merge(right, left)
    assert ack_set.merge(merged, left) == merged
    expected = set(range(batch_size)) - left_acked - right_acked
    assert ack_set.unacked_indexes(merged) == sorted(expected)


@settings(max_examples=300)
@given(batch_and_acks())
def test_words_round_trip(case: tuple[int, set[int]]) -> None:
    batch_size, acked = case
    bits = ack_set.ack_many(ack_set.full(batch_size), acked)
    words = ack_set.to_words(bits)

    assert words == reference_words(set(range(batch_size)) - acked)
    assert all(-(1 << 63) <= word < 1 << 63 for word in words)
    assert not words or words[-1] != 0
    assert ack_set.from_words(words) == bits
    assert ack_set.from_words([word & (2**64 - 1) for word in words]) == bits
    assert ack_set.from_words([*words, 0, 0]) == bits


@pytest.mark.parametrize(
    ("unacked", "words"),
    [
        (set(range(10)), [1023]),
        (set(range(64)), [-1]),
        ({64}, [0, 1]),
        ({63}, [-9223372036854775808]),
        (set(), []),
        (set(range(65)), [-1, 1]),
        ({0, 127}, [1, -9223372036854775808]),
    ],
)
def test_known_java_values(unacked: set[int], words: list[int]) -> None:
    bits = sum(1 << index for index in unacked)
    assert ack_set.to_words(bits) == words
    assert ack_set.from_words(words) == bits


def test_full() -> None:
    assert ack_set.full(1) == 1
    assert ack_set.full(10) == 1023
    assert ack_set.to_words(ack_set.full(64)) == [-1]


def test_ack_is_idempotent_and_ignores_indexes_beyond_the_batch() -> None:
    bits = ack_set.full(3)
    once = ack_set.ack(bits, 1)
    assert ack_set.ack(once, 1) == once == 0b101
    assert ack_set.ack(bits, 10**12) == bits
    assert ack_set.ack_many(bits, [5, 10**12]) == bits
    assert ack_set.ack_many(bits, []) == bits
    assert ack_set.ack_many(bits, iter([0, 2, 2])) == 0b010
    assert ack_set.ack_many(bits, range(3)) == 0


@pytest.mark.parametrize("batch_size", [0, -1])
def test_full_rejects_empty_batches(batch_size: int) -> None:
    with pytest.raises(InvalidArgumentError):
        ack_set.full(batch_size)


def test_negative_indexes_are_invalid_batch_indexes() -> None:
    bits = ack_set.full(4)
    with pytest.raises(InvalidBatchIndexError):
        ack_set.ack(bits, -1)
    with pytest.raises(InvalidBatchIndexError):
        ack_set.ack_many(bits, [1, -1])
    with pytest.raises(InvalidBatchIndexError):
        ack_set.is_acked(bits, -1)


def test_negative_ack_sets_are_rejected() -> None:
    for call in (
        lambda: ack_set.ack(-1, 0),
        lambda: ack_set.ack_many(-1, [0]),
        lambda: ack_set.is_acked(-1, 0),
        lambda: ack_set.merge(1, -1),
        lambda: ack_set.unacked_count(-1),
        lambda: ack_set.unacked_indexes(-1),
        lambda: ack_set.to_words(-1),
    ):
        with pytest.raises(InvalidArgumentError):
            call()


@pytest.mark.parametrize("words", [[2**64], [-(2**63) - 1], [0, 2**70], [1.5], ["1"]])
def test_from_words_rejects_non_64_bit_words(words: list[object]) -> None:
    with pytest.raises(InvalidArgumentError):
        ack_set.from_words(words)  # type: ignore[arg-type]


def test_from_words_accepts_both_ends_of_the_range() -> None:
    assert ack_set.from_words([-(2**63)]) == 1 << 63
    assert ack_set.from_words([2**64 - 1]) == 2**64 - 1
    assert ack_set.from_words([]) == 0
    assert ack_set.from_words((0, 0)) == 0


def test_large_sets_are_fast_enough() -> None:
    bits = ack_set.ack_many(ack_set.full(1_000_000), range(0, 1_000_000, 2))
    assert ack_set.unacked_count(bits) == 500_000
    assert ack_set.unacked_indexes(bits)[:3] == [1, 3, 5]
    assert ack_set.from_words(ack_set.to_words(bits)) == bits

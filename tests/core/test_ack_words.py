"""AckWords: a CommandAck's ack sets become the cursor delta and the acknowledged messages,
held equal to a plain model (Python sets of indexes per entry)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks import ack_set, cursor_codec
from cursorops.core.domain.acks.ack_words import MAX_BATCH_SIZE, AckWords
from cursorops.core.domain.acks.cursor import BatchAckSets, CursorState
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.position import Position

Row = tuple[int, int, int, list[int] | None]
"""(ledger, entry, batch size, the ack set's words as the wire gives them, or None)."""


@st.composite
def rows(draw: st.DrawFn) -> list[Row]:
    found: list[Row] = []
    for _ in range(draw(st.integers(0, 12))):
        ledger, entry = draw(st.integers(0, 2)), draw(st.integers(0, 3))
        size = draw(st.sampled_from([0, 1, 5, 63, 64, 65, 130]))
        words = None
        if size and draw(st.booleans()):
            unacked = draw(st.sets(st.integers(0, size + 70)))
            bits = sum(1 << i for i in unacked)
            words = ack_set.to_words(bits)
            # Trailing words are dropped by the client when zero; a client may send more.
            words += [0] * draw(st.integers(0, 1))
        found.append((ledger, entry, size, words))
    return found


def of(found: list[Row]) -> AckWords:
    return AckWords.of(
        [r[0] for r in found],
        [r[1] for r in found],
        [r[2] for r in found],
        [len(r[3] or []) for r in found],
        [w for r in found for w in r[3] or []],
    )


def model(found: list[Row]) -> tuple[CursorState, set[tuple[int, int, int]]]:
    """The delta and the acknowledged messages, one Python int per index."""
    size_of: dict[tuple[int, int], int] = {}
    acked: dict[tuple[int, int], set[int]] = {}
    whole: set[tuple[int, int]] = set()
    messages: set[tuple[int, int, int]] = set()
    for ledger, entry, size, words in found:
        key = (ledger, entry)
        size = size_of.setdefault(key, size)
        if size == 0:
            whole.add(key)
            messages.add((ledger, entry, -1))
            continue
        bits = ack_set.from_words(words) if words else 0
        these = {i for i in range(size) if not bits >> i & 1}
        acked.setdefault(key, set()).update(these)
        messages.update((ledger, entry, i) for i in these)
        if not words:
            whole.add(key)
    deleted = RangeSet()
    sets = BatchAckSets()
    for key, size in size_of.items():
        indexes = acked.get(key, set())
        if key in whole or len(indexes) == size:
            deleted.add(*key)
        elif indexes:
            sets[Position(*key)] = ack_set.ack_many(ack_set.full(size), indexes)
    return CursorState(individually_deleted=deleted, batch_acks=sets), messages


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(found=rows())
def test_the_words_are_the_per_index_acknowledgements(found: list[Row]) -> None:
    expected, messages = model(found)
    acks = of(found)
    delta = acks.delta()
    assert delta.to_state() == expected
    assert cursor_codec.encode_columns(delta) == cursor_codec.encode(expected)
    ledgers, entries, indexes = acks.acked()
    got = list(zip(ledgers.tolist(), entries.tolist(), indexes.tolist(), strict=True))
    assert set(got) == messages
    assert len(got) == len(set(got))


def test_signed_and_unsigned_words_are_the_same_bits() -> None:
    signed = of([(1, 2, 128, [-2, -1])]).delta().to_state()
    unsigned = of([(1, 2, 128, [2**64 - 2, 2**64 - 1])]).delta().to_state()
    assert signed == unsigned
    assert signed.batch_acks == {Position(1, 2): ack_set.ack(ack_set.full(128), 0)}


@pytest.mark.parametrize(
    ("sizes", "words"),
    [([MAX_BATCH_SIZE + 1], []), ([-1], []), ([5], [2**64]), ([5], [-(2**63) - 1])],
)
def test_hostile_acknowledgements_are_refused(sizes: list[int], words: list[int]) -> None:
    with pytest.raises(InvalidArgumentError):
        AckWords.of([1], [2], sizes, [len(words)], words)

"""``skip -n`` and ``clear-backlog`` select the head of the backlog by messages, not entries.

:func:`cursorops.core.domain.acks.head.head_messages` is held to a plain model: every message
of the partition in position order, kept where :meth:`CursorState.is_acked` says
it is unacknowledged, the first N of them.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.head import head_messages
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.acks.skip import SkipLookup
from cursorops.core.domain.ids.chunked_messages import ChunkedMessages
from cursorops.core.domain.ids.position import Position


def lookup_of(ledgers: list[list[int]]) -> SkipLookup:
    """Ledgers 10, 11, ... each with the given batch sizes per entry (0: not batched)."""
    rows = [(10 + n, e, size) for n, sizes in enumerate(ledgers) for e, size in enumerate(sizes)]
    return SkipLookup(
        layout=LedgerLayout.of((10 + n, len(sizes)) for n, sizes in enumerate(ledgers)),
        ledger_ids=np.array([r[0] for r in rows], dtype=np.int64),
        entry_ids=np.array([r[1] for r in rows], dtype=np.int64),
        batch_sizes=np.array([r[2] for r in rows], dtype=np.int64),
        deliver_at=np.full(len(rows), -1, dtype=np.int64),
    )


def messages(lookup: SkipLookup) -> list[tuple[int, int, int]]:
    out = []
    for ledger, entry, size in zip(
        lookup.ledger_ids.tolist(),
        lookup.entry_ids.tolist(),
        lookup.batch_sizes.tolist(),
        strict=True,
    ):
        out += [(ledger, entry, i) for i in range(size)] if size else [(ledger, entry, -1)]
    return out


def expanded(
    selection_ids: list[tuple[int, int, int]], lookup: SkipLookup
) -> list[tuple[int, int, int]]:
    size_of = {
        (led, ent): size
        for led, ent, size in zip(
            lookup.ledger_ids.tolist(),
            lookup.entry_ids.tolist(),
            lookup.batch_sizes.tolist(),
            strict=True,
        )
    }
    out = []
    for ledger, entry, index in selection_ids:
        size = size_of[(ledger, entry)]
        if index < 0 and size:
            out += [(ledger, entry, i) for i in range(size)]
        else:
            out.append((ledger, entry, index))
    return out


ledgers_strategy = st.lists(
    st.lists(st.sampled_from([0, 0, 1, 2, 3, 5]), min_size=0, max_size=6), min_size=1, max_size=3
)


@given(ledgers=ledgers_strategy, data=st.data())
@settings(max_examples=300, deadline=None)
def test_head_is_the_first_n_unacknowledged_messages(
    ledgers: list[list[int]], data: st.DataObject
) -> None:
    lookup = lookup_of(ledgers)
    every = messages(lookup)
    state = CursorState()
    layout = lookup.layout
    if every and data.draw(st.booleans(), "cumulative"):
        ledger, entry, index = data.draw(st.sampled_from(every), "mark")
        size = dict(((m[0], m[1]), 0) for m in every)
        for m in every:
            if m[2] >= 0:
                size[(m[0], m[1])] = max(size[(m[0], m[1])], m[2] + 1)
        state.acknowledge_cumulative(Position(ledger, entry), layout, index, size[(ledger, entry)])
    acked = data.draw(st.lists(st.sampled_from(every), unique=True), "acks") if every else []
    sizes = {}
    for m in every:
        sizes[(m[0], m[1])] = max(sizes.get((m[0], m[1]), 0), m[2] + 1)
    if acked:
        state.acknowledge(
            [AckTarget(Position(m[0], m[1]), m[2], sizes[(m[0], m[1])]) for m in acked], layout
        )
    limit = data.draw(st.one_of(st.none(), st.integers(0, len(every) + 2)), "limit")

    model = [m for m in every if not state.is_acked(Position(m[0], m[1]), m[2])]
    if limit is not None:
        model = model[:limit]

    got = head_messages(state, lookup, limit)
    ids = list(
        zip(got.ledger_id.tolist(), got.entry_id.tolist(), got.batch_index.tolist(), strict=True)
    )
    assert expanded(ids, lookup) == model
    assert got.messages == len(model)
    # A whole batch is named by its entry only when none of it was acknowledged.
    for ledger, entry, index in ids:
        if index < 0 and sizes[(ledger, entry)] > 0:
            assert not any(
                state.is_acked(Position(ledger, entry), i) for i in range(sizes[(ledger, entry)])
            )


def test_counts_messages_where_pulsar_counts_entries() -> None:
    # Three batches of 4: skip -n 6 takes the first batch whole and 2 of the second.
    lookup = lookup_of([[4, 4, 4]])
    got = head_messages(CursorState(), lookup, 6)
    ids = list(
        zip(got.ledger_id.tolist(), got.entry_id.tolist(), got.batch_index.tolist(), strict=True)
    )
    assert ids == [(10, 0, -1), (10, 1, 0), (10, 1, 1)]
    assert got.messages == 6


def test_no_limit_is_the_whole_backlog_and_zero_is_nothing() -> None:
    lookup = lookup_of([[0, 3], [2]])
    assert head_messages(CursorState(), lookup, None).messages == 6
    assert len(head_messages(CursorState(), lookup, 0)) == 0


# -- a chunked message is one message ------------------------------------------------------


@given(ledgers=ledgers_strategy, data=st.data())
@settings(max_examples=300, deadline=None)
def test_head_takes_a_chunked_message_whole_and_counts_it_once(
    ledgers: list[list[int]], data: st.DataObject
) -> None:
    lookup = lookup_of(ledgers)
    every = messages(lookup)
    plain = [m for m in every if m[2] < 0]
    # Some non-batched entries are the chunks of a few messages, interleaved; a message may
    # lack its last chunk (incomplete: its producer has not sent it yet).
    owners = data.draw(st.lists(st.sampled_from([None, 0, 1, 2]), min_size=len(plain)), "owners")
    members: dict[int, list[tuple[int, int, int]]] = {}
    for m, owner in zip(plain, owners, strict=False):
        if owner is not None:
            members.setdefault(owner, []).append(m)
    complete = {o: data.draw(st.booleans(), f"complete {o}") for o in members}
    rows = []
    for owner, chunks in members.items():
        size = len(chunks) + (0 if complete[owner] else 1)
        rows += [(m[0], m[1], f"u{owner}", i, size) for i, m in enumerate(chunks)]
    grouped = ChunkedMessages.of(
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [r[3] for r in rows],
        [r[4] for r in rows],
    )
    state = CursorState()
    acked = data.draw(st.lists(st.sampled_from(every), unique=True), "acks") if every else []
    sizes = {}
    for m in every:
        sizes[(m[0], m[1])] = max(sizes.get((m[0], m[1]), 0), m[2] + 1)
    if acked:
        state.acknowledge(
            [AckTarget(Position(m[0], m[1]), m[2], sizes[(m[0], m[1])]) for m in acked],
            lookup.layout,
        )
    limit = data.draw(st.one_of(st.none(), st.integers(0, len(every) + 2)), "limit")

    def live(m: tuple[int, int, int]) -> bool:
        return not state.is_acked(Position(m[0], m[1]), m[2])

    # The model: units in the order a consumer gets them (a chunked message at its last
    # chunk), each counting 1, a chunked message only when its last chunk is unacknowledged;
    # taken in order until N are counted.
    chunk_of = {m: o for o, chunks in members.items() for m in chunks}
    units = [(m, [m], 1) for m in every if m not in chunk_of and live(m)]
    for owner, chunks in members.items():
        if complete[owner] and any(map(live, chunks)):
            units.append((chunks[-1], [m for m in chunks if live(m)], int(live(chunks[-1]))))
    units.sort()
    model: list[tuple[int, int, int]] = []
    counted = 0
    for _, unit, count in units:
        if limit is not None and counted >= limit:
            break
        model += unit
        counted += count

    got = head_messages(state, lookup, limit, grouped)
    ids = list(
        zip(got.ledger_id.tolist(), got.entry_id.tolist(), got.batch_index.tolist(), strict=True)
    )
    assert sorted(expanded(ids, lookup)) == sorted(model)
    assert got.messages == counted
    for owner, chunks in members.items():
        taken = [m for m in chunks if m in set(model)]
        assert taken in ([], [m for m in chunks if live(m)]) and (complete[owner] or not taken)


def test_skip_n_counts_a_chunked_message_once_where_a_consumer_gets_it() -> None:
    # Entries: chunk 0 of A, plain X, chunk 1 (last) of A, plain Y.
    lookup = lookup_of([[0, 0, 0, 0]])
    grouped = ChunkedMessages.of([10, 10], [0, 2], ["a", "a"], [0, 1], [2, 2])

    def head(limit: int | None) -> list[int]:
        return head_messages(CursorState(), lookup, limit, grouped).entry_id.tolist()

    assert head(1) == [1]  # X: A is received after it, at its last chunk
    assert head(2) == [0, 1, 2]
    assert head_messages(CursorState(), lookup, 2, grouped).messages == 2
    assert head(None) == [0, 1, 2, 3]
    # Without its last chunk A is no message yet: clear-backlog leaves its chunk.
    partial = ChunkedMessages.of([10], [0], ["a"], [0], [2])
    assert head_messages(CursorState(), lookup, None, partial).entry_id.tolist() == [1, 2, 3]


def test_the_last_message_taken_ends_the_head_even_before_uncounted_chunks() -> None:
    """Exactly N messages live, then the live first chunk of a message whose last chunk is
    acknowledged (anchored at that last chunk, after them): N takes the N, not the chunk."""
    lookup = lookup_of([[0, 0, 0]])
    grouped = ChunkedMessages.of([10, 10], [1, 2], ["u", "u"], [0, 1], [2, 2])
    state = CursorState()
    state.acknowledge([AckTarget(Position(10, 2), -1, 0)], lookup.layout)
    got = head_messages(state, lookup, 1, grouped)
    assert list(zip(got.ledger_id.tolist(), got.entry_id.tolist(), strict=True)) == [(10, 0)]

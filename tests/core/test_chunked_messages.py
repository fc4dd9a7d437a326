"""Which entries are one chunked message: held to a plain model (a dict by uuid)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.ids.chunked_messages import ChunkedMessages, check_groups, count_once


@st.composite
def chunk_rows(draw: st.DrawFn) -> list[tuple[int, int, str | None, int, int]]:
    """Rows (ledger, entry, uuid, chunk id, chunks) in any order: a few messages' chunks
    interleaved with plain entries, some messages without their last chunk."""
    count = draw(st.integers(0, 4))
    sizes = [draw(st.integers(2, 4)) for _ in range(count)]
    stored = [draw(st.integers(1, size)) for size in sizes]
    owners = [m for m in range(count) for _ in range(stored[m])]
    owners += [None] * draw(st.integers(0, 5))
    owners = draw(st.permutations(owners))
    seen = [0] * count
    rows = []
    for n, owner in enumerate(owners):
        ledger, entry = 7 + n // 3, n % 3
        if owner is None:
            rows.append((ledger, entry, None, -1, 0))
        else:
            rows.append((ledger, entry, f"p-{owner}", seen[owner], sizes[owner]))
            seen[owner] += 1
    return draw(st.permutations(rows))


def grouped(rows: list[tuple[int, int, str | None, int, int]]) -> ChunkedMessages:
    return ChunkedMessages.of(
        [r[0] for r in rows],
        [r[1] for r in rows],
        pa.array([r[2] for r in rows], pa.string()),
        [r[3] for r in rows],
        [r[4] for r in rows],
    )


@given(rows=chunk_rows())
@settings(max_examples=300, deadline=None)
def test_messages_are_the_chunks_of_one_uuid(
    rows: list[tuple[int, int, str | None, int, int]],
) -> None:
    chunks = grouped(rows)
    model: dict[str, list[tuple[int, int, int, int]]] = {}
    for ledger, entry, uuid, chunk, total in sorted(rows):
        if uuid is not None:
            model.setdefault(uuid, []).append((ledger, entry, chunk, total))
    positions = list(zip(chunks.ledger_id.tolist(), chunks.entry_id.tolist(), strict=True))
    assert positions == sorted(p[:2] for members in model.values() for p in members)
    assert chunks.count == len(model)
    # Numbered by first chunk; each message's members are its uuid's, its last chunk found.
    firsts = sorted((members[0][:2], uuid) for uuid, members in model.items())
    for number, (_, uuid) in enumerate(firsts):
        members = model[uuid]
        mine = [p for p, m in zip(positions, chunks.message.tolist(), strict=True) if m == number]
        assert mine == [m[:2] for m in members]
        ends = [m[:2] for m in members if m[2] == m[3] - 1]
        last = int(chunks.last[number])
        assert (positions[last] if last >= 0 else None) == (ends[0] if ends else None)
        assert bool(chunks.complete[number]) == bool(ends)
        # Any one chunk names all of them.
        named = members[len(members) // 2][:2]
        whole = chunks.whole(np.array([named[0]]), np.array([named[1]]))
        assert list(zip(*(a.tolist() for a in whole), strict=True)) == [m[:2] for m in members]


def test_a_position_that_is_no_chunk_names_nothing() -> None:
    chunks = grouped([(1, 0, "u", 0, 2), (1, 1, None, -1, 0), (1, 2, "u", 1, 2)])
    assert chunks.index_of(np.array([1, 1, 2]), np.array([1, 2, 0])).tolist() == [-1, 1, -1]
    ledgers, entries = chunks.whole(np.array([1]), np.array([1]))
    assert ledgers.size == entries.size == 0
    assert chunks.last.tolist() == [1]


@given(rows=chunk_rows(), data=st.data())
@settings(max_examples=300, deadline=None)
def test_a_list_of_ids_counts_each_chunked_message_once(
    rows: list[tuple[int, int, str | None, int, int]], data: st.DataObject
) -> None:
    """Any list of positions (some twice over none, some not stored), with any flags: the
    count is the number of distinct messages flagged, a chunked message by its uuid."""
    chunks = grouped(rows)
    uuid_of = {(r[0], r[1]): r[2] for r in rows}
    stored = sorted(uuid_of)
    listed = data.draw(st.lists(st.sampled_from([*stored, (99, 0)]), unique=True))
    flags = data.draw(st.lists(st.booleans(), min_size=len(listed), max_size=len(listed)))
    groups = chunks.groups([p[0] for p in listed], [p[1] for p in listed])
    model = {uuid_of.get(p) or ("plain", p) for p, flag in zip(listed, flags, strict=True) if flag}
    assert count_once(flags, groups) == len(model)
    assert count_once([True] * len(listed), groups) == len(
        {uuid_of.get(p) or ("plain", p) for p in listed}
    )
    # The one spelling a plan stores them in reads back as it is.
    assert check_groups([list(g) for g in groups], len(listed)) == groups


def test_groups_name_indexes_into_the_positions_given() -> None:
    chunks = grouped(
        [(1, 0, "u", 0, 3), (1, 1, None, -1, 0), (1, 2, "u", 1, 3), (1, 3, "u", 2, 3)]
        + [(1, 4, "v", 0, 2), (1, 5, "v", 1, 2)]
    )
    # Listed as a skip's record lists them: u's last chunk, then x, u's first, v's first alone.
    groups = chunks.groups(np.array([1, 1, 1, 1, 1]), np.array([3, 1, 0, 4, 2]))
    assert groups == ((0, 2, 4),)
    assert count_once([True] * 5, groups) == 3
    assert count_once([False, True, True, False, False], groups) == 2
    assert grouped([]).groups(np.array([1]), np.array([0])) == ()

"""Skip validation over arrays against the per-id rules written plainly.

:func:`cursorops.core.domain.acks.skip.validate` routes, range-checks, looks up and deduplicates ids
with numpy, and decides "already acknowledged" with
:meth:`CursorState.acked_many` (mark-delete compare, ``RangeSet.contains_many``,
ack-set bits). The model below is the per-id code it replaced, written as
plainly as possible: every id is checked in turn, and the answer (the items,
or the error class and its whole message) must be the same. Random ledgers,
entry indexes (some entries missing from the index), cursors (not normalised,
ack sets wider than 64 bits) and ids with the edge values: negative, 2**32,
the int64 and int32 bounds, batch index -1, -2, the batch size and beyond.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks import ack_set, cursor_codec
from cursorops.core.domain.acks.cursor import AckColumns, AckTarget, BatchAckSets, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.acks.skip import (
    MAX_ERRORS_LISTED,
    IdArrays,
    SkipLookup,
    SkipOutcome,
    _first_of_each,
    has_repeats,
    validate,
)
from cursorops.core.domain.acks.skip_plan import PlannedSkip, SkipColumns, SkipPlan
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    EntryNotFoundError,
    InvalidArgumentError,
    InvalidBatchIndexError,
    InvalidMessageIdError,
    PositionOutOfRangeError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
EDGE_IDS = [INT64_MIN, -2, -1, 0, 2**32 - 1, 2**32, 2**32 + 1, INT64_MAX]
EDGE_INDEXES = [INT32_MIN, -2, -1, 0, 63, 64, 65, INT32_MAX]
BATCH_SIZES = [0, 0, 1, 3, 10, 70]
"""0 = not batched; 70 makes ack sets wider than one 64-bit word."""


@dataclass
class Partition:
    name: str
    index: int
    layout: LedgerLayout
    lookup: SkipLookup
    state: CursorState


# -- the plain model: the per-id rules, one id at a time --------------------------


def named(mid: MessageId) -> str:
    text = f"{mid.ledger_id}:{mid.entry_id}"
    return text if mid.batch_index == -1 else f"{text}:{mid.batch_index}"


def model_is_acked(state: CursorState, ledger: int, entry: int, batch_index: int) -> bool:
    if (ledger, entry) <= tuple(state.mark_delete):
        return True
    bits = state.individually_deleted.bitmap(ledger)
    if 0 <= entry < 2**32 and entry in bits:
        return True
    if batch_index < 0:
        return False
    ack_set = state.batch_acks.get(Position(ledger, entry))
    return ack_set is not None and not (ack_set >> batch_index) & 1


def model_validate(
    ids: list[MessageId], partitions: list[Partition]
) -> list[PlannedSkip] | tuple[type[Exception], str]:
    owners = {ledger: p for p in partitions for ledger, _ in zip(*_ledgers(p.layout), strict=True)}
    problems: list[tuple[type[Exception], str]] = []
    routed: dict[str, list[tuple[MessageId, Partition]]] = {}
    for mid in ids:
        if mid.ledger_id < 0 or mid.entry_id < 0:
            problems.append(
                (InvalidMessageIdError, f"{named(mid)}: ledgerId and entryId must be >= 0")
            )
            continue
        if mid.partition < -1:
            problems.append(
                (InvalidMessageIdError, f"{named(mid)}: partition {mid.partition} is not valid")
            )
            continue
        owner = owners.get(mid.ledger_id)
        if owner is None:
            if mid.ledger_id > max(owners, default=-1):
                problems.append(
                    (PositionOutOfRangeError, f"{named(mid)}: beyond the last entry of the topic")
                )
            else:
                problems.append(
                    (EntryNotFoundError, f"{named(mid)}: no ledger {mid.ledger_id} in this topic")
                )
            continue
        if mid.partition >= 0 and mid.partition != owner.index:
            problems.append(
                (
                    InvalidMessageIdError,
                    f"{named(mid)}: carries partition {mid.partition}, but ledger "
                    f"{mid.ledger_id} belongs to partition {owner.index}",
                )
            )
            continue
        routed.setdefault(owner.name, []).append((mid, owner))
    seen: set[tuple[int, int, int]] = set()
    items: list[PlannedSkip] = []
    for name, group in routed.items():
        candidates = []
        for mid, owner in group:
            held = owner.layout.entries_of(mid.ledger_id)
            last = owner.layout.last_position
            if mid.entry_id < held:
                candidates.append((mid, owner))
            elif mid.position > last:
                problems.append(
                    (PositionOutOfRangeError, f"{named(mid)}: beyond the last entry {last}")
                )
            else:
                problems.append(
                    (
                        EntryNotFoundError,
                        f"{named(mid)}: no such entry, ledger {mid.ledger_id} holds {held} "
                        f"entries (0 to {held - 1})",
                    )
                )
        for mid, owner in candidates:
            lookup = owner.lookup
            rows = {
                (int(led), int(ent)): row
                for row, (led, ent) in enumerate(
                    zip(lookup.ledger_ids, lookup.entry_ids, strict=True)
                )
            }
            row = rows.get((mid.ledger_id, mid.entry_id))
            if row is None:
                problems.append((EntryNotFoundError, f"{named(mid)}: no such entry"))
                continue
            size = int(lookup.batch_sizes[row])
            b = mid.batch_index
            if b < -1:
                problems.append(
                    (
                        InvalidBatchIndexError,
                        f"Invalid batchIndex: {b}, batchSize={size} (entry {mid.position})",
                    )
                )
                continue
            if b >= 0 and size == 0:
                problems.append(
                    (
                        InvalidBatchIndexError,
                        f"Invalid batchIndex: {b}, entry {mid.position} is not batched",
                    )
                )
                continue
            if b >= size > 0:
                problems.append(
                    (InvalidBatchIndexError, f"Invalid batchIndex: {b}, batchSize={size}")
                )
                continue
            if (mid.ledger_id, mid.entry_id, b) in seen:
                continue
            seen.add((mid.ledger_id, mid.entry_id, b))
            deliver_at = int(lookup.deliver_at[row])
            items.append(
                PlannedSkip(
                    name,
                    owner.index,
                    mid.ledger_id,
                    mid.entry_id,
                    b,
                    size,
                    deliver_at if deliver_at >= 0 else None,
                    model_is_acked(owner.state, mid.ledger_id, mid.entry_id, b),
                )
            )
    if problems:
        shown = [text for _, text in problems[:MAX_ERRORS_LISTED]]
        more = len(problems) - len(shown)
        return problems[0][0], "Nothing skipped: " + "; ".join(shown) + (
            f"; and {more} more" if more else ""
        )
    return items


def _ledgers(layout: LedgerLayout) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return layout.ledger_ids, layout.entries


# -- random topics, cursors and ids -----------------------------------------------


@st.composite
def topics(draw: st.DrawFn) -> list[Partition]:
    count = draw(st.integers(1, 3))
    partitioned = count > 1 or draw(st.booleans())
    ledger_pool = draw(
        st.lists(
            st.one_of(st.integers(0, 40), st.sampled_from([2**32 - 1, 2**32, 2**40])),
            min_size=count,
            max_size=8,
            unique=True,
        )
    )
    ledger_pool.sort()
    owner_of = [draw(st.integers(0, count - 1)) for _ in ledger_pool]
    partitions = []
    for p in range(count):
        ledgers = [led for led, o in zip(ledger_pool, owner_of, strict=True) if o == p]
        entries = [draw(st.integers(0, 6)) for _ in ledgers]
        layout = LedgerLayout.of(zip(ledgers, entries, strict=True))
        index_rows = [
            (led, ent, draw(st.sampled_from(BATCH_SIZES)), draw(st.sampled_from([-1, -1, 0, 99])))
            for led, n in zip(ledgers, entries, strict=True)
            for ent in range(n)
            if draw(st.integers(0, 9)) > 0  # now and then the index lacks an entry
        ]
        lookup = SkipLookup(
            layout=layout,
            ledger_ids=np.array([r[0] for r in index_rows], dtype=np.int64),
            entry_ids=np.array([r[1] for r in index_rows], dtype=np.int64),
            batch_sizes=np.array([r[2] for r in index_rows], dtype=np.int64),
            deliver_at=np.array([r[3] for r in index_rows], dtype=np.int64),
        )
        positions = [
            (led, ent) for led, n in zip(ledgers, entries, strict=True) for ent in range(n + 2)
        ]
        partitions.append(
            Partition(
                name=f"persistent://t/n/x-partition-{p}" if partitioned else "persistent://t/n/x",
                index=p if partitioned else -1,
                layout=layout,
                lookup=lookup,
                state=draw(states(positions)),
            )
        )
    return partitions


@st.composite
def states(draw: st.DrawFn, positions: list[tuple[int, int]]) -> CursorState:
    """Any cursor, normalised or not: mark-delete, individually deleted, ack sets."""
    mark = draw(st.sampled_from([(-1, -1), *positions])) if positions else (-1, -1)
    deleted = RangeSet()
    for led, ent in draw(st.lists(st.sampled_from(positions), max_size=8)) if positions else []:
        deleted.add(led, ent)
    acks = BatchAckSets()
    for led, ent in draw(st.lists(st.sampled_from(positions), max_size=6)) if positions else []:
        acks[Position(led, ent)] = draw(st.integers(0, 2**80))
    return CursorState(Position(*mark), deleted, acks)


@st.composite
def id_lists(draw: st.DrawFn, partitions: list[Partition]) -> list[MessageId]:
    real = [
        (int(led), int(ent), p.index, int(size))
        for p in partitions
        for led, ent, size in zip(
            p.lookup.ledger_ids, p.lookup.entry_ids, p.lookup.batch_sizes, strict=True
        )
    ]
    ledgers = [led for p in partitions for led in p.layout.ledger_ids]
    ids: list[MessageId] = []
    if real and draw(st.booleans()):
        # Only valid ids, so that half the examples get past validation.
        for led, ent, part, size in draw(st.lists(st.sampled_from(real), max_size=25)):
            index = draw(st.sampled_from([-1, *range(size)]))
            ids.append(MessageId(led, ent, draw(st.sampled_from([-1, part])), index))
    for _ in range(draw(st.integers(0, 25)) if not ids else 0):
        kind = draw(st.integers(0, 4))
        if real and kind <= 2:
            led, ent, part, size = draw(st.sampled_from(real))
            index = draw(st.sampled_from([-1, -1, 0, size - 1, size, *EDGE_INDEXES]))
            partition = draw(st.sampled_from([-1, part, part, part + 1]))
            ids.append(MessageId(led, ent, max(partition, -1), max(index, INT32_MIN)))
        else:
            led = draw(st.sampled_from([*ledgers, *EDGE_IDS, 41]))
            ent = draw(st.sampled_from([0, 1, 5, 6, 7, *EDGE_IDS]))
            partition = draw(st.sampled_from([-1, -2, 0, 1, INT32_MIN, INT32_MAX]))
            index = draw(st.sampled_from(EDGE_INDEXES))
            ids.append(MessageId(led, ent, partition, index))
    if ids and draw(st.booleans()):
        ids += draw(st.lists(st.sampled_from(ids), max_size=5))  # repeats
    return ids


# -- the properties ---------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_validate_answers_as_the_per_id_rules(data: st.DataObject) -> None:
    partitions = data.draw(topics())
    ids = data.draw(id_lists(partitions))
    owners = {ledger: (p.name, p.index) for p in partitions for ledger in p.layout.ledger_ids}
    expected = model_validate(ids, partitions)
    facts = {p.name: p.lookup for p in partitions}
    states = {p.name: p.state for p in partitions}
    if isinstance(expected, tuple):
        kind, message = expected
        with pytest.raises(kind) as caught:
            validate(IdArrays.of(ids), owners, facts, states)
        assert type(caught.value) is kind and str(caught.value) == message
        return
    selection = validate(IdArrays.of(ids), owners, facts, states)
    assert list(selection.columns.items()) == expected
    assert [ids[i].position for i in selection.source.tolist()] == [
        Position(i.ledger_id, i.entry_id) for i in expected
    ]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_acked_many_is_is_acked_per_message(data: st.DataObject) -> None:
    partitions = data.draw(topics())
    state = partitions[0].state
    positions = [
        (led, ent)
        for led, n in zip(*_ledgers(partitions[0].layout), strict=True)
        for ent in range(n + 2)
    ]
    asked = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from([*[p[0] for p in positions], *EDGE_IDS]),
                st.sampled_from([*[p[1] for p in positions], *EDGE_IDS]),
                st.sampled_from([-1, 0, 1, 2, 63, 64, 69, 70, 200, INT32_MAX]),
            ),
            max_size=30,
        )
    )
    ledgers = np.array([a[0] for a in asked], dtype=np.int64)
    entries = np.array([a[1] for a in asked], dtype=np.int64)
    indexes = np.array([a[2] for a in asked], dtype=np.int64)
    got = state.acked_many(ledgers, entries, indexes).tolist()
    assert got == [model_is_acked(state, *a) for a in asked]
    assert got == [state.is_acked(Position(a[0], a[1]), a[2]) for a in asked]
    contains = state.individually_deleted.contains_many(ledgers, entries).tolist()
    assert contains == [state.individually_deleted.contains(a[0], a[1]) for a in asked]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_plan_of_columns_hashes_and_round_trips_as_its_items(data: st.DataObject) -> None:
    """The plan id written from the arrays is the SHA-256 of json.dumps of the items' dicts."""
    names = data.draw(
        st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=3, unique=True)
    )
    items = data.draw(
        st.lists(
            st.builds(
                PlannedSkip,
                st.sampled_from(names),
                st.integers(-1, INT32_MAX),
                st.integers(0, INT64_MAX),
                st.integers(0, INT64_MAX),
                st.integers(-1, INT32_MAX),
                st.integers(0, INT32_MAX),
                st.one_of(st.none(), st.integers(0, INT64_MAX)),
                st.booleans(),
            ),
            max_size=12,
        )
    )
    plan = SkipPlan(
        data.draw(st.text(min_size=1)),
        data.draw(st.text(min_size=1)),
        items,
        data.draw(st.integers(0, INT64_MAX)),
        data.draw(st.one_of(st.none(), st.text(min_size=1))),
    )
    assert plan.items == tuple(items)
    body = {
        "format": 1,
        "topic": plan.topic,
        "subscription": plan.subscription,
        "plannedAt": plan.planned_at_ms,
        "partOf": plan.part_of,
        "items": [i.to_json() for i in items],
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    assert plan.plan_id == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert SkipPlan.from_json(plan.dumps()) == plan
    assert SkipPlan.from_json(json.dumps(plan.to_json())) == plan
    assert plan.to_json()["items"] == body["items"]
    assert plan.message_ids() == [i.message_id for i in items]
    assert [m.batch_size for m in plan.message_ids()] == [i.batch_size for i in items]


# -- the apply path: acknowledgements, their encoding and the outcome from arrays --------


def model_ack_delta(rows: list[tuple[int, int, int, int]]) -> CursorState:
    """The per-id rule: each row acknowledges its entry (index -1) or clears its index in
    an ack set whose size the entry's first batch-index row gives."""
    state = CursorState()
    sets: dict[Position, int] = {}
    for ledger, entry, index, size in rows:
        if index < 0:
            state.individually_deleted.add(ledger, entry)
            continue
        if not 0 <= index < size:
            raise InvalidBatchIndexError(f"Invalid batchIndex: {index}, batchSize={size}")
        position = Position(ledger, entry)
        sets[position] = sets.get(position, (1 << size) - 1) & ~(1 << index)
    for position, bits in sets.items():
        if bits:
            state.batch_acks[position] = bits
        else:
            state.individually_deleted.add(*position)
    return state


def model_encode(state: CursorState, replace: bool = False) -> bytes:
    """The cursor record as the codec wrote it one batch entry at a time (CUR1)."""
    deleted = state.individually_deleted.serialize()
    parts = [
        struct.pack("<4sBqqI", b"CUR1", int(replace), *state.mark_delete, len(deleted)),
        deleted,
        struct.pack("<I", len(state.batch_acks)),
    ]
    for position, bits in sorted(state.batch_acks.items()):
        words = ack_set.to_words(bits)
        parts.append(struct.pack("<qqI", position.ledger_id, position.entry_id, len(words)))
        parts.append(struct.pack(f"<{len(words)}q", *words))
    return b"".join(parts)


ACK_SIZES = [0, 1, 3, 10, 63, 64, 65, 130]
"""0 = not batched; 64 fills a word exactly, 65 and 130 spill into more words."""


@st.composite
def ack_rows(draw: st.DrawFn, valid: bool = True) -> list[tuple[int, int, int, int]]:
    """Rows (ledger, entry, batch index, batch size) on a few entries, repeats included;
    an entry's rows may give different sizes (the first one counts)."""
    rows = []
    for _ in range(draw(st.integers(0, 40))):
        ledger = draw(st.sampled_from([0, 1, 7, 2**40]))
        entry = draw(st.sampled_from([0, 1, 2, 5, 2**32 - 1]))
        size = draw(st.sampled_from(ACK_SIZES))
        whole = size == 0 or draw(st.integers(0, 3)) == 0
        index = -1 if whole else draw(st.integers(0, size - 1))
        if not valid and draw(st.integers(0, 9)) == 0:
            index = draw(st.sampled_from([size, size + 64, 200]))
        rows.append((ledger, entry, index, size))
    return rows


def columns_of(rows: list[tuple[int, int, int, int]]) -> AckColumns:
    return AckColumns.of(*(np.array([r[k] for r in rows], dtype=np.int64) for k in range(4)))


@settings(max_examples=200, deadline=None)
@given(rows=ack_rows(valid=False))
def test_ack_columns_are_the_per_id_acknowledgements(
    rows: list[tuple[int, int, int, int]],
) -> None:
    """AckColumns.of is ack_delta of one target per row: same delta, same error, same bytes."""
    try:
        expected = model_ack_delta(rows)
    except InvalidBatchIndexError as exc:
        with pytest.raises(InvalidBatchIndexError) as raised:
            columns_of(rows)
        assert str(raised.value) == str(exc)
        with pytest.raises(InvalidBatchIndexError):
            CursorState.ack_delta(AckTarget(Position(r[0], r[1]), r[2], r[3]) for r in rows)
        return
    got = columns_of(rows)
    assert got.to_state() == expected
    assert CursorState.ack_delta(AckTarget(Position(r[0], r[1]), r[2], r[3]) for r in rows) == (
        expected
    )
    assert len(got) == len(expected.individually_deleted) + len(expected.batch_acks)
    payload = cursor_codec.encode_columns(got)
    assert payload == model_encode(expected)
    assert cursor_codec.decode(payload) == (expected, False)
    assert cursor_codec.encode_columns(got, replace=True) == model_encode(expected, True)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    rows=ack_rows(),
    mark=st.sampled_from([(-1, -1), (0, 3), (7, 0), (2**40, 2**32 - 1)]),
    replace=st.booleans(),
)
def test_encode_writes_the_record_the_per_entry_encoder_wrote(
    rows: list[tuple[int, int, int, int]], mark: tuple[int, int], replace: bool
) -> None:
    """encode is byte for byte the old encoder on both its paths (records packed one by one
    for a few batch ack sets, from arrays beyond), and every record the old encoder wrote
    decodes to its state."""
    state = model_ack_delta(rows)
    state.mark_delete = Position(*mark)
    payload = model_encode(state, replace)
    assert cursor_codec.encode(state, replace=replace) == payload
    with mock.patch.object(cursor_codec, "_FEW", -1):
        assert cursor_codec.encode(state, replace=replace) == payload
    assert cursor_codec.decode(payload) == (state, replace)


@settings(max_examples=200, deadline=None)
@given(
    existing=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**32 - 1)), max_size=10),
    positions=st.lists(
        st.tuples(
            st.sampled_from([INT64_MIN, -1, 0, 1, 5, 2**40, INT64_MAX]),
            st.sampled_from([INT64_MIN, -1, 0, 1, 7, 2**32 - 1, 2**32, INT64_MAX]),
        ),
        max_size=20,
    ),
)
def test_range_set_add_positions_is_add_of_each(
    existing: list[tuple[int, int]], positions: list[tuple[int, int]]
) -> None:
    """add_positions adds what add of each position adds; a bad one raises add's error
    (the first bad position's) and changes nothing."""
    expected = RangeSet()
    for position in existing:
        expected.add(*position)
    got = expected.copy()
    ledgers = np.array([p[0] for p in positions], dtype=np.int64)
    entries = np.array([p[1] for p in positions], dtype=np.int64)
    try:
        for position in positions:
            expected.add(*position)
    except InvalidArgumentError as exc:
        before = got.copy()
        with pytest.raises(InvalidArgumentError) as raised:
            got.add_positions(ledgers, entries)
        assert str(raised.value) == str(exc)
        assert got == before
        return
    got.add_positions(ledgers, entries)
    assert got == expected
    assert list(got) == sorted(set(positions) | set(existing))


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(
        st.tuples(
            st.sampled_from([0, 1, 2**40, INT64_MIN, INT64_MAX]),
            st.sampled_from([0, 3, 2**32, -5]),
            st.sampled_from([-1, 0, 1, INT32_MAX]),
        ),
        max_size=30,
    )
)
def test_first_of_each_keeps_the_first_occurrence_of_each_message(
    keys: list[tuple[int, int, int]],
) -> None:
    """The packed-key path and the lexsort path (spans over 63 bits) both find each distinct
    message's first place, in order."""
    first: dict[tuple[int, int, int], int] = {}
    for place, key in enumerate(keys):
        first.setdefault(key, place)
    columns = [np.array([k[i] for k in keys], dtype=np.int64) for i in range(3)]
    assert _first_of_each(*columns).tolist() == sorted(first.values())
    assert has_repeats(*columns) == (len(first) < len(keys))


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_an_outcome_of_rows_is_the_outcome_of_their_ids(data: st.DataObject) -> None:
    """Built from plan rows, an outcome's lists, JSON, equality and repr are those of the
    same outcome built from MessageId lists."""
    items = data.draw(
        st.lists(
            st.builds(
                PlannedSkip,
                st.sampled_from(["p-0", "p-1"]),
                st.integers(-1, 3),
                st.integers(0, INT64_MAX),
                st.integers(0, INT64_MAX),
                st.integers(-1, 70),
                st.integers(0, 71),
                st.none(),
                st.booleans(),
            ),
            max_size=10,
        )
    )
    columns = SkipColumns.of_items(items)
    cut = data.draw(st.integers(0, len(items)))
    parts = [np.arange(cut, dtype=np.int64), np.arange(cut, len(items), dtype=np.int64)]
    lazy = SkipOutcome(
        "t", "s", "id", columns.take(parts[0]), columns.take(parts[1]), [], {"p-0": cut}, None
    )
    ids = [i.message_id for i in items]
    eager = SkipOutcome("t", "s", "id", ids[:cut], ids[cut:], [], {"p-0": cut}, None)
    assert lazy.to_pulsar_json() == eager.to_pulsar_json()
    assert lazy.to_pulsar_json()["skipped"] == [m.triplet() for m in ids[:cut]]
    assert lazy.to_pulsar_json(MessageId.to_base64) == eager.to_pulsar_json(MessageId.to_base64)
    assert lazy == eager and repr(lazy) == repr(eager)
    assert lazy.skipped == ids[:cut] and lazy.already_acknowledged == ids[cut:]
    assert [m.batch_size for m in lazy.skipped] == [i.batch_size for i in items[:cut]]
    with pytest.raises(AttributeError):
        lazy.plan_id = "other"  # type: ignore[misc]


def test_the_entry_index_is_read_again_only_for_segments_it_has_not_seen(
    tmp_config: Config,
) -> None:
    """Kept per segment: equal to a fresh read after more appends, and a segment file
    replaced under the same name is read again."""
    with Broker(tmp_config) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", "persistent://acme/ops/t")
        name = TopicName.parse("persistent://acme/ops/t")

        def fresh() -> list[list[int]]:
            table = broker.ledgers.read_table(name)
            first = np.asarray(table["batch_index"]) <= 0
            return [
                np.asarray(table[column])[first].tolist()
                for column in ("ledger_id", "entry_id", "batch_size", "publish_time")
            ]

        def cached() -> list[list[int]]:
            index = broker.ledgers.entry_index(name)
            return [
                index.ledger_id.tolist(),
                index.entry_id.tolist(),
                index.batch_size.tolist(),
                index.publish_time.tolist(),
            ]

        broker.producing.produce(
            "admin", "persistent://acme/ops/t", [OutgoingMessage(b"a")] * 6, batch_size=3
        )
        assert cached() == fresh()
        broker.producing.produce("admin", "persistent://acme/ops/t", [OutgoingMessage(b"b")] * 4)
        assert cached() == fresh() and len(cached()[0]) == 6
        segment = broker.ledgers.segment_paths(name)[0]
        table = pq.read_table(segment)
        # The same rows with the first entry's batch size changed, written in place.
        sizes = table["batch_size"].to_pylist()
        sizes[0] = 9
        rewritten = table.set_column(
            table.schema.get_field_index("batch_size"), "batch_size", pa.array(sizes, pa.int32())
        )
        pq.write_table(rewritten, segment)
        assert cached()[2][0] == 9

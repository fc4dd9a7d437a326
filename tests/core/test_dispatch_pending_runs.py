"""Pending messages stored as runs, against a plain model: one dict entry per message.

The store keeps a dispatch's messages as runs (cursorops.core.store.pending_runs): every
operation of the dispatcher's pending-ack set (record, take again, release all
/ some / one partition's, acknowledge, cumulative drop) must leave exactly the
pending set, holders, redelivery counts and key hashes that a per-message
dict says, and a lookup by position range must find every pending message in
it, whichever run holds it (runs span up to RUN_SPAN_ENTRIES entries, so the
positions here cross that bound).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.acks.cursor_codec import encode
from cursorops.core.domain.delivery.redelivery import Release
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.store.dispatch_state import (
    DispatchedColumns,
    PendingInfo,
    SubscriptionTransaction,
)
from cursorops.core.store.metadata import MetadataStore
from cursorops.core.store.pending_runs import RUN_SPAN_ENTRIES, Members, decode, runs_of
from cursorops.core.store.pending_runs import encode as encode_members

TOPIC = "persistent://acme/ops/runs"
PARTITIONS = [f"{TOPIC}-partition-0", f"{TOPIC}-partition-1"]
CONSUMERS = ["a", "b", "c"]
ENTRIES = [0, 1, 2, 3, 7, RUN_SPAN_ENTRIES - 1, RUN_SPAN_ENTRIES, RUN_SPAN_ENTRIES + 5, 9_000]
"""Entry ids on both sides of the run span bound."""

WINDOWS = [((3, 0), (3, 7)), ((3, RUN_SPAN_ENTRIES), (4, 2)), ((4, 3), (4, 9_000))]
"""Position ranges looked up after every operation."""

Key = tuple[str, int, int, int]

COUNTED = {Release.NEGATIVE_ACK, Release.REDELIVER}
"""The reasons that bump a redelivery count, written out here as the model's own rule."""

positions = st.tuples(
    st.sampled_from(PARTITIONS),
    st.sampled_from([3, 4]),
    st.sampled_from(ENTRIES),
    st.integers(-1, 3),
)
some_keys = st.lists(positions, max_size=12, unique=True)
operation = st.one_of(
    st.tuples(st.just("dispatch"), st.sampled_from(CONSUMERS), some_keys),
    st.tuples(st.just("release"), st.sampled_from(CONSUMERS), st.none()),
    st.tuples(st.just("release_keys"), st.sampled_from(CONSUMERS), some_keys),
    st.tuples(
        st.just("release_partition"), st.sampled_from(CONSUMERS), st.sampled_from(PARTITIONS)
    ),
    st.tuples(st.just("ack"), st.none(), some_keys),
    st.tuples(st.just("ack_columns"), st.sampled_from(PARTITIONS), some_keys),
    st.tuples(st.just("drop_through"), st.none(), positions),
)


@dataclass
class Model:
    """The pending set, one entry per message: key -> (holder or None, redelivery, key hash)."""

    pending: dict[Key, PendingInfo]

    def dispatch(self, consumer: str, keys: list[Key]) -> list[tuple[Key, int, bool]]:
        """The keys a dispatch may take (free or released), with their counts, in order."""
        taken = []
        for key in sorted(keys):
            info = self.pending.get(key)
            if info is None:
                taken.append((key, 0, False))
            elif info.consumer_id is None:
                taken.append((key, info.redelivery_count, True))
        for key, count, _ in taken:
            self.pending[key] = PendingInfo(consumer, count, _hash(key))
        return taken

    def release(
        self, consumer: str, keys: list[Key] | None, partition: str | None, reason: Release
    ) -> None:
        """A release bumps the count only for a reason that counts (a consumer asked)."""
        for key, info in list(self.pending.items()):
            if info.consumer_id != consumer:
                continue
            if keys is not None and key not in keys:
                continue
            if partition is not None and key[0] != partition:
                continue
            bumped = info.redelivery_count + (1 if reason in COUNTED else 0)
            self.pending[key] = PendingInfo(None, bumped, info.key_hash)

    def drop(self, keys: list[Key]) -> None:
        for key in keys:
            self.pending.pop(key, None)

    def drop_through(self, partition: str, ledger: int, entry: int, index: int) -> None:
        bound = (ledger, entry, index if index >= 0 else 2**31 - 1)
        for key in list(self.pending):
            if key[0] == partition and key[1:] <= bound:
                del self.pending[key]


def _hash(key: Key) -> int:
    """A key hash per message, as Key_Shared records them (0..65535)."""
    return (key[2] * 31 + key[3] + 7) % 65536


_names = itertools.count()


@pytest.fixture
def store(metadata_url: str) -> Iterator[MetadataStore]:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
        store.create_namespace("acme/ops")
        store.create_topic(TOPIC, 2)
        yield store


def _subscribe(store: MetadataStore) -> str:
    name = f"s{next(_names)}"
    snapshot = encode(CursorState())
    store.create_subscription(
        TOPIC, name, SubscriptionType.KEY_SHARED, {}, {p: snapshot for p in PARTITIONS}
    )
    return name


def _columns(consumer: str, taken: list[tuple[Key, int, bool]]) -> DispatchedColumns:
    return DispatchedColumns(
        consumer,
        np.array([k[1] for k, _, _ in taken], np.int64),
        np.array([k[2] for k, _, _ in taken], np.int64),
        np.array([k[3] for k, _, _ in taken], np.int64),
        np.array([count for _, count, _ in taken], np.int64),
        np.array([again for _, _, again in taken], np.bool_),
        np.array([_hash(k) for k, _, _ in taken], np.int64),
    )


def _apply(
    txn: SubscriptionTransaction,
    model: Model,
    op: tuple[str, object, object],
    reason: Release = Release.NEGATIVE_ACK,
) -> None:
    kind, who, what = op
    if kind == "dispatch":
        assert isinstance(who, str) and isinstance(what, list)
        taken = model.dispatch(who, what)
        for partition in PARTITIONS:
            mine = [t for t in taken if t[0][0] == partition]
            if mine:
                txn.record_dispatched(partition, _columns(who, mine))
    elif kind == "release":
        assert isinstance(who, str)
        model.release(who, None, None, reason)
        txn.release(who, reason=reason)
    elif kind == "release_keys":
        assert isinstance(who, str) and isinstance(what, list)
        model.release(who, what, None, reason)
        txn.release(who, what, reason=reason)
    elif kind == "release_partition":
        assert isinstance(who, str) and isinstance(what, str)
        model.release(who, None, what, reason)
        txn.release(who, reason=reason, topic_partition=what)
    elif kind == "ack":
        assert isinstance(what, list)
        model.drop(what)
        txn.drop_pending(what)
    elif kind == "ack_columns":
        assert isinstance(who, str) and isinstance(what, list)
        mine = [k for k in what if k[0] == who]
        model.drop(mine)
        txn.drop_pending_columns(
            who,
            np.array([k[1] for k in mine], np.int64),
            np.array([k[2] for k in mine], np.int64),
            np.array([k[3] for k in mine], np.int64),
        )
    else:
        assert isinstance(what, tuple)
        partition, ledger, entry, index = what
        model.drop_through(partition, ledger, entry, index)
        txn.drop_pending_through(partition, Position(ledger, entry), index)


def _check(txn: SubscriptionTransaction, model: Model) -> None:
    assert txn.pending() == model.pending
    for consumer in CONSUMERS:
        assert txn.held_elsewhere(consumer) == {
            key: info.key_hash
            for key, info in model.pending.items()
            if info.consumer_id not in (None, consumer) and info.key_hash is not None
        }
    for partition in PARTITIONS:
        assert txn.holders(partition) == {
            info.consumer_id
            for key, info in model.pending.items()
            if key[0] == partition and info.consumer_id is not None
        }
        for first, last in [
            ((3, 0), (3, 7)),
            ((3, RUN_SPAN_ENTRIES), (4, 2)),
            ((4, 3), (4, 9_000)),
        ]:
            found = txn.pending_columns(partition, Position(*first), Position(*last))
            got = sorted(
                zip(
                    found.ledger_id.tolist(),
                    found.entry_id.tolist(),
                    found.batch_index.tolist(),
                    found.held.tolist(),
                    found.redelivery_count.tolist(),
                    strict=True,
                )
            )
            want = sorted(
                (k[1], k[2], k[3], info.consumer_id is not None, info.redelivery_count)
                for k, info in model.pending.items()
                if k[0] == partition and first <= (k[1], k[2]) <= last
            )
            assert got == want


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.tuples(operation, st.sampled_from(list(Release))), min_size=1, max_size=14))
def test_pending_runs_match_the_per_message_model(
    store: MetadataStore, ops: list[tuple[tuple[str, object, object], Release]]
) -> None:
    subscription = _subscribe(store)
    model = Model({})
    for op, reason in ops:
        # One transaction per operation, as the dispatcher runs them.
        with store.subscription_transaction(TOPIC, subscription, 0) as txn:
            _apply(txn, model, op, reason)
        with store.subscription_transaction(TOPIC, subscription, 0) as txn:
            _check(txn, model)


members_of_a_ledger = st.lists(
    st.tuples(st.integers(0, 3 * RUN_SPAN_ENTRIES), st.integers(-1, 40)),
    max_size=60,
    unique=True,
)


def _members(pairs: list[tuple[int, int]], ledger: int = 5) -> Members:
    none = np.zeros(len(pairs), np.int64)
    return Members(
        np.full(len(pairs), ledger, np.int64),
        np.array([e for e, _ in pairs], np.int64),
        np.array([i for _, i in pairs], np.int64),
        np.arange(len(pairs), dtype=np.int64),
        none - 1,
    )


@settings(max_examples=200, deadline=None)
@given(members_of_a_ledger, st.lists(members_of_a_ledger, max_size=2))
def test_runs_keep_every_member_within_the_span(
    pairs: list[tuple[int, int]], other_ledgers: list[list[tuple[int, int]]]
) -> None:
    parts = [_members(pairs)] + [_members(p, 6 + n) for n, p in enumerate(other_ledgers)]
    members = Members.concat(parts)
    runs = runs_of(members)
    seen = []
    for run in runs:
        m = run.members
        assert set(m.ledger.tolist()) == {run.ledger_id}
        assert int(m.entry[-1]) - int(m.entry[0]) < RUN_SPAN_ENTRIES
        back = decode(run.ledger_id, encode_members(m), 2)
        assert np.array_equal(back.entry, m.entry) and np.array_equal(back.index, m.index)
        assert np.array_equal(back.redelivery, m.redelivery + 2)
        seen += list(zip(m.ledger.tolist(), m.entry.tolist(), m.index.tolist(), strict=True))
    expected = sorted(
        zip(members.ledger.tolist(), members.entry.tolist(), members.index.tolist(), strict=True)
    )
    assert seen == expected


@settings(max_examples=200, deadline=None)
@given(
    members_of_a_ledger,
    st.lists(
        st.tuples(
            st.sampled_from([4, 5, 6]),
            st.integers(-(2**40), 2**40) | st.integers(0, 2 * RUN_SPAN_ENTRIES),
            st.integers(-(2**31), 2**31) | st.integers(-1, 40),
        ),
        max_size=60,
    ),
)
def test_among_is_set_membership(
    pairs: list[tuple[int, int]], others: list[tuple[int, int, int]]
) -> None:
    run = runs_of(_members(pairs))
    for part in run:
        m = part.members
        other = Members(
            np.array([o[0] for o in others] + m.ledger[::2].tolist(), np.int64),
            np.array([o[1] for o in others] + m.entry[::2].tolist(), np.int64),
            np.array([o[2] for o in others] + m.index[::2].tolist(), np.int64),
            np.zeros(len(others) + len(m.ledger[::2]), np.int64),
            np.zeros(len(others) + len(m.ledger[::2]), np.int64),
        )
        wanted = set(
            zip(other.ledger.tolist(), other.entry.tolist(), other.index.tolist(), strict=True)
        )
        expected = [
            (lid, e, i) in wanted
            for lid, e, i in zip(m.ledger.tolist(), m.entry.tolist(), m.index.tolist(), strict=True)
        ]
        assert m.among(other).tolist() == expected


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.tuples(operation, st.lists(st.sampled_from(range(len(WINDOWS))), max_size=3)),
        min_size=1,
        max_size=14,
    )
)
def test_runs_read_in_the_transaction_serve_a_dispatch_as_the_store_does(
    store: MetadataStore, steps: list[tuple[tuple[str, object, object], list[int]]]
) -> None:
    """As a dispatch does: look pending messages up, then record what it takes, in one
    transaction. Released messages taken again are found among the runs just read when
    the lookups covered them, in the store otherwise; either way the model's pending set."""
    subscription = _subscribe(store)
    model = Model({})
    for op, windows in steps:
        with store.subscription_transaction(TOPIC, subscription, 0) as txn:
            for partition in PARTITIONS:
                for window in windows:
                    first, last = WINDOWS[window]
                    txn.pending_columns(partition, Position(*first), Position(*last))
            _apply(txn, model, op)
            # After the first one's writes, the same messages released and taken again in
            # the same transaction: runs read before those writes no longer say the store.
            if op[0] == "dispatch":
                _apply(txn, model, ("release", op[1], None))
                _apply(txn, model, ("dispatch", op[1], op[2]))
        with store.subscription_transaction(TOPIC, subscription, 0) as txn:
            _check(txn, model)


stored_values = st.integers(-(2**63), 2**63 - 1) | st.integers(-1, 300)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(stored_values, stored_values, stored_values, stored_values), max_size=70),
    st.integers(0, 5),
)
def test_stored_members_come_back_exactly_in_both_formats(
    rows: list[tuple[int, int, int, int]], bumps: int
) -> None:
    columns = [np.array([row[i] for row in rows], np.int64) for i in range(4)]
    members = Members(np.full(len(rows), 9, np.int64), *columns)
    first_format = np.stack(columns).astype("<i8").tobytes()
    for blob in (encode_members(members), first_format):
        back = decode(9, blob, bumps)
        assert back.ledger.tolist() == [9] * len(rows)
        assert back.entry.tolist() == columns[0].tolist()
        assert back.index.tolist() == columns[1].tolist()
        assert back.redelivery.tolist() == (columns[2] + bumps).tolist()
        assert back.key_hash.tolist() == columns[3].tolist()
    # The length tells the formats apart: the first one's is a multiple of 32.
    assert len(encode_members(members)) % 32 != 0


def test_a_dispatch_run_is_stored_in_a_few_bytes_per_message() -> None:
    """1,000 messages of 100 batched entries, never redelivered, no key hash: what a
    dispatch's commit writes is about 4 bytes a message, not the 32 of int64 columns."""
    entry = np.repeat(np.arange(5_000, 5_100, dtype=np.int64), 10)
    index = np.tile(np.arange(10, dtype=np.int64), 100)
    none = np.full(1_000, -1, np.int64)
    members = Members(np.full(1_000, 3, np.int64), entry, index, np.zeros(1_000, np.int64), none)
    blob = encode_members(members)
    assert len(blob) < 3_200
    back = decode(3, blob)
    assert back.entry.tolist() == entry.tolist() and back.index.tolist() == index.tolist()


def test_runs_read_before_a_write_are_not_used_after_it(store: MetadataStore) -> None:
    """Released runs read, taken again into a run that starts earlier, released again,
    then taken by another consumer: the second take must find the new run, not the one
    read at the start of the transaction (gone, under another key)."""
    subscription = _subscribe(store)
    model = Model({})
    key = [(PARTITIONS[0], 3, entry, 0) for entry in (4, 5, 6)]
    with store.subscription_transaction(TOPIC, subscription, 0) as txn:
        _apply(txn, model, ("dispatch", "a", key[1:]))
        _apply(txn, model, ("release", "a", None))
    with store.subscription_transaction(TOPIC, subscription, 0) as txn:
        txn.pending_columns(PARTITIONS[0], Position(3, 0), Position(3, 7))
        _apply(txn, model, ("dispatch", "a", key))
        _apply(txn, model, ("release", "a", None))
        _apply(txn, model, ("dispatch", "b", key[1:]))
    with store.subscription_transaction(TOPIC, subscription, 0) as txn:
        _check(txn, model)
    assert {k: info.consumer_id for k, info in model.pending.items()} == {
        key[0]: None,
        key[1]: "b",
        key[2]: "b",
    }

"""Entry filters (PIP-105) from subscription properties, predicates, per-message ack masks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.analysis.entry_filters import EntryFilters, describe, first_messages
from cursorops.core.domain.analysis.filter_verdict import FilterVerdict
from cursorops.core.domain.analysis.predicates import Predicate, TimeRange, parse_predicate
from cursorops.core.domain.delivery.unacked_rows import unacked_rows
from cursorops.core.domain.durations import parse_time_ms
from cursorops.core.domain.errors import (
    InvalidArgumentError,
    InvalidInputError,
    InvalidPredicateError,
)
from cursorops.core.domain.ids.position import Position

from .conftest import T0, rows

ACCEPT = FilterVerdict.ACCEPT
REJECT = FilterVerdict.REJECT
RESCHEDULE = FilterVerdict.RESCHEDULE


# -- entry filter properties ----------------------------------------------------------


def test_no_filter_property_means_accept_everything() -> None:
    filters = EntryFilters.from_properties({"owner": "team-a", "entryFilterx": "1"})
    assert not filters
    assert filters.verdicts(rows([{}, {}])).tolist() == [ACCEPT, ACCEPT]


def test_key_and_property_filters() -> None:
    filters = EntryFilters.from_properties(
        {
            "entryFilter.reject.key": "poison",
            "entryFilter.RESCHEDULE.property.tenant.region": "eu",
        }
    )
    table = rows(
        [
            {"key": "poison"},
            {"key": "ok", "properties": {"tenant.region": "eu"}},
            {"key": "ok", "properties": {"tenant.region": "us"}},
            {"key": None},
        ]
    )
    assert filters.verdicts(table).tolist() == [REJECT, RESCHEDULE, ACCEPT, ACCEPT]
    assert filters.columns == {"key", "properties"}


def test_reject_wins_over_reschedule() -> None:
    filters = EntryFilters.from_properties(
        {"entryFilter.reschedule.key": "k", "entryFilter.reject.property.p": "v"}
    )
    table = rows([{"key": "k", "properties": {"p": "v"}}, {"key": "k"}])
    assert filters.verdicts(table).tolist() == [REJECT, RESCHEDULE]
    assert [f.action for f in filters.filters] == [REJECT, RESCHEDULE]


def test_time_bounds_of_one_field_and_action_form_one_range() -> None:
    filters = EntryFilters.from_properties(
        {
            "entryFilter.reject.publishTime.after": str(T0 + 10),
            "entryFilter.reject.publishTime.before": "2023-11-14T22:13:20.020Z",
        }
    )
    assert len(filters.filters) == 1
    publish = [T0 + 9, T0 + 10, T0 + 19, T0 + 20]
    table = rows([{"publish_time": t} for t in publish])
    assert filters.verdicts(table).tolist() == [ACCEPT, REJECT, REJECT, ACCEPT]
    assert describe(filters) == [
        'reject: {"publishTime": {"after": 1700000000010, "before": 1700000000020}} '
        "(entryFilter.reject.publishTime.after, entryFilter.reject.publishTime.before)"
    ]


def test_deliver_at_filter_ignores_messages_that_are_not_delayed() -> None:
    filters = EntryFilters.from_properties({"entryFilter.reschedule.deliverAt.after": str(T0)})
    table = rows([{"deliver_at": None}, {"deliver_at": T0 - 1}, {"deliver_at": T0}])
    assert filters.verdicts(table).tolist() == [ACCEPT, ACCEPT, RESCHEDULE]


def test_naive_iso_time_is_utc() -> None:
    filters = EntryFilters.from_properties(
        {"entryFilter.reject.publishTime.before": "2023-11-14T22:13:20"}
    )
    table = rows([{"publish_time": T0 - 1}, {"publish_time": T0}])
    assert filters.verdicts(table).tolist() == [REJECT, ACCEPT]


@pytest.mark.parametrize(
    ("prop", "value", "named"),
    [
        ("entryFilter.drop.key", "k", "entryFilter.drop.key"),
        ("entryFilter.reject.keys", "k", "entryFilter.reject.keys"),
        ("entryFilter.reject.property", "k", "entryFilter.reject.property"),
        ("entryFilter.reject.publishTime.since", "1", "publishTime.since"),
        ("entryFilter.reject", "k", "entryFilter.reject"),
        ("entryFilter.reject.deliverAt.after", "tomorrow", "tomorrow"),
    ],
)
def test_bad_filter_property_is_named(prop: str, value: str, named: str) -> None:
    with pytest.raises(InvalidPredicateError, match=named.replace(".", r"\.")):
        EntryFilters.from_properties({prop: value})


def test_empty_time_window_is_refused() -> None:
    with pytest.raises(InvalidPredicateError, match="entryFilter.reject.deliverAt.after"):
        EntryFilters.from_properties(
            {
                "entryFilter.reject.deliverAt.after": str(T0 + 5),
                "entryFilter.reject.deliverAt.before": str(T0),
            }
        )


def test_batch_verdict_comes_from_its_first_message() -> None:
    filters = EntryFilters.from_properties({"entryFilter.reject.key": "a"})
    table = rows(
        [
            {"entry_id": 0, "batch_index": 0, "batch_size": 2, "key": "a"},
            {"entry_id": 0, "batch_index": 1, "batch_size": 2, "key": "b"},
            {"entry_id": 1, "batch_index": 0, "batch_size": 2, "key": "b"},
            {"entry_id": 1, "batch_index": 1, "batch_size": 2, "key": "a"},
            {"entry_id": 2, "key": "a"},
        ]
    )
    entries = first_messages(table)
    assert entries.column("entry_id").to_pylist() == [0, 1, 2]
    assert filters.verdicts(entries).tolist() == [REJECT, ACCEPT, REJECT]


def test_filter_verdicts_feed_backlog_analysis() -> None:
    filters = EntryFilters.from_properties(
        {"entryFilter.reject.key": "a", "entryFilter.reschedule.key": "b"}
    )
    table = first_messages(
        rows(
            [
                {"entry_id": 0, "batch_index": 0, "batch_size": 3, "key": "a"},
                {"entry_id": 0, "batch_index": 1, "batch_size": 3, "key": "a"},
                {"entry_id": 0, "batch_index": 2, "batch_size": 3, "key": "a"},
                {"entry_id": 1, "key": "b"},
                {"entry_id": 2, "key": "c"},
            ]
        )
    )
    result = backlog.analyze(
        CursorState(),
        table.column("ledger_id").to_numpy(),
        table.column("entry_id").to_numpy(),
        table.column("batch_size").to_numpy(),
        filters.verdicts(table),
    )
    assert (result.filter_rejected_entries, result.filter_rejected_messages) == (1, 3)
    assert (result.filter_rescheduled_entries, result.filter_accepted_entries) == (1, 1)


# -- predicates -------------------------------------------------------------------------


def test_predicate_round_trips_through_its_json() -> None:
    document = {
        "key": "k",
        "properties": {"a": "1", "b": "2"},
        "publishTime": {"after": T0, "before": T0 + 1000},
        "deliverAt": {"after": T0},
        "payloadContains": "boom",
        "jsonField": {"path": "order.id", "equals": 42},
    }
    predicate = parse_predicate(document)
    assert predicate.to_json() == document
    assert parse_predicate(predicate.to_json()) == predicate
    assert predicate.columns == {"key", "properties", "publish_time", "deliver_at", "payload"}


def test_now_and_durations_need_a_clock() -> None:
    predicate = parse_predicate({"deliverAt": {"after": "now"}}, now_ms=T0)
    assert predicate.deliver_at == TimeRange(after=T0)
    predicate = parse_predicate({"publishTime": {"after": "2h"}}, now_ms=T0)
    assert predicate.publish_time == TimeRange(after=T0 - 7_200_000)
    with pytest.raises(InvalidPredicateError, match="deliverAt.after"):
        parse_predicate({"deliverAt": {"after": "now"}})


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{nope", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({}, "at least one condition"),
        ({"keys": "k"}, "keys: Extra inputs are not permitted"),
        ({"key": 5}, "key: Input should be a valid string"),
        ({"properties": {"a": 1}}, "properties.a"),
        ({"publishTime": {}}, "give 'after', 'before' or both"),
        ({"publishTime": {"after": True}}, "publishTime.after"),
        ({"publishTime": {"after": "yesterday"}}, "publishTime.after 'yesterday'"),
        ({"publishTime": {"after": T0, "before": T0}}, "publishTime: .*must be earlier"),
        ({"deliverAt": {"after": -5}}, "out of range"),
        ({"payloadContains": ""}, "payloadContains must not be empty"),
        ({"jsonField": {"path": "a..b", "equals": 1}}, "jsonField.path"),
        ({"jsonField": {"path": "a"}}, "jsonField.equals: Field required"),
    ],
)
def test_malformed_predicate_is_named(document: Any, message: str) -> None:
    with pytest.raises(InvalidPredicateError, match=message) as caught:
        parse_predicate(document, now_ms=T0)
    assert isinstance(caught.value, InvalidInputError)


def test_predicate_masks() -> None:
    table = rows(
        [
            {"key": "k", "properties": {"a": "1"}, "payload": b'{"order": {"id": 42}}'},
            {"key": "k", "properties": {"a": "2"}, "payload": b'{"order": {"id": "42"}}'},
            {"key": None, "deliver_at": T0 + 5, "payload": b"timeout while calling"},
            {"key": "j", "publish_time": T0 + 100, "payload": b"\xff\xfe not json"},
            {"key": "k", "payload": b'{"order": {"id": true}, "list": [0, {"x": 1}]}'},
        ]
    )

    def matching(document: dict[str, Any]) -> list[int]:
        return np.flatnonzero(parse_predicate(document, now_ms=T0).mask(table)).tolist()

    assert matching({"key": "k"}) == [0, 1, 4]
    assert matching({"key": "k", "properties": {"a": "1"}}) == [0]
    assert matching({"deliverAt": {"after": "now"}}) == [2]
    assert matching({"deliverAt": {"before": T0 + 5}}) == []
    assert matching({"publishTime": {"after": T0 + 1}}) == [3]
    assert matching({"payloadContains": "timeout"}) == [2]
    assert matching({"jsonField": {"path": "order.id", "equals": 42}}) == [0]
    assert matching({"jsonField": {"path": "order.id", "equals": "42"}}) == [1]
    assert matching({"jsonField": {"path": "order.id", "equals": 1}}) == []
    assert matching({"jsonField": {"path": "order.id", "equals": True}}) == [4]
    assert matching({"jsonField": {"path": "list.1.x", "equals": 1}}) == [4]
    assert matching({"jsonField": {"path": "list.7", "equals": 1}}) == []


def test_parse_time_ms_forms() -> None:
    assert parse_time_ms(T0, "t") == T0
    assert parse_time_ms(str(T0), "t") == T0
    assert parse_time_ms("2023-11-14T23:13:20+01:00", "t") == T0
    assert parse_time_ms("10s", "t", now_ms=T0) == T0 - 10_000
    with pytest.raises(InvalidArgumentError, match="epoch milliseconds or an ISO-8601 time"):
        parse_time_ms("10s", "t")


def test_predicate_is_a_plain_picklable_value() -> None:
    import pickle

    predicate = parse_predicate({"key": "k", "jsonField": {"path": "a", "equals": [1, 2]}})
    assert pickle.loads(pickle.dumps(predicate)) == predicate
    assert isinstance(predicate, Predicate)


# -- unacked_rows against a dumb reference -----------------------------------------------

ENTRIES = 12


@st.composite
def partition_and_acks(draw: st.DrawFn) -> tuple[pa.Table, list[AckTarget], list[int]]:
    sizes = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=ENTRIES, max_size=ENTRIES))
    messages = []
    for entry, size in enumerate(sizes):
        if size == 0:
            messages.append({"entry_id": entry})
        for index in range(size):
            messages.append({"entry_id": entry, "batch_index": index, "batch_size": size})
    table = rows(messages)
    targets = []
    for entry, size in enumerate(sizes):
        choice = draw(st.sampled_from(["none", "entry", "indexes"]))
        if choice == "entry":
            targets.append(AckTarget(Position(1, entry)))
        elif choice == "indexes" and size:
            picked = draw(st.sets(st.integers(0, size - 1)))
            targets.extend(AckTarget(Position(1, entry), i, size) for i in sorted(picked))
    subset = draw(st.lists(st.integers(0, table.num_rows - 1), unique=True))
    return table, targets, subset


@settings(max_examples=150, deadline=None)
@given(partition_and_acks())
def test_unacked_rows_matches_cursor_state_row_by_row(
    case: tuple[pa.Table, list[AckTarget], list[int]],
) -> None:
    table, targets, subset = case
    state = CursorState()
    state.acknowledge(targets, LedgerLayout.of([(1, ENTRIES)]))
    for chosen in (table, table.take(pa.array(subset, pa.int64()))):
        expected = [
            not state.is_acked(Position(row["ledger_id"], row["entry_id"]), row["batch_index"])
            for row in chosen.to_pylist()
        ]
        assert unacked_rows(state, chosen).tolist() == expected

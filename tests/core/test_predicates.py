"""cursorops.core.domain.analysis.predicates and cursorops.core.domain.analysis.match_conditions:
the document built from the
flat match options,
and the producer condition."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.analysis.match_conditions import (
    MATCH_OPTIONS,
    MatchConditions,
    predicate_from_options,
)
from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.core.domain.errors import InvalidInputError, InvalidPredicateError

from .conftest import T0, rows

PRODUCERS = ["orders-a", "orders-b", "Orders-A", "orders-a ", ""]
KEYS = ["k0", "k1", None]


# -- predicate_from_options ------------------------------------------------------------


def test_each_option_becomes_its_field() -> None:
    document = predicate_from_options(
        {"jsonField": {"path": "a", "equals": 1}},
        key="k",
        property=["region=eu", "tier=gold=1", "empty="],
        publish_time_after="1h",
        publish_time_before=T0,
        deliver_at_after="now",
        deliver_at_before="2026-12-01T00:00:00Z",
        payload_contains="boom",
        producer="orders-a",
    )
    assert document == {
        "jsonField": {"path": "a", "equals": 1},
        "key": "k",
        "properties": {"region": "eu", "tier": "gold=1", "empty": ""},
        "publishTime": {"after": "1h", "before": T0},
        "deliverAt": {"after": "now", "before": "2026-12-01T00:00:00Z"},
        "payloadContains": "boom",
        "producer": "orders-a",
    }
    assert parse_predicate(document, now_ms=T0).producer == "orders-a"


def test_no_options_give_the_document_back_unchanged() -> None:
    given_document = {"key": "k"}
    assert predicate_from_options(given_document) == {"key": "k"}
    assert predicate_from_options(None) == {}
    built = predicate_from_options(given_document, producer="p")
    assert given_document == {"key": "k"} and built == {"key": "k", "producer": "p"}


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("key", "k", "key"),
        ("property", ["a=1"], "properties"),
        ("publish_time_after", "1h", "publishTime"),
        ("publish_time_before", "now", "publishTime"),
        ("deliver_at_after", "now", "deliverAt"),
        ("deliver_at_before", T0, "deliverAt"),
        ("payload_contains", "x", "payloadContains"),
        ("producer", "p", "producer"),
    ],
)
def test_a_field_in_the_document_and_as_an_option_clashes(
    option: str, value: Any, field: str
) -> None:
    document = {field: {"after": 0} if field in ("publishTime", "deliverAt") else "v"}
    with pytest.raises(InvalidPredicateError) as caught:
        predicate_from_options(document, **{option: value})
    assert str(caught.value) == (
        f"Invalid predicate: {field} given both in --predicate and as an option"
    )
    with pytest.raises(InvalidPredicateError) as caught:
        predicate_from_options(document, **{option: value}, source="predicate")
    assert (
        str(caught.value) == f"Invalid predicate: {field} given both in predicate and as an option"
    )


def test_clashes_are_listed_sorted_together() -> None:
    with pytest.raises(InvalidPredicateError) as caught:
        predicate_from_options({"producer": "a", "key": "b"}, producer="c", key="d")
    assert str(caught.value) == (
        "Invalid predicate: key, producer given both in --predicate and as an option"
    )


@pytest.mark.parametrize("text", ["novalue", "=v", ""])
def test_a_property_without_name_and_value_is_named_as_the_caller_spells_it(text: str) -> None:
    with pytest.raises(InvalidPredicateError) as caught:
        predicate_from_options(None, property=["ok=1", text])
    assert str(caught.value) == f"Invalid --property '{text}': expected NAME=VALUE"
    assert isinstance(caught.value, InvalidInputError)
    with pytest.raises(InvalidPredicateError) as caught:
        predicate_from_options(None, property=[text], property_option="property")
    assert str(caught.value) == f"Invalid property '{text}': expected NAME=VALUE"


def test_the_flat_options_are_derived_from_the_one_model() -> None:
    assert [(o.name, o.field, o.kind) for o in MATCH_OPTIONS] == [
        ("key", "key", "text"),
        ("property", "properties", "pairs"),
        ("publish_time_after", "publishTime", "time"),
        ("publish_time_before", "publishTime", "time"),
        ("deliver_at_after", "deliverAt", "time"),
        ("deliver_at_before", "deliverAt", "time"),
        ("payload_contains", "payloadContains", "text"),
        ("producer", "producer", "text"),
    ]
    assert {o.field for o in MATCH_OPTIONS} == set(MatchConditions.model_fields) - {"jsonField"}
    assert MATCH_OPTIONS[2].flag == "--publish-time-after"


@pytest.mark.parametrize("option", MATCH_OPTIONS, ids=lambda o: o.name)
def test_each_option_alone_is_a_document_core_parses(option: Any) -> None:
    value = {"text": "v", "pairs": ["a=1"], "time": T0}[option.kind]
    document = predicate_from_options(None, **{option.name: value})
    assert list(document) == [option.field]
    assert not parse_predicate(document, now_ms=T0 + 1).is_empty


def test_an_unknown_option_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="Unknown match option"):
        predicate_from_options(None, properties=["a=1"])


# -- producer ---------------------------------------------------------------------------


def test_producer_round_trips_and_reads_its_column() -> None:
    predicate = parse_predicate({"producer": "orders-a", "key": "k"})
    assert predicate.to_json() == {"producer": "orders-a", "key": "k"}
    assert parse_predicate(predicate.to_json()) == predicate
    assert predicate.columns == {"key", "producer_name"}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"producer": ""}, "^Invalid predicate: producer must not be empty$"),
        ({"producer": 5}, "producer: Input should be a valid string"),
        ({"producer": None}, "at least one condition .*producer"),
    ],
)
def test_bad_producer_is_named(document: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPredicateError, match=message):
        parse_predicate(document)


def test_producer_matches_the_name_exactly() -> None:
    table = rows([{"producer_name": name} for name in PRODUCERS])
    mask = parse_predicate({"producer": "orders-a"}).mask(table)
    assert np.flatnonzero(mask).tolist() == [0]


message_st = st.fixed_dictionaries(
    {
        "producer_name": st.sampled_from(PRODUCERS),
        "key": st.sampled_from(KEYS),
        "payload": st.sampled_from([b"", b"boom", b"a boom b"]),
    }
)


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(message_st, max_size=30),
    producer=st.sampled_from([name for name in PRODUCERS if name] + ["nobody"]),
    key=st.sampled_from([None, "k0", "k1"]),
    payload=st.sampled_from([None, "boom"]),
)
def test_producer_mask_equals_a_plain_filter(
    messages: list[dict[str, Any]], producer: str, key: str | None, payload: str | None
) -> None:
    document = predicate_from_options(None, producer=producer, key=key, payload_contains=payload)
    predicate = parse_predicate(document)
    table = rows(messages)
    expected = [
        number
        for number, m in enumerate(messages)
        if m["producer_name"] == producer
        and (key is None or m["key"] == key)
        and (payload is None or payload.encode() in m["payload"])
    ]
    assert np.flatnonzero(predicate.mask(table)).tolist() == expected
    assert np.flatnonzero(predicate.mask(table.select(sorted(predicate.columns)))).tolist() == (
        expected
    )

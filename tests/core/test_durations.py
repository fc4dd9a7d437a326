"""The one time and duration grammar: Pulsar's units, seconds written ``90s``, never a bare ``90``.

The CLI (``--deliver-after``, ``reset-cursor --time``), the predicates and entry
filters, and the Spark job's ``--time-limit`` all read it through
:mod:`cursorops.core.domain.durations`, so each case here holds at every door.
"""

from __future__ import annotations

import pytest

from cursorops.cli import values
from cursorops.core.domain.analysis.entry_filters import EntryFilters
from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.core.domain.durations import INT64_MAX, UNIT_MS, parse_duration_ms, parse_time_ms
from cursorops.core.domain.errors import InvalidArgumentError, InvalidPredicateError
from cursorops.spark.analyze_backlog import parse_time_limit

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("250ms", 250),
        ("90s", 90_000),
        ("2m", 120_000),
        ("1h", 3_600_000),
        ("2d", 2 * 86_400_000),
        ("1w", 7 * 86_400_000),
        ("1y", 365 * 86_400_000),
        (" 5m ", 300_000),
    ],
)
def test_pulsar_units(text: str, expected: int) -> None:
    assert parse_duration_ms(text, "d") == expected
    assert values.parse_duration_ms(text, "--deliver-after") == expected
    assert parse_time_limit(text) == expected


def test_units_are_pulsars_relative_time_units_plus_ms() -> None:
    assert set(UNIT_MS) == {"ms", "s", "m", "h", "d", "w", "y"}


@pytest.mark.parametrize("text", ["90", "0", " 90 "])
def test_a_bare_number_is_refused_at_every_door(text: str) -> None:
    number = text.strip()
    expected = f"Invalid --time-limit '{number}': add a unit, such as {number}s or {number}m"
    with pytest.raises(InvalidArgumentError) as caught:
        parse_time_limit(text)
    assert str(caught.value) == expected
    with pytest.raises(InvalidArgumentError, match=f"add a unit, such as {number}s"):
        values.parse_duration_ms(text, "--deliver-after")
    with pytest.raises(InvalidArgumentError, match=f"add a unit, such as {number}s"):
        values.deliver_after_ms(text, "--deliver-after", NOW)


@pytest.mark.parametrize("text", ["10x", "-10s", "1.5h", "s", "", "10 s", "10S", "1\n0s", "٣s"])
def test_other_bad_durations_are_one_line(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="expected a duration such as") as caught:
        parse_duration_ms(text, "--deliver-after")
    assert "\n" not in str(caught.value)


def test_a_duration_past_int64_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="longer than the int64"):
        parse_duration_ms("292471209y", "d")
    assert parse_duration_ms(f"{INT64_MAX}ms", "d") == INT64_MAX


def test_time_limit_zero_with_a_unit_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="positive duration"):
        parse_time_limit("0s")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("10m", NOW - 600_000),
        ("1w", NOW - 7 * 86_400_000),
        ("1700000000000", 1_700_000_000_000),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14 23:13:20+01:00", 1_700_000_000_000),
    ],
)
def test_one_time_grammar_for_the_cli_and_the_predicates(text: str, expected: int) -> None:
    assert values.parse_time_ms(text, "--time", NOW) == expected
    predicate = parse_predicate({"publishTime": {"after": text}}, now_ms=NOW)
    assert predicate.publish_time is not None and predicate.publish_time.after == expected


def test_digits_are_a_time_not_a_duration() -> None:
    assert parse_time_ms("90", "t", NOW) == 90


def test_a_time_before_the_epoch_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="outside the epoch milliseconds"):
        parse_time_ms("1y", "--time", 1000)
    with pytest.raises(InvalidPredicateError, match="outside the epoch milliseconds"):
        parse_predicate({"publishTime": {"after": "1y"}}, now_ms=1000)


def test_relative_times_need_a_clock() -> None:
    with pytest.raises(InvalidPredicateError, match="ISO-8601"):
        parse_predicate({"publishTime": {"after": "10m"}})
    with pytest.raises(InvalidPredicateError, match="ISO-8601"):
        EntryFilters.from_properties({"entryFilter.reject.publishTime.after": "10m"})

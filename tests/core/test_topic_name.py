from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorops.core.domain.errors import InvalidInputError, InvalidTopicNameError
from cursorops.core.domain.ids.topic_name import (
    MAX_LABEL_CHARS,
    MAX_NAME_CHARS,
    TopicName,
    is_valid_entity_name,
    label_problem,
)

name_parts = st.from_regex(r"[A-Za-z0-9_=:.\-]{1,20}", fullmatch=True).filter(
    lambda s: s not in (".", "..") and "-partition-" not in s
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my-topic", "persistent://public/default/my-topic"),
        ("tenant/ns/topic", "persistent://tenant/ns/topic"),
        ("persistent://tenant/ns/topic", "persistent://tenant/ns/topic"),
        ("non-persistent://tenant/ns/topic", "non-persistent://tenant/ns/topic"),
        ("a_b=c:d.e", "persistent://public/default/a_b=c:d.e"),
        ("t-partition-3", "persistent://public/default/t-partition-3"),
    ],
)
def test_parse_completes_short_names(text: str, expected: str) -> None:
    assert str(TopicName.parse(text)) == expected


def test_fields() -> None:
    name = TopicName.parse("persistent://acme/orders/created")
    assert (name.domain, name.tenant, name.namespace, name.local_name) == (
        "persistent",
        "acme",
        "orders",
        "created",
    )
    assert name.namespace_name == "acme/orders"


def test_short_name_fields() -> None:
    name = TopicName.parse("created")
    assert (name.domain, name.tenant, name.namespace, name.local_name) == (
        "persistent",
        "public",
        "default",
        "created",
    )
    assert name.namespace_name == "public/default"


def test_not_a_partition() -> None:
    name = TopicName.parse("persistent://acme/orders/created")
    assert name.partition_index == -1
    assert not name.is_partition
    assert name.base is name


def test_partition_name() -> None:
    name = TopicName.parse("persistent://acme/orders/created-partition-7")
    assert name.partition_index == 7
    assert name.is_partition
    assert name.local_name == "created-partition-7"
    assert name.base == TopicName.parse("persistent://acme/orders/created")
    assert str(name.base) == "persistent://acme/orders/created"


def test_partition_zero() -> None:
    name = TopicName.parse("acme/orders/created-partition-0")
    assert name.partition_index == 0
    assert name.is_partition


def test_last_partition_suffix_counts() -> None:
    name = TopicName.parse("a-partition-1-partition-2")
    assert name.partition_index == 2
    assert name.base.local_name == "a-partition-1"


def test_partition_of_base() -> None:
    base = TopicName.parse("acme/orders/created")
    part = base.partition(3)
    assert str(part) == "persistent://acme/orders/created-partition-3"
    assert part.partition_index == 3
    assert part.base == base
    assert TopicName.parse(str(part)) == part


def test_partition_keeps_domain() -> None:
    part = TopicName.parse("non-persistent://acme/orders/created").partition(0)
    assert str(part) == "non-persistent://acme/orders/created-partition-0"


def test_partition_of_a_partition_is_refused() -> None:
    part = TopicName.parse("created-partition-1")
    with pytest.raises(InvalidTopicNameError, match="already a partition"):
        part.partition(2)


@pytest.mark.parametrize("index", [-1, 2**31, True, 1.0, "1"])
def test_bad_partition_index(index: object) -> None:
    with pytest.raises(InvalidTopicNameError, match="Invalid partition index"):
        TopicName.parse("created").partition(index)  # type: ignore[arg-type]


def test_largest_partition_index() -> None:
    part = TopicName.parse("created").partition(2**31 - 1)
    assert part.partition_index == 2**31 - 1
    assert TopicName.parse(str(part)) == part


def test_is_frozen_and_hashable() -> None:
    name = TopicName.parse("created")
    with pytest.raises(AttributeError):
        name.tenant = "other"  # type: ignore[misc]
    assert {TopicName.parse("created"), TopicName.parse("public/default/created")} == {name}


@given(name_parts, name_parts, name_parts, st.integers(0, 2**31 - 1))
def test_round_trip(tenant: str, namespace: str, local: str, index: int) -> None:
    name = TopicName.parse(f"{tenant}/{namespace}/{local}")
    assert (name.tenant, name.namespace, name.local_name) == (tenant, namespace, local)
    assert TopicName.parse(str(name)) == name
    part = name.partition(index)
    assert TopicName.parse(str(part)) == part
    assert part.partition_index == index
    assert part.base == name


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("   ", "empty", id="blank"),
        pytest.param("a/b", "expected topic, tenant/namespace/topic", id="two-parts"),
        pytest.param("a/b/c/d", "expected topic, tenant/namespace/topic", id="four-parts"),
        pytest.param("persistent://a/b", "expected persistent://tenant/namespace/topic", id="d2"),
        pytest.param("persistent://a/b/c/d", "expected persistent://", id="domain-four-parts"),
        pytest.param("http://a/b/c", "domain must be", id="bad-domain"),
        pytest.param("://a/b/c", "domain must be", id="no-domain"),
        pytest.param("persistent:///b/c", "bad tenant ''", id="empty-tenant"),
        pytest.param("persistent://a//c", "bad namespace ''", id="empty-namespace"),
        pytest.param("persistent://a/b/", "bad topic ''", id="empty-topic"),
        pytest.param("a b/ns/t", "bad tenant", id="space-in-tenant"),
        pytest.param("a/n s/t", "bad namespace", id="space-in-namespace"),
        pytest.param("a/ns/t t", "bad topic", id="space-in-topic"),
        pytest.param("a/ns/t?x", "bad topic", id="question-mark"),
        pytest.param("a/ns/t%2F", "bad topic", id="percent"),
        pytest.param("persistent://ten\n/ns/t", "bad tenant", id="newline-in-tenant"),
        pytest.param("ten/ns\n/t", "bad namespace", id="newline-in-namespace"),
        pytest.param("ten/ns/t\nx", "bad topic", id="newline-in-topic"),
        pytest.param("../ns/t", "bad tenant '..'", id="dotdot-tenant"),
        pytest.param("ten/./t", "bad namespace '.'", id="dot-namespace"),
        pytest.param("ten/ns/..", "bad topic '..'", id="dotdot-topic"),
        pytest.param("..", "bad topic '..'", id="dotdot-short"),
        pytest.param("t\u00e9", "bad topic", id="non-ascii"),
        pytest.param("t-partition-", "bad partition suffix", id="suffix-no-index"),
        pytest.param("t-partition-x", "bad partition suffix", id="suffix-letters"),
        pytest.param("t-partition--1", "bad partition suffix", id="suffix-negative"),
        pytest.param("t-partition-01", "bad partition suffix", id="suffix-leading-zero"),
        pytest.param("-partition-1", "bad partition suffix", id="suffix-no-base"),
        pytest.param("t-partition-2147483648", "bad partition suffix", id="suffix-beyond-int32"),
        pytest.param("t-partition-" + "9" * 30, "bad partition suffix", id="suffix-huge"),
        pytest.param("acme/ops/t\n", "whitespace", id="trailing-newline"),
        pytest.param("  my-topic  ", "whitespace", id="surrounding-spaces"),
        pytest.param("\tpersistent://acme/ops/t", "whitespace", id="leading-tab"),
    ],
)
def test_bad_names(text: str, reason: str) -> None:
    with pytest.raises(InvalidTopicNameError) as info:
        TopicName.parse(text)
    message = str(info.value)
    assert message.startswith("Invalid topic name '")
    assert reason in message
    # The name is shown escaped, so the error stays one line.
    assert "\n" not in message
    if text.strip():
        assert repr(text.strip())[1:-1] in message


def test_non_str_is_refused() -> None:
    with pytest.raises(InvalidTopicNameError):
        TopicName.parse(None)  # type: ignore[arg-type]


def test_invalid_topic_name_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError):
        TopicName.parse("a/b")


# -- Pulsar's NamedEntity rules and the length caps ------------------------------------


@pytest.mark.parametrize(
    "name",
    ["..", ".", "a\n", "\n", "", "a/b", "é", "٣", "a b", "a\x00", "x" * (MAX_NAME_CHARS + 1)],
)
def test_entity_names_refused(name: str) -> None:
    assert not is_valid_entity_name(name)


@pytest.mark.parametrize("name", ["a", "...", "a.b", "-=:._", "x" * MAX_NAME_CHARS])
def test_entity_names_accepted(name: str) -> None:
    assert is_valid_entity_name(name)


def test_topic_length_cap_is_on_the_base_name() -> None:
    base = "t" * MAX_NAME_CHARS
    name = TopicName.parse(f"a/b/{base}")
    assert str(name.partition(2_147_483_647)).endswith("-partition-2147483647")
    assert TopicName.parse(f"a/b/{base}-partition-7").base == name
    with pytest.raises(InvalidTopicNameError, match="bad topic"):
        TopicName.parse("a/b/" + "t" * 300)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("  ", "empty"),
        ("a\x00b", "U+0000"),
        ("a\nb", "U+000A"),
        ("a\x7f", "U+007F"),
        ("bad\udcff", "UTF-8"),
        ("x" * (MAX_LABEL_CHARS + 1), "longer"),
    ],
)
def test_labels_refused(name: str, problem: str) -> None:
    found = label_problem(name)
    assert found is not None and problem in found


@pytest.mark.parametrize("name", ["sub", "my sub", "订阅", "a:b/c", "x" * MAX_LABEL_CHARS])
def test_labels_accepted(name: str) -> None:
    assert label_problem(name) is None

"""PIP-423's three REST body shapes, and every malformed one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.errors import InvalidSkipPayloadError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.skip_payload import parse_payload


def test_bare_array_of_base64() -> None:
    assert parse_payload(["CLlgEAQ=", "CLlgEAQYAiAD"]) == [
        MessageId(12345, 4),
        MessageId(12345, 4, 2, 3),
    ]


@pytest.mark.parametrize("kind", [None, "byteArray", "BYTEARRAY", "bytearray"])
def test_byte_array_object(kind: str | None) -> None:
    body: dict[str, object] = {"messageIds": ["CLlgEAQ="]}
    if kind is not None:
        body["type"] = kind
    assert parse_payload(body) == [MessageId(12345, 4)]


def test_message_id_objects_with_numeric_strings_and_negative_batch_index() -> None:
    body = {
        "type": "MessageId",
        "messageIds": [
            {"ledgerId": 1, "entryId": 2, "batchIndex": 0},
            {"ledgerId": "3", "entryId": "4"},
            {"ledgerId": 5, "entryId": 6, "batchIndex": -1},
            {"ledgerId": 5, "entryId": 7, "batchIndex": "-3"},
        ],
    }
    assert parse_payload(body) == [
        MessageId(1, 2, -1, 0),
        MessageId(3, 4),
        MessageId(5, 6),
        MessageId(5, 7),
    ]


@pytest.mark.parametrize(
    "body,fragment",
    [
        ("CLlgEAQ=", "expected a JSON array or object"),
        (42, "expected a JSON array or object"),
        ([1], "must be a base64 string"),
        (["not base64!"], "is not base64"),
        (["AAAA"], "messageIds[0]"),
        ({"type": "other", "messageIds": []}, "unknown type 'other'"),
        ({"type": 3, "messageIds": []}, "type must be a string"),
        ({"messageIds": "CLlgEAQ="}, "messageIds must be a list"),
        ({"ids": []}, "unknown field"),
        ({"type": "messageId", "messageIds": [{"ledgerId": 1}]}, "lacks entryId"),
        ({"type": "messageId", "messageIds": [[1, 2]]}, "must be an object"),
        (
            {"type": "messageId", "messageIds": [{"ledgerId": "x", "entryId": 1}]},
            "must be a number",
        ),
        (
            {"type": "messageId", "messageIds": [{"ledgerId": True, "entryId": 1}]},
            "must be a number",
        ),
        ({"type": "messageId", "messageIds": [{"ledgerId": -1, "entryId": 1}]}, "negative"),
        (
            {"type": "messageId", "messageIds": [{"ledgerId": 1, "entryId": 1, "x": 1}]},
            "unknown field",
        ),
    ],
)
def test_malformed_payloads(body: object, fragment: str) -> None:
    with pytest.raises(InvalidSkipPayloadError) as info:
        parse_payload(body)
    assert str(info.value).startswith("Invalid skipByMessageIds payload")
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "value",
    [
        "--1",
        "-",
        "",
        " 1",
        "1 ",
        "+1",
        "1.0",
        "1e3",
        "0x10",
        "1_000",
        "\u00b2",
        "\uff11\uff12",
        "\u0663",
        "\u0661\u0662",
        "9" * 5000,
        1.0,
        2.5,
        float("nan"),
        None,
        [],
        {},
        True,
        False,
    ],
)
def test_numbers_are_ascii_decimal_integers_only(value: object) -> None:
    body = {"type": "messageId", "messageIds": [{"ledgerId": value, "entryId": 1}]}
    with pytest.raises(
        InvalidSkipPayloadError, match=r"messageIds\[0\]\.ledgerId must be a number"
    ):
        parse_payload(body)


@pytest.mark.parametrize(
    "field,value",
    [
        ("ledgerId", 2**63),
        ("entryId", str(2**63)),
        ("ledgerId", "9" * 20),
        ("batchIndex", 2**31),
        ("batchIndex", -(2**31) - 1),
        ("entryId", -(2**70)),
    ],
)
def test_numbers_out_of_range(field: str, value: object) -> None:
    item: dict[str, object] = {"ledgerId": 1, "entryId": 1, field: value}
    with pytest.raises(InvalidSkipPayloadError, match="out of range"):
        parse_payload({"type": "messageId", "messageIds": [item]})


def test_int64_edges_and_numeric_strings_are_read() -> None:
    body = {
        "type": "messageId",
        "messageIds": [
            {"ledgerId": str(2**63 - 1), "entryId": 2**32, "batchIndex": str(2**31 - 1)},
            {"ledgerId": "0", "entryId": "-0", "batchIndex": -(2**31)},
        ],
    }
    assert parse_payload(body) == [MessageId(2**63 - 1, 2**32, -1, 2**31 - 1), MessageId(0, 0)]


@pytest.mark.parametrize("text", ["CLlgEAQ", "CLlgEAQYAiAD", "CAEQAA", "CLlgEAQwAA"])
def test_unpadded_base64_is_read_as_the_cli_reads_it(text: str) -> None:
    """Java's Base64 decoder (Pulsar's) takes input without its '=' padding."""
    assert parse_payload([text]) == [MessageId.from_base64(text)]
    assert parse_payload({"messageIds": [text]}) == [MessageId.from_base64(text)]


def test_a_negative_batch_index_in_base64_is_kept_for_validation() -> None:
    """Only the messageId shape reads a negative batchIndex as the whole entry; the
    byteArray shape keeps it, and skip validation refuses it (Invalid batchIndex)."""
    encoded = MessageId(1, 0, -1, -5).to_base64()
    assert parse_payload([encoded])[0].batch_index == -5


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["CLlgEAQ=", "CLlgEAQ", "--1", "\u00b2", "\uff11\uff12", "\u0663", "-0"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["type", "messageIds", "ledgerId", "entryId", "batchIndex", "x"])
            | st.text(max_size=5),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
id_objects = st.fixed_dictionaries(
    {"ledgerId": json_values, "entryId": json_values},
    optional={"batchIndex": json_values},
)
bodies = st.one_of(
    json_values,
    st.lists(st.text(max_size=16) | json_values, max_size=3),
    st.fixed_dictionaries(
        {"messageIds": st.lists(id_objects | json_values, max_size=3)},
        optional={
            "type": st.sampled_from(["messageId", "MESSAGEID", "byteArray", "x"]) | json_values
        },
    ),
)


@pytest.mark.slow
@given(bodies)
@settings(max_examples=400, deadline=None)
def test_parse_payload_fuzz_gives_ids_or_one_payload_error(body: object) -> None:
    try:
        ids = parse_payload(body)
    except InvalidSkipPayloadError as exc:
        assert str(exc).startswith("Invalid skipByMessageIds payload")
        assert "\n" not in str(exc)
        return
    assert isinstance(ids, list)
    assert all(isinstance(m, MessageId) for m in ids)

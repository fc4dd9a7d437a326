"""PIP-423's three REST body shapes, and every malformed one."""

from __future__ import annotations

import pytest

from core.errors import InvalidSkipPayloadError
from core.message_id import MessageId
from core.skip import parse_payload


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

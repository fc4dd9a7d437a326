"""Message content and who reads it (cursorops.core.domain.content): what is masked, and the
permission rule
through the real Broker."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cursorops.core.domain.authz import GRANTS_ALLOWING, Operation
from cursorops.core.domain.content import CONTENT_FIELDS, masked, masked_value, shown
from cursorops.core.services.broker import Broker

TOPIC = "persistent://acme/ops/orders"
MARK = "card-4111"
"""A value that must never survive masking."""


def _skip_row() -> dict[str, object]:
    return {
        "id": "3:7:1",
        "partition": "persistent://acme/ops/orders-partition-1",
        "key": MARK,
        "publishTime": "2026-01-01 00:00:00.000 UTC",
        "deliverAt": "",
        "properties": {"pii": "yes", "card": MARK},
        "payload": "secret-payload…",
        "payloadSize": 512,
        "wholeBatchOf": 0,
        "alreadyAcknowledged": False,
    }


def test_a_message_row_keeps_its_metadata_and_says_only_how_much_content_it_had() -> None:
    row = masked(_skip_row())
    assert row["key"] == "9 bytes, masked"
    assert row["properties"] == "2 properties, masked"
    # The excerpt is cut: its row's full size is what is said.
    assert row["payload"] == "512 bytes, masked"
    kept = ("id", "partition", "publishTime", "deliverAt", "payloadSize", "wholeBatchOf")
    assert {k: row[k] for k in kept} == {k: _skip_row()[k] for k in kept}
    assert masked_value("properties", {"a": "b"}) == "1 property, masked"
    assert masked_value("key", "ü") == "2 bytes, masked"  # UTF-8 bytes, not characters
    assert masked_value("key", None) is None  # no key is not content


def test_a_predicate_keeps_its_shape_and_loses_its_values() -> None:
    predicate = {
        "key": MARK,
        "properties": {"pii": "yes"},
        "payloadContains": "secret-payload",
        "jsonField": {"path": "card.number", "equals": MARK},
        "publishTime": {"after": 0},
        "producer": "orders-service",
    }
    out = masked({"predicate": predicate})["predicate"]
    assert out["jsonField"] == {"path": "card.number", "equals": "masked"}
    assert out["payloadContains"] == "14 bytes, masked"
    assert (out["publishTime"], out["producer"]) == ({"after": 0}, "orders-service")
    assert "yes" not in json.dumps(out) and MARK not in json.dumps(out)


def test_a_redrive_preview_masks_its_first_messages_and_its_keys() -> None:
    preview = {
        "messages": 2,
        "distinctKeys": 1,
        "keys": [MARK, None],
        "firstMessages": [
            {"messageId": "1:0", "key": MARK, "properties": {"pii": "yes"}, "publishTime": 1},
            {"messageId": "1:1", "key": None, "properties": {}, "publishTime": 2},
        ],
    }
    out = masked(preview)
    assert out["keys"] == "1 key, masked"
    assert out["firstMessages"][0] == {
        "messageId": "1:0",
        "key": "9 bytes, masked",
        "properties": "1 property, masked",
        "publishTime": 1,
    }
    assert out["firstMessages"][1]["properties"] == "0 properties, masked"
    assert shown(preview, True) is preview


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)
_secret = st.text(max_size=20).map(lambda t: MARK + t)


@given(
    st.dictionaries(st.sampled_from(sorted(CONTENT_FIELDS)), _secret, min_size=1),
    st.dictionaries(st.text(max_size=5).filter(lambda k: k not in CONTENT_FIELDS), _json),
    st.integers(0, 3),
)
def test_no_content_survives_however_deep(content, rest, depth) -> None:
    document: object = {**rest, **content}
    for _ in range(depth):
        document = [{"rows": document}]
    assert MARK not in json.dumps(masked(document), ensure_ascii=False)


def test_every_grant_that_consumes_may_peek() -> None:
    """The radar and a redrive's preview need CONSUME (of the dead-letter topic): whoever
    reads them may read content, so they show it as they are (and mask it when not)."""
    assert GRANTS_ALLOWING[Operation.CONSUME] <= GRANTS_ALLOWING[Operation.PEEK_MESSAGES]


def test_who_may_read_content(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC, 0)
    other = "persistent://acme/ops/other"
    broker.admin.create_topic("admin", other, 0)
    broker.admin.grant_permission("admin", "acme/ops", "reader", ["consume"])
    broker.admin.grant_permission("admin", "acme/ops", "writer", ["produce"])
    for role, expected in (
        ("admin", True),
        ("acme-admin", True),
        ("reader", True),
        ("writer", False),
        ("nobody", False),
    ):
        assert broker.access.may_read_content(role, [TOPIC, other]) is expected, role
    broker.admin.create_namespace("admin", "acme/vault")
    vault = "persistent://acme/vault/cards"
    broker.admin.create_topic("admin", vault, 0)
    # Every topic of a plan: a redrive's dead-letter topic too.
    assert broker.access.may_read_content("reader", [TOPIC, vault]) is False
    assert broker.access.may_read_content("reader", ["persistent://acme/ops/gone"]) is False

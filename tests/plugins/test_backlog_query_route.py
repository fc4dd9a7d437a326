"""The backlog's SQL route through Airflow's API app: rows and their snapshot for a role that
may peek, null content for a produce-only role, 400 for SQL it refuses, 403 without a grant."""

from __future__ import annotations

import base64
import secrets

from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from tests.plugins.conftest import Api, rest_path

PEEKS = "alice"
PRODUCES = "dave"
QUERY = "SELECT triplet, key, payload, properties['pii'] AS pii FROM backlog ORDER BY 1"


def _topic(api: Api) -> tuple[str, list[str]]:
    """A fresh topic of two content-rich messages on ``billing``; their triplets."""
    namespace = f"acme/table-{secrets.token_hex(3)}"
    topic = f"persistent://{namespace}/cards"
    with Broker(api.config) as broker:
        broker.admin.create_namespace("admin", namespace)
        broker.admin.grant_permission("admin", namespace, PEEKS, ["consume"])
        broker.admin.grant_permission("admin", namespace, PRODUCES, ["produce"])
        broker.admin.create_topic("admin", topic, 0)
        broker.admin.create_subscription(
            "admin", topic, "billing", SubscriptionType.SHARED, initial_position="earliest"
        )
        message = OutgoingMessage(b"secret", key="card-4111", properties={"pii": "yes"})
        ids = broker.producing.produce("admin", topic, [message] * 2)
    return topic, [i.triplet() for i in ids]


def _path(topic: str) -> str:
    return rest_path(topic) + "/subscription/billing/backlogQuery"


def test_a_role_that_may_peek_reads_rows_and_their_snapshot(api: Api) -> None:
    topic, ids = _topic(api)
    answer = api.call(PEEKS, "POST", _path(topic), json={"sql": QUERY, "limit": 10})
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert [c["name"] for c in document["columns"]] == ["triplet", "key", "payload", "pii"]
    secret = base64.b64encode(b"secret").decode()
    assert document["rows"] == [
        [ids[0], "card-4111", secret, "yes"],
        [ids[1], "card-4111", secret, "yes"],
    ]
    assert document["bytes"] == "base64" and document["contentShown"] is True
    assert document["truncated"] is False and document["limit"] == 10
    snapshot = document["snapshot"]
    assert snapshot["topic"] == topic and len(snapshot["id"]) == 16
    assert snapshot["partitions"][0]["lastEntry"] == ids[1]


def test_a_produce_only_role_reads_null_content(api: Api) -> None:
    topic, ids = _topic(api)
    answer = api.call(PRODUCES, "POST", _path(topic), json={"sql": QUERY})
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [[ids[0], None, None, None], [ids[1], None, None, None]]
    assert answer.json()["contentShown"] is False
    assert "secret" not in answer.text and "card-4111" not in answer.text


def test_refused_sql_is_a_400_and_no_grant_a_403(api: Api) -> None:
    topic, _ = _topic(api)
    for sql in ("COPY backlog TO '/tmp/x'", "SELECT * FROM read_csv('/etc/passwd')", "SELEKT"):
        answer = api.call(PEEKS, "POST", _path(topic), json={"sql": sql})
        assert answer.status_code == 400, (sql, answer.text)
        assert "Query" in answer.text
    answer = api.call(PEEKS, "POST", _path(topic), json={"sql": QUERY, "limit": 0})
    assert answer.status_code == 400 and "Invalid limit" in answer.text
    answer = api.call(PEEKS, "POST", _path(topic), json={"sql": QUERY, "other": 1})
    assert answer.status_code == 400
    assert api.call("carol", "POST", _path(topic), json={"sql": QUERY}).status_code == 403

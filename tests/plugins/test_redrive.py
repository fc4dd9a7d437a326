"""``POST .../subscription/{subscription}/redrive``: the direct door of a dead-letter redrive."""

from __future__ import annotations

import uuid

from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from tests.plugins.conftest import APPROVAL_NS, OPEN_NS, Api, rest_path


def _topic_with_dlq(api: Api, namespace: str = OPEN_NS) -> str:
    """A topic with subscriptions ``a`` and ``b`` and three messages dead-lettered for ``a``."""
    topic = f"persistent://{namespace}/t{uuid.uuid4().hex[:8]}"
    with Broker(api.config) as broker:
        broker.admin.create_topic("admin", topic)
        for sub in ("a", "b"):
            broker.admin.create_subscription("admin", topic, sub, SubscriptionType.SHARED)
        dlq = f"{topic}-a-DLQ"
        broker.admin.create_topic("admin", dlq)
        broker.admin.create_subscription(
            "admin", dlq, "reader", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", dlq, [OutgoingMessage(b"%d" % i, key=f"k{i}") for i in range(3)]
        )
    return topic


def _redrive(api: Api, user: str, topic: str, body: object = None, sub: str = "a") -> object:
    path = rest_path(topic) + f"/subscription/{sub}/redrive"
    return api.call(user, "POST", path, json=body)


def test_redrive_preview_then_apply(api: Api) -> None:
    topic = _topic_with_dlq(api)
    preview = _redrive(api, "admin", topic, {"preview": True, "predicate": {"key": "k1"}})
    assert preview.status_code == 200, preview.text
    assert preview.json()["messages"] == 1
    assert api.backlog(topic, "a") == 0
    answer = _redrive(api, "admin", topic)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["redriven"] == 3 and document["acknowledgedOn"] == ["b"]
    assert api.backlog(topic, "a") == 3
    assert api.backlog(topic, "b") == 0
    assert "redrive" in api.audit(topic)


def test_redrive_refusals(api: Api) -> None:
    topic = _topic_with_dlq(api)
    # alice may consume, not produce.
    assert _redrive(api, "alice", topic).status_code == 403
    assert _redrive(api, "admin", topic, sub="b").status_code == 404
    assert _redrive(api, "admin", topic, {"nope": 1}).status_code == 400
    assert _redrive(api, "admin", topic + "-partition-0").status_code == 400
    approval = _topic_with_dlq(api, APPROVAL_NS)
    # Where approval is required the workflow starts, with a reason (none given: refused).
    refused = _redrive(api, "admin", approval)
    assert refused.status_code == 400
    assert "A reason is required: redrive" in refused.json()["reason"]
    assert api.backlog(approval, "a") == 0
    assert api.backlog(topic, "a") == 0

"""pulsar-admin's day-one admin paths on the REST app, served with a test door (the caller's
Pulsar role in a header): deleting tenants, namespaces and topics with Pulsar's status codes,
the namespace's auto-creation of topics, and every id form in a skip. A refusal changes
nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request
from fastapi.testclient import TestClient

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import Run, RunStarter
from cursorops.core.services.producer import OutgoingMessage
from cursorops.rest.app import create_app
from cursorops.rest.deps import Principal

TOPIC = "persistent://acme/ops/orders"
EVENTS = "persistent://acme/ops/events"
GATED = "persistent://acme/gated/orders"


def _who(request: Request) -> Principal:
    role = request.headers.get("x-role", "admin")
    return Principal(role, role)


class _NoRuns:
    """No request of these tests waits for an approval."""

    def authorize(self, workflow: str, requester: str) -> None:
        raise AssertionError(f"{workflow} asked for by {requester}")

    def start(self, run: Run, digest: str, requester: str) -> Run:
        raise AssertionError("authorize refuses every run")


def _no_runs(request: Request) -> RunStarter:
    return _NoRuns()


class Api:
    def __init__(self, client: TestClient, broker: Broker) -> None:
        self.client = client
        self.broker = broker

    def call(self, method: str, path: str, role: str = "admin", **kwargs: Any) -> Any:
        return self.client.request(method, path, headers={"x-role": role}, **kwargs)

    def state(self) -> object:
        b = self.broker
        namespaces = {t: b.admin.list_namespaces("admin", t) for t in b.admin.list_tenants("admin")}
        topics = [
            t.name
            for ns in namespaces.values()
            for n in ns
            for t in b.admin.list_topics("admin", n)
        ]
        backlogs = {
            t: {
                s: v["msgBacklog"]
                for s, v in b.analysis.topic_stats("admin", t)
                .to_pulsar_json()["subscriptions"]
                .items()
            }
            for t in topics
        }
        return namespaces, topics, backlogs, {t: len(b.metadata.audit_log(t)) for t in topics}

    def refused(self, status: int, method: str, path: str, role: str = "admin", **kw: Any) -> str:
        before = self.state()
        answer = self.call(method, path, role, **kw)
        assert answer.status_code == status, answer.text
        assert self.state() == before
        return str(answer.json()["reason"])


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with Broker(Config.from_home(tmp_path / "home")) as broker:
        broker.admin.create_tenant("admin", "acme", ["acme-admin"])
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.grant_permission("admin", "acme/ops", "ops", ["consume", "produce"])
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_topic("admin", EVENTS, 2)
        for topic in (TOPIC, EVENTS):
            broker.admin.create_subscription(
                "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
            )
            broker.producing.produce("admin", topic, [OutgoingMessage(b"%d" % i) for i in range(4)])
        broker.admin.create_namespace("admin", "acme/gated")
        broker.admin.set_namespace_policy("admin", "acme/gated", skip_requires_approval=True)
        broker.admin.create_subscription("admin", GATED, "s", SubscriptionType.SHARED)
        app = create_app(_who, _no_runs, broker=broker)
        with TestClient(app) as client:
            yield Api(client, broker)


def test_a_tenant_or_namespace_is_deleted_once_empty(api: Api) -> None:
    reason = api.refused(409, "DELETE", "/admin/v2/tenants/acme")
    assert reason.startswith("The tenant still has active namespaces")
    reason = api.refused(409, "DELETE", "/admin/v2/namespaces/acme/ops")
    assert reason.startswith("Cannot delete non empty namespace acme/ops")
    api.refused(403, "DELETE", "/admin/v2/namespaces/acme/ops", role="ops")
    api.refused(403, "DELETE", "/admin/v2/tenants/acme", role="acme-admin")
    api.refused(404, "DELETE", "/admin/v2/tenants/nosuch")
    api.refused(404, "DELETE", "/admin/v2/namespaces/acme/nosuch")
    for path in ("orders", "events/partitions"):
        assert api.call("DELETE", f"/admin/v2/persistent/acme/ops/{path}").status_code == 204
    answer = api.call("DELETE", "/admin/v2/namespaces/acme/ops", role="acme-admin")
    assert answer.status_code == 204
    assert api.call("GET", "/admin/v2/namespaces/acme").json() == ["acme/gated"]


def test_a_topic_delete_answers_as_pulsar_does(api: Api) -> None:
    reason = api.refused(400, "DELETE", "/admin/v2/persistent/acme/ops/events")
    assert "delete-partitioned-topic" in reason
    api.refused(400, "DELETE", "/admin/v2/persistent/acme/ops/orders/partitions")
    api.refused(400, "DELETE", "/admin/v2/persistent/acme/ops/events-partition-0")
    api.refused(404, "DELETE", "/admin/v2/persistent/acme/ops/nosuch")
    api.refused(403, "DELETE", "/admin/v2/persistent/acme/ops/orders", role="ops")
    consumer = api.broker.reading.dispatcher("admin", TOPIC, "s").subscribe("worker")
    reason = api.refused(412, "DELETE", "/admin/v2/persistent/acme/ops/orders")
    assert "active producers/subscriptions" in reason
    answer = api.call("DELETE", "/admin/v2/persistent/acme/ops/orders", params={"force": "true"})
    assert answer.status_code == 204
    del consumer
    assert [t.name for t in api.broker.admin.list_topics("admin", "acme/ops")] == [EVENTS]
    kinds = sorted(r.kind for r in api.broker.metadata.audit_log(TOPIC))
    assert kinds == ["delete-topic", "unsubscribe"]


def test_an_approval_namespace_keeps_a_topic_with_subscriptions(api: Api) -> None:
    for force in ("false", "true"):
        reason = api.refused(
            403, "DELETE", "/admin/v2/persistent/acme/gated/orders", params={"force": force}
        )
        assert "cursorops_unsubscribe" in reason


def test_auto_topic_creation_is_a_namespace_policy(api: Api) -> None:
    path = "/admin/v2/namespaces/acme/ops/autoTopicCreation"
    api.refused(403, "POST", path, role="ops", json={"allowAutoTopicCreation": False})
    api.refused(400, "POST", path, json={"allowAutoTopicCreation": "no"})
    api.refused(
        400, "POST", path, json={"allowAutoTopicCreation": True, "topicType": "partitioned"}
    )
    assert api.call("POST", path, json={"allowAutoTopicCreation": False}).status_code == 204
    missing = "/admin/v2/persistent/acme/ops/missing/subscription/s"
    reason = api.refused(404, "PUT", missing)
    assert "topics create" in reason
    assert api.call("DELETE", path).status_code == 204
    assert api.call("PUT", missing).status_code == 204
    assert "persistent://acme/ops/missing" in [
        t.name for t in api.broker.admin.list_topics("admin", "acme/ops")
    ]


def test_a_skip_takes_every_id_form(api: Api) -> None:
    ids = api.broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"x") for _ in range(3)])
    body = [ids[0].client_text(), ids[1].triplet() + ":-1", ids[2].to_base64()]
    path = "/admin/v2/persistent/acme/ops/orders/subscription/s/skipByMessageIds"
    reason = api.refused(400, "POST", path, json=["(1,0,-1,-1", *body])
    assert "(ledgerId,entryId,partition,batchIndex)" in reason
    before = api.state()
    answer = api.call("POST", path, json=body)
    assert answer.status_code in (200, 204), answer.text
    assert api.state() != before

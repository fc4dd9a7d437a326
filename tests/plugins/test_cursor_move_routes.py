"""The generated routes of the cursor moves and the audit reads, served with a test door
(the caller's Pulsar role in a header): Pulsar's answers to Pulsar's clients, the outcome
to a client that prefers it, the reset to a message id, and every refusal changing
nothing. Where the namespace requires approval the request's run starts with the plan the
broker made, whatever else the requester sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request
from fastapi.testclient import TestClient

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import Run, RunStarter
from cursorops.core.services.producer import OutgoingMessage
from cursorops.rest.app import create_app
from cursorops.rest.deps import Principal

TOPIC = "persistent://acme/ops/orders"
EVENTS = "persistent://acme/ops/events"
GATED = "persistent://acme/gated/orders"
SUB = "/admin/v2/persistent/acme/ops/orders/subscription/s"
OUTCOME = {"Prefer": "return=representation"}


def _who(request: Request) -> Principal:
    role = request.headers.get("x-role", "admin")
    return Principal(role, role)


class _Runs:
    """Records each run started: the workflow, the plan record's digest, the requester."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str, str]] = []

    def authorize(self, workflow: str, requester: str) -> None:
        return None

    def start(self, run: Run, digest: str, requester: str) -> Run:
        self.started.append((run.dag_id, digest, requester))
        return Run(run.dag_id, run.run_id, f"http://airflow/dags/{run.dag_id}/runs/x/tasks/g")


RUNS = _Runs()


def _runs(request: Request) -> RunStarter:
    return RUNS


class Api:
    def __init__(self, client: TestClient, broker: Broker, ids: list[MessageId]) -> None:
        self.client = client
        self.broker = broker
        self.ids = ids

    def call(self, method: str, path: str, role: str = "admin", **kwargs: Any) -> Any:
        headers = {"x-role": role, **kwargs.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kwargs)

    def state(self) -> object:
        b = self.broker
        backlogs = {
            t: b.analysis.topic_stats("admin", t).to_pulsar_json()["subscriptions"]["s"][
                "msgBacklog"
            ]
            for t in (TOPIC, EVENTS, GATED)
        }
        return backlogs, {t: len(b.metadata.audit_log(t)) for t in (TOPIC, EVENTS, GATED)}

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
        broker.admin.grant_permission("admin", "acme/ops", "ops", ["consume"])
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_topic("admin", EVENTS, 2)
        ids: list[MessageId] = []
        for topic in (TOPIC, EVENTS):
            broker.admin.create_subscription(
                "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
            )
            ids += broker.producing.produce(
                "admin", topic, [OutgoingMessage(b"%d" % i) for i in range(4)]
            )
        broker.admin.create_namespace("admin", "acme/gated")
        broker.admin.set_namespace_policy("admin", "acme/gated", skip_requires_approval=True)
        broker.admin.create_topic("admin", GATED)
        broker.admin.create_subscription(
            "admin", GATED, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        gated = broker.producing.produce(
            "admin", GATED, [OutgoingMessage(b"%d" % i) for i in range(4)]
        )
        app = create_app(_who, _runs, broker=broker)
        with TestClient(app) as client:
            yield Api(client, broker, ids + gated)


def test_a_skip_answers_pulsar_204_and_its_outcome_to_who_prefers_it(api: Api) -> None:
    first, second = api.ids[0], api.ids[1]
    answer = api.call("POST", SUB + "/skipByMessageIds", json=[first.to_base64()])
    assert answer.status_code == 204 and answer.content == b""
    skip_id = int(answer.headers["X-Cursorops-Skip-Id"])
    answer = api.call("POST", SUB + "/skipByMessageIds", json=[second.triplet()], headers=OUTCOME)
    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["skipId"] == skip_id + 1 == int(answer.headers["X-Cursorops-Skip-Id"])
    assert [m["messageId"] for m in outcome["skipped"]] == [second.client_text()]
    assert "messages" not in outcome
    answer = api.call("POST", SUB + "/skip/1", headers=OUTCOME)
    assert answer.status_code == 200 and answer.json()["messages"] == 1
    assert api.call("POST", SUB + "/skip_all").status_code == 204
    skips = api.call("GET", "/admin/v2/persistent/acme/ops/orders/skips").json()
    assert [s["skipId"] for s in skips] == [skip_id + 3, skip_id + 2, skip_id + 1, skip_id]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"ledgerId": 1, "entryId": 0, "batchIndex": 0}, 400, "batchIndex"),
        ({"ledgerId": 1, "entryId": 0, "isExcluded": True}, 400, "isExcluded"),
        ({"ledgerId": 1, "entryId": 0, "excluded": True}, 400, "isExcluded"),
        ({"ledgerId": 1, "entryId": 0, "partitionIndex": 1}, 400, "partitionIndex"),
        ({"ledgerId": 1, "entryId": 0, "properties": {"a": 1}}, 400, "properties"),
        ({"ledgerId": 1, "entryId": 0, "nope": 1}, 400, "'nope'"),
        ({"ledgerId": "1", "entryId": 0}, 400, "ledgerId"),
        ({"ledgerId": -1, "entryId": 0}, 400, "ledgerId"),
        ({"entryId": 0}, 400, "ledgerId"),
        ([1, 0], 400, "Invalid request"),
    ],
)
def test_a_bad_reset_to_a_message_id_changes_nothing(
    api: Api, body: object, status: int, says: str
) -> None:
    assert says in api.refused(status, "POST", SUB + "/resetcursor", json=body)


def test_a_reset_to_a_message_id_takes_pulsars_body(api: Api) -> None:
    api.call("POST", SUB + "/skip_all")
    target = api.ids[2]
    body = {"ledgerId": target.ledger_id, "entryId": target.entry_id, "partitionIndex": -1}
    answer = api.call("POST", SUB + "/resetcursor", json={**body, "batchIndex": -1})
    assert answer.status_code == 204 and answer.content == b""
    assert api.state()[0][TOPIC] == 2  # type: ignore[index]
    answer = api.call("POST", SUB + "/resetcursor", json=body, headers=OUTCOME)
    assert answer.json() == {"markDelete": {TOPIC: f"{target.ledger_id}:{target.entry_id - 1}"}}
    partitioned = "/admin/v2/persistent/acme/ops/events/subscription/s/resetcursor"
    reason = api.refused(400, "POST", partitioned, json=body)
    assert "non-partitioned topic or one partition" in reason
    api.refused(403, "POST", SUB + "/resetcursor", role="nobody", json=body)


def test_the_topic_analysis_and_the_audit_reads_check_their_limits(api: Api) -> None:
    base = "/admin/v2/persistent/acme/ops/events"
    whole = api.call("GET", base + "/analyzeBacklog", params={"engine": "python"}).json()
    assert whole["total"]["messages"] == 4 and whole["subscription"] is None
    assert len(whole["partitions"]) == 2
    one = api.call("GET", base + "-partition-1/analyzeBacklog", params={"subscription": "s"})
    assert [p["topicPartition"] for p in one.json()["partitions"]] == [EVENTS + "-partition-1"]
    api.refused(400, "GET", base + "/analyzeBacklog", params={"engine": "duckdb"})
    api.refused(400, "GET", base + "/analyzeBacklog", params={"sparkThreshold": "-1"})
    for path, params in [
        ("/skips", {"limit": "0"}),
        ("/backlogHistory", {"limit": "1000001"}),
        ("/backlogHistory", {"sinceMs": "-1"}),
        ("/poisonRadar", {"maxListed": "1001"}),
        ("/poisonRadar", {"minRedeliveries": "0"}),
        ("/poisonRadar", {"minAgeSeconds": "-1"}),
    ]:
        assert "Invalid" in api.refused(400, "GET", base + path, params=params), path
    assert api.call("GET", base + "/poisonRadar").status_code == 200
    api.refused(403, "GET", base + "/poisonRadar", role="nobody")


def test_a_gated_move_starts_its_run_with_the_brokers_plan(api: Api) -> None:
    gated = "/admin/v2/persistent/acme/gated/orders/subscription/s"
    assert "reason is required" in api.refused(400, "POST", gated + "/skip/1")
    started = len(RUNS.started)
    answer = api.call(
        "POST",
        gated + "/skip/1",
        headers={**OUTCOME, "X-Cursorops-Reason": "stale", "X-Cursorops-Ticket": "T-1"},
    )
    assert answer.status_code == 202, answer.text
    waiting = answer.json()
    assert waiting["dagId"] == "cursorops_skip_head" and waiting["planDigest"]
    assert RUNS.started[started:] == [("cursorops_skip_head", waiting["planDigest"], "admin")]
    assert api.state()[0][GATED] == 4  # type: ignore[index]
    # A reset to a message id waits the same way: nothing applied.
    target = api.ids[-1]
    body = {"ledgerId": target.ledger_id, "entryId": target.entry_id}
    answer = api.call(
        "POST", gated + "/resetcursor", json=body, headers={"X-Cursorops-Reason": "replay"}
    )
    assert answer.status_code == 202, answer.text
    assert answer.json()["dagId"] == "cursorops_reset_cursor"
    assert api.state()[0][GATED] == 4  # type: ignore[index]

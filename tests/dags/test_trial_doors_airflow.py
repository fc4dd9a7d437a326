"""The doors a two-user trial found around the gate (alice asks, bob approves), on a real
Airflow: each is now gated, or leaves a record an auditor sees."""

from __future__ import annotations

import secrets

import httpx
import pytest

from cursorops.airflow.late_answers import refusal
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from tests.airflow_harness import Airflow
from tests.dags.conftest import seed_topic
from tests.dags.test_gated_operations_airflow import approval_topic, approved, backlog
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_a_drained_subscription_deleted_and_created_at_earliest_gets_nothing_back(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "ledger")
    with Broker(cursorops_home) as broker:
        broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 6)
        broker.reading.consume("admin", topic, "ledger", 6, ack=True)
    path = f"{PREFIX}{rest_path(topic)}/subscription/ledger"
    answer = airflow.request("alice", "DELETE", path, headers={"X-Cursorops-Reason": "drained"})
    states = approved(airflow, answer, "approve_unsubscribe", "Unsubscribe")
    assert states["apply_unsubscribe"] == ["success"]
    for start in ({"ledgerId": -1, "entryId": -1}, {"ledgerId": 0, "entryId": 0}):
        again = airflow.request("alice", "PUT", path + "?subscriptionType=Shared", json=start)
        assert again.status_code == 403, again.text
        assert "cursorops_reset_cursor" in again.json()["reason"]
    assert airflow.request("alice", "PUT", path + "?subscriptionType=Shared").status_code == 204
    assert backlog(cursorops_home, topic, "ledger") == 0


def test_a_redrive_from_a_vault_asks_the_vaults_quorum_and_is_recorded_there(
    airflow: Airflow, cursorops_home: Config
) -> None:
    vault = f"acme/vault-{secrets.token_hex(3)}"
    topic = f"persistent://acme/open-{secrets.token_hex(3)}/orders"
    dlq = f"persistent://{vault}/orders-billing-DLQ"
    with Broker(cursorops_home) as broker:
        for namespace in (vault, topic.removeprefix("persistent://").rsplit("/", 1)[0]):
            broker.admin.create_namespace("admin", namespace)
            for role in ("alice", "bob"):
                broker.admin.grant_permission("admin", namespace, role, ["produce", "consume"])
        broker.admin.create_topic("admin", topic)
        broker.admin.create_subscription("admin", topic, "billing", SubscriptionType.SHARED)
        broker.admin.create_topic("admin", dlq)
        broker.producing.produce("admin", dlq, [OutgoingMessage(b"pill")] * 3)
        broker.admin.set_namespace_policy("admin", vault, skip_requires_approval=True)
        broker.admin.set_approval_quorum("admin", vault, large_above_messages=0, approvals=2)
    answer = airflow.request(
        "alice",
        "POST",
        f"{PREFIX}{rest_path(topic)}/subscription/billing/redrive",
        json={"deadLetterTopic": dlq},
        headers={"X-Cursorops-Reason": "fixed the consumer"},
    )
    assert answer.status_code == 202, answer.text
    dag, run = answer.json()["dagId"], answer.json()["runId"]
    first = airflow.wait_awaiting_input(dag, run, "approve_redrive")
    assert "approval 1 of 2" in first["subject"]
    assert airflow.answer(dag, run, "approve_redrive", "Approve", user="bob").status_code == 200
    airflow.wait_awaiting_input(dag, run, "approve_redrive_2")
    assert backlog(cursorops_home, topic, "billing") == 0  # one approval applies nothing
    assert airflow.answer(dag, run, "approve_redrive_2", "Approve", user="admin").status_code == 200
    assert airflow.wait_run(dag, run) == "success", airflow.task_states(dag, run)
    assert backlog(cursorops_home, topic, "billing") == 3
    with Broker(cursorops_home) as broker:
        [mine] = broker.workflow.audit_log("admin", topic, kind="redrive")
        [theirs] = broker.workflow.audit_log("admin", dlq, kind="redrive")
    assert mine.detail["approvedBy"] == theirs.detail["approvedBy"] == ["bob", "admin"]


def test_a_run_the_requester_forces_green_closes_its_request_as_not_applied(
    airflow: Airflow, cursorops_home: Config
) -> None:
    namespace = f"acme/forced-{secrets.token_hex(3)}"
    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", namespace, role, ["consume"])
    seeded = seed_topic(cursorops_home, namespace=namespace)
    with Broker(cursorops_home) as broker:
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    before = seeded.unacknowledged()
    dag = "cursorops_skip_messages"
    asked = airflow.request(
        "alice",
        "POST",
        f"{PREFIX}{rest_path(seeded.topic)}/subscription/billing/skipByMessageIds",
        json=[m.to_base64() for m in seeded.ids[20:22]],
        headers={"X-Cursorops-Reason": "pills"},
    )
    assert asked.status_code == 202, asked.text
    run = asked.json()["runId"]
    airflow.wait_awaiting_input(dag, run, "approve_skip")
    forced = airflow.request(
        "alice", "PATCH", f"/api/v2/dags/{dag}/dagRuns/{run}", json={"state": "success"}
    )
    assert forced.status_code == 200, forced.text
    # Airflow skips what was pending but still runs the closing record (a teardown): it
    # says nothing was applied, and the run ends red.
    assert airflow.wait_run(dag, run) == "failed"
    states = airflow.task_states(dag, run)
    assert states["approve_skip"] == ["success"] and states["apply_skip"] == ["skipped"]
    assert states["close_request"] == ["failed"]
    with Broker(cursorops_home) as broker:
        record = broker.workflow.current_plan_record("admin", dag, run)
        closings = [
            r.detail
            for r in broker.metadata.audit_log(seeded.topic)
            if r.kind == "skip-request" and r.detail["runId"] == run
        ]
    assert record is not None and record.applied_at_ms is None
    [closing] = closings
    assert closing["outcome"] == "not-approved" and closing["planDigest"] == record.digest
    assert "nothing applied" in str(closing["statement"])
    assert closing["answers"] == [{"gate": "approve_skip", "chosen": None, "by": None, "at": None}]
    # bob's answer after that is refused (its gate no longer waits), and Airflow records
    # nothing; who may not answer gets Airflow's own refusal and learns nothing more.
    late = airflow.answer(dag, run, "approve_skip", "Approve", user="bob")
    assert late.status_code == 409, late.text
    assert late.json()["detail"] == refusal("success")
    assert airflow.answer(dag, run, "approve_skip", "Approve", user="carol").status_code == 403
    anonymous = httpx.patch(
        f"{airflow.base_url}/api/v2/dags/{dag}/dagRuns/{run}/taskInstances/approve_skip/-1/hitlDetails",
        json={"chosen_options": ["Approve"], "params_input": {}},
    )
    assert anonymous.status_code == 401, anonymous.text
    held = airflow.hitl_detail(dag, run, "approve_skip")
    assert held["response_received"] is False and held["chosen_options"] is None
    listed = airflow.get("bob", f"{PREFIX}{rest_path(seeded.topic)}/openRequests")
    assert run not in [r["runId"] for r in listed]
    assert seeded.unacknowledged() == before
    # A late Reject asks for what happened: Airflow takes it, so the gate leaves its list
    # of unanswered ones, and still nothing is applied.
    rejected = airflow.answer(dag, run, "approve_skip", "Reject", user="bob")
    assert rejected.status_code == 200, rejected.text
    assert airflow.hitl_detail(dag, run, "approve_skip")["chosen_options"] == ["Reject"]
    assert airflow.task_states(dag, run)["apply_skip"] == ["skipped"]
    assert seeded.unacknowledged() == before

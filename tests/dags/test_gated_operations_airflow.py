"""Undo-skip, redrive, reset-cursor and unsubscribe where the namespace requires approval:
REST starts each operation's workflow as the caller, a second person approves the preview,
and only then does anything change (the one tail every gated operation shares)."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest

from core.broker import Broker
from core.config import Config
from core.producer import OutgoingMessage
from core.subscription import SubscriptionType
from tests.airflow_harness import Airflow
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def approval_topic(config: Config, *subscriptions: str) -> str:
    """A topic on a fresh namespace that requires approval; alice and bob may produce and
    consume there; ``subscriptions`` are Shared, at earliest."""
    namespace = f"acme/gated-{secrets.token_hex(3)}"
    topic = f"persistent://{namespace}/t"
    with Broker(config) as broker:
        broker.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.grant_permission("admin", namespace, role, ["produce", "consume"])
        broker.create_topic("admin", topic)
        for sub in subscriptions:
            broker.create_subscription(
                "admin", topic, sub, SubscriptionType.SHARED, initial_position="earliest"
            )
        broker.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    return topic


def backlog(config: Config, topic: str, subscription: str) -> int:
    with Broker(config) as broker:
        return sum(a.result.messages for a in broker.analyze_backlog("admin", topic, subscription))


def approved(airflow: Airflow, answer: httpx.Response, gate: str, needle: str) -> dict[str, Any]:
    """The 202's run, waited for at its gate (whose text holds ``needle``), approved by bob
    after alice, the requester, is refused; the run's final task states."""
    assert answer.status_code == 202, answer.text
    body = answer.json()
    dag, run = body["dagId"], body["runId"]
    assert body["url"] == body["runUrl"] + f"/tasks/{gate}/required_actions"
    detail = airflow.wait_awaiting_input(dag, run, gate)
    assert needle in detail["body"], detail["body"]
    assert airflow.answer(dag, run, gate, "Approve", user="alice").status_code == 403
    assert airflow.answer(dag, run, gate, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(dag, run) == "success", airflow.task_states(dag, run)
    return airflow.task_states(dag, run)


def test_undo_skip_waits_for_approval_then_redelivers_the_skip(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "s")
    with Broker(cursorops_home) as broker:
        ids = broker.produce("admin", topic, [OutgoingMessage(b"%d" % i) for i in range(6)])
    path = f"{PREFIX}{rest_path(topic)}/subscription/s"
    with Broker(cursorops_home) as broker:
        namespace = "/".join(topic.removeprefix("persistent://").split("/")[:2])
        broker.set_namespace_policy("admin", namespace, skip_requires_approval=False)
        skip_id = broker.skip_messages("admin", topic, "s", ids[1:4]).skip_id
        broker.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    assert backlog(cursorops_home, topic, "s") == 3
    answer = airflow.request(
        "alice", "POST", f"{path}/undoSkip/{skip_id}", headers={"X-Cursorops-Reason": "wrong ids"}
    )
    assert backlog(cursorops_home, topic, "s") == 3  # nothing before the approval
    states = approved(airflow, answer, "approve_undo_skip", "Undo skip")
    assert states["apply_undo_skip"] == ["success"]
    assert backlog(cursorops_home, topic, "s") == 6
    with Broker(cursorops_home) as broker:
        [record] = [r for r in broker.audit_log("admin", topic) if r.kind == "undo-skip-request"]
    assert record.detail["outcome"] == "applied" and record.detail["requester"] == "alice"


def test_redrive_waits_for_approval_then_reaches_only_the_failing_subscription(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "a", "b", "c")
    dlq = f"{topic}-a-DLQ"
    with Broker(cursorops_home) as broker:
        broker.create_topic("admin", dlq)
        broker.create_subscription(
            "admin", dlq, "reader", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.produce("admin", dlq, [OutgoingMessage(b"poison", key=f"k{i}") for i in range(3)])
    answer = airflow.request(
        "alice",
        "POST",
        f"{PREFIX}{rest_path(topic)}/subscription/a/redrive",
        headers={"X-Cursorops-Reason": "fixed the consumer"},
    )
    assert backlog(cursorops_home, topic, "a") == 0
    states = approved(airflow, answer, "approve_redrive", "Redrive")
    assert states["apply_redrive"] == ["success"]
    assert [backlog(cursorops_home, topic, s) for s in ("a", "b", "c")] == [3, 0, 0]
    assert backlog(cursorops_home, dlq, "reader") == 0


def test_reset_cursor_waits_for_approval_then_moves_back(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "s")
    with Broker(cursorops_home) as broker:
        broker.produce("admin", topic, [OutgoingMessage(b"x")] * 5)
        broker.consume("admin", topic, "s", 5, ack=True)
    answer = airflow.request(
        "alice",
        "POST",
        f"{PREFIX}{rest_path(topic)}/subscription/s/resetcursor/0",
        headers={"X-Cursorops-Reason": "replay after the fix"},
    )
    assert backlog(cursorops_home, topic, "s") == 0
    states = approved(airflow, answer, "approve_reset", "Reset cursor")
    assert states["apply_reset"] == ["success"]
    assert backlog(cursorops_home, topic, "s") == 5


def test_unsubscribe_with_a_backlog_waits_for_approval_then_drops_it(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "s", "keep")
    with Broker(cursorops_home) as broker:
        broker.produce("admin", topic, [OutgoingMessage(b"x")] * 4)
    answer = airflow.request(
        "alice",
        "DELETE",
        f"{PREFIX}{rest_path(topic)}/subscription/s",
        headers={"X-Cursorops-Reason": "service retired"},
    )
    with Broker(cursorops_home) as broker:
        assert {s.name for s in broker.list_subscriptions("admin", topic)} == {"s", "keep"}
    states = approved(airflow, answer, "approve_unsubscribe", "Unsubscribe")
    assert states["apply_unsubscribe"] == ["success"]
    with Broker(cursorops_home) as broker:
        assert [s.name for s in broker.list_subscriptions("admin", topic)] == ["keep"]
        [audit] = broker.audit_log("admin", topic, kind="unsubscribe")
    assert audit.detail["dropped"] == 4 and audit.detail["approvedBy"] == ["bob"]

"""Undo-skip, redrive, reset-cursor and unsubscribe where the namespace requires approval:
REST starts each operation's workflow as the caller, a second person approves the preview,
and only then does anything change (the one tail every gated operation shares)."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from tests.airflow_harness import Airflow
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def approval_topic(config: Config, *subscriptions: str) -> str:
    """A topic on a fresh namespace that requires approval; alice and bob may produce and
    consume there; ``subscriptions`` are Shared, at earliest."""
    namespace = f"acme/gated-{secrets.token_hex(3)}"
    topic = f"persistent://{namespace}/t"
    with Broker(config) as broker:
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", namespace, role, ["produce", "consume"])
        broker.admin.create_topic("admin", topic)
        for sub in subscriptions:
            broker.admin.create_subscription(
                "admin", topic, sub, SubscriptionType.SHARED, initial_position="earliest"
            )
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    return topic


def backlog(config: Config, topic: str, subscription: str) -> int:
    with Broker(config) as broker:
        return sum(
            a.result.messages for a in broker.analysis.analyze_backlog("admin", topic, subscription)
        )


STRUCTURE = (
    "- **Requested by:** alice (Pulsar role alice)",
    "- **Approvals needed:** 1 (distinct people, none the requester); none given yet",
    "**Effect** (exact, at planning time)",
    "**Per partition**",
    "| partition |",
)
"""What every gate's body holds, in this order: the one preview layout."""


def approved(airflow: Airflow, answer: httpx.Response, gate: str, *needles: str) -> dict[str, Any]:
    """The 202's run, waited for at its gate (whose text holds the structured preview and
    ``needles``), approved by bob after alice, the requester, is refused; the run's final
    task states."""
    assert answer.status_code == 202, answer.text
    body = answer.json()
    dag, run = body["dagId"], body["runId"]
    assert body["url"] == body["runUrl"] + f"/tasks/{gate}/required_actions"
    detail = airflow.wait_awaiting_input(dag, run, gate)
    text = detail["body"]
    places = [text.find(part) for part in STRUCTURE]
    assert -1 not in places and places == sorted(places), text
    for needle in needles:
        assert needle in text, (needle, text)
    assert detail["options"] == ["Approve", "Reject"]
    assert airflow.answer(dag, run, gate, "Approve", user="alice").status_code == 403
    assert airflow.answer(dag, run, gate, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(dag, run) == "success", airflow.task_states(dag, run)
    return airflow.task_states(dag, run)


def test_undo_skip_waits_for_approval_then_redelivers_the_skip(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "s")
    with Broker(cursorops_home) as broker:
        ids = broker.producing.produce(
            "admin", topic, [OutgoingMessage(b"%d" % i) for i in range(6)]
        )
    path = f"{PREFIX}{rest_path(topic)}/subscription/s"
    with Broker(cursorops_home) as broker:
        namespace = "/".join(topic.removeprefix("persistent://").split("/")[:2])
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=False)
        skip_id = skips.skip_messages(broker.gated, "admin", topic, "s", ids[1:4]).skip_id
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    assert backlog(cursorops_home, topic, "s") == 3
    answer = airflow.request(
        "alice", "POST", f"{path}/undoSkip/{skip_id}", headers={"X-Cursorops-Reason": "wrong ids"}
    )
    assert backlog(cursorops_home, topic, "s") == 3  # nothing before the approval
    states = approved(
        airflow,
        answer,
        "approve_undo_skip",
        f"### Undo skip {skip_id}: redeliver 3 message(s) on",
        "- **To be redelivered:** 3 message(s)",
        "- **The skip it undoes was approved by:** nobody (it was applied where no approval "
        "was required)",
    )
    assert states["apply_undo_skip"] == ["success"]
    assert backlog(cursorops_home, topic, "s") == 6
    with Broker(cursorops_home) as broker:
        [record] = [
            r for r in broker.workflow.audit_log("admin", topic) if r.kind == "undo-skip-request"
        ]
    assert record.detail["outcome"] == "applied" and record.detail["requester"] == "alice"


def test_redrive_waits_for_approval_then_reaches_only_the_failing_subscription(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "a", "b", "c")
    dlq = f"{topic}-a-DLQ"
    with Broker(cursorops_home) as broker:
        broker.admin.create_topic("admin", dlq)
        broker.admin.create_subscription(
            "admin", dlq, "reader", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", dlq, [OutgoingMessage(b"poison", key=f"k{i}") for i in range(3)]
        )
    answer = airflow.request(
        "alice",
        "POST",
        f"{PREFIX}{rest_path(topic)}/subscription/a/redrive",
        headers={"X-Cursorops-Reason": "fixed the consumer"},
    )
    assert backlog(cursorops_home, topic, "a") == 0
    states = approved(
        airflow,
        answer,
        "approve_redrive",
        "### Redrive 3 message(s) from the dead-letter topic on",
        "- **To be redelivered:** 3 message(s)",
    )
    assert states["apply_redrive"] == ["success"]
    assert [backlog(cursorops_home, topic, s) for s in ("a", "b", "c")] == [3, 0, 0]
    assert backlog(cursorops_home, dlq, "reader") == 0


def test_reset_cursor_waits_for_approval_then_moves_back(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "s")
    with Broker(cursorops_home) as broker:
        broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 5)
        broker.reading.consume("admin", topic, "s", 5, ack=True)
    answer = airflow.request(
        "alice",
        "POST",
        f"{PREFIX}{rest_path(topic)}/subscription/s/resetcursor/0",
        headers={"X-Cursorops-Reason": "replay after the fix"},
    )
    assert backlog(cursorops_home, topic, "s") == 0
    states = approved(
        airflow,
        answer,
        "approve_reset",
        "### Reset cursor: redeliver 5 message(s) on",
        "- **Backlog:** 0 message(s) now, **5** after",
        "- **To be redelivered:** 5 message(s)",
        "- **To be acknowledged:** 0 message(s)",
        "| partition | backlog | mark-delete → next read |",
    )
    assert states["apply_reset"] == ["success"]
    assert backlog(cursorops_home, topic, "s") == 5


def test_unsubscribe_with_a_backlog_waits_for_approval_then_drops_it(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "s", "keep")
    with Broker(cursorops_home) as broker:
        broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 4)
    answer = airflow.request(
        "alice",
        "DELETE",
        f"{PREFIX}{rest_path(topic)}/subscription/s",
        headers={"X-Cursorops-Reason": "service retired"},
    )
    with Broker(cursorops_home) as broker:
        assert {s.name for s in broker.admin.list_subscriptions("admin", topic)} == {"s", "keep"}
    states = approved(
        airflow,
        answer,
        "approve_unsubscribe",
        "### Unsubscribe: delete the subscription and drop 4 message(s) on",
        "- **Dropped with the subscription:** 4 message(s)",
    )
    assert states["apply_unsubscribe"] == ["success"]
    with Broker(cursorops_home) as broker:
        assert [s.name for s in broker.admin.list_subscriptions("admin", topic)] == ["keep"]
        [audit] = broker.workflow.audit_log("admin", topic, kind="unsubscribe")
    assert audit.detail["dropped"] == 4 and audit.detail["approvedBy"] == ["bob"]


def test_an_approve_given_after_a_replan_is_refused_and_nothing_applies(
    airflow: Airflow, cursorops_home: Config
) -> None:
    """Airflow keeps the text a waiting gate showed: the run is re-planned while it waits (a
    newer plan record bound to the run), bob's Approve is taken by Airflow, and the gate
    answers it as stale: it fails, apply never runs, the cursor does not move."""
    from cursorops.core.services.gating import Caller, ResetCursor, Run

    topic = approval_topic(cursorops_home, "s")
    with Broker(cursorops_home) as broker:
        broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 3)
        broker.reading.consume("admin", topic, "s", 3, ack=True)
    answer = airflow.request(
        "alice",
        "POST",
        f"{PREFIX}{rest_path(topic)}/subscription/s/resetcursor/0",
        headers={"X-Cursorops-Reason": "replay"},
    )
    assert answer.status_code == 202, answer.text
    dag, run = answer.json()["dagId"], answer.json()["runId"]
    airflow.wait_awaiting_input(dag, run, "approve_reset")
    with Broker(cursorops_home) as broker:
        broker.plan_request(
            "reset-cursor",
            Caller("alice", "alice"),
            ResetCursor(topic=topic, subscription="s", timestamp_ms=0, reason="again"),
            Run(dag, run),
        )
    assert airflow.answer(dag, run, "approve_reset", "Approve", user="bob").status_code == 200
    assert airflow.wait_run(dag, run) == "failed"
    states = airflow.task_states(dag, run)
    assert states["approve_reset"] == ["failed"] and states["apply_reset"] == ["upstream_failed"]
    gate_try = airflow.task_instance(dag, run, "approve_reset")["try_number"]
    log = airflow.task_log(dag, run, "approve_reset", try_number=gate_try)
    assert "This Approve cannot apply: The run was re-planned" in log
    assert backlog(cursorops_home, topic, "s") == 0
    with Broker(cursorops_home) as broker:
        assert broker.workflow.audit_log("admin", topic, kind="reset-cursor") == []


def test_a_gate_whose_plan_was_replanned_before_it_asks_offers_only_reject(
    airflow: Airflow, cursorops_home: Config
) -> None:
    """The run waits (its DAG paused) while a newer plan record is bound to it: its gate
    says at the top that the request can no longer be approved, and offers Reject only."""
    from cursorops.core.services.gating import Caller, ResetCursor, Run
    from cursorops.core.services.gating.approval_text import STALE

    dag = "cursorops_reset_cursor"
    topic = approval_topic(cursorops_home, "s")
    with Broker(cursorops_home) as broker:
        broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 2)
        broker.reading.consume("admin", topic, "s", 2, ack=True)
    paused = airflow.request("admin", "PATCH", f"/api/v2/dags/{dag}", json={"is_paused": True})
    assert paused.status_code == 200, paused.text
    try:
        answer = airflow.request(
            "alice",
            "POST",
            f"{PREFIX}{rest_path(topic)}/subscription/s/resetcursor/0",
            headers={"X-Cursorops-Reason": "replay"},
        )
        assert answer.status_code == 202, answer.text
        run = answer.json()["runId"]
        with Broker(cursorops_home) as broker:
            newer = broker.plan_request(
                "reset-cursor",
                Caller("alice", "alice"),
                ResetCursor(topic=topic, subscription="s", timestamp_ms=0, reason="again"),
                Run(dag, run),
            )
    finally:
        airflow.request("admin", "PATCH", f"/api/v2/dags/{dag}", json={"is_paused": False})
    detail = airflow.wait_awaiting_input(dag, run, "approve_reset")
    assert detail["body"].startswith(f"> **{STALE}** The run was re\\-planned"), detail["body"]
    assert newer.digest in detail["body"]
    assert detail["options"] == ["Reject"]
    assert airflow.answer(dag, run, "approve_reset", "Approve", user="bob").status_code == 400
    assert airflow.answer(dag, run, "approve_reset", "Reject", user="bob").status_code == 200
    assert airflow.wait_run(dag, run) == "failed"
    assert airflow.task_states(dag, run)["apply_reset"] == ["upstream_failed"]
    assert backlog(cursorops_home, topic, "s") == 0

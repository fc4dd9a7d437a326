"""cursorops_skip_matching on a real Airflow (standalone, LocalExecutor, SQLite, Spark local).

The predicate "still scheduled" finds the seeded topic's three delayed reminders
through the find_messages Spark job; approving the plan cancels them. Every
test checks what a consumer then receives.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.airflow_harness import Airflow
from tests.dags.conftest import SUBSCRIPTION, SeededTopic, label, seed_topic

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG = "cursorops_skip_matching"
GATE = "approve_skip"
TWO_HOURS_MS = 2 * 3_600_000


def conf(seeded: SeededTopic, **extra: Any) -> dict[str, Any]:
    return {
        "topic": seeded.topic,
        "subscription": SUBSCRIPTION,
        "still_scheduled": True,
        "reason": "cancel the reminders of a withdrawn campaign",
        "ticket": "OPS-77",
        **extra,
    }


def delivered_later(seeded: SeededTopic) -> list[str]:
    """Everything a consumer receives two hours from now (delayed messages due by then)."""
    from cursorops.core.services.broker import Broker, wall_clock_ms

    with Broker(seeded.config, clock=lambda: wall_clock_ms() + TWO_HOURS_MS) as broker:
        got = broker.reading.consume("admin", seeded.topic, SUBSCRIPTION, 1000, ack=True)
    return [label(m.message_id) for m in got]


def test_still_scheduled_approved_cancels_the_delayed_messages(airflow: Airflow, cursorops_home):
    airflow.wait_dag(DAG)
    seeded = seed_topic(cursorops_home)
    reminders = {label(m) for m in seeded.ids[-3:]}
    before = seeded.unacknowledged()
    assert reminders <= before
    run = airflow.trigger(DAG, conf(seeded), user="alice")

    detail = airflow.wait_awaiting_input(DAG, run, GATE, timeout=1200)
    assert sorted(u["id"] for u in detail["assigned_users"]) == ["admin", "bob"]
    body = detail["body"]
    assert "Skip 3 message(s), 3 id(s)" in body
    assert "Backlog:** 56 message(s) now, **53** after" in body
    # The predicate reads in words (requester text in it would be inert, backslash-escaped).
    assert "delayed, due at or after the time of the scan" in re.sub(r"\\(.)", r"\1", body)
    assert "reminder #" not in body and "masked" in body  # payloads: on the Cursors page
    assert seeded.unacknowledged() == before

    assert airflow.answer(DAG, run, GATE, "Approve", user="alice").status_code == 403
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, run, timeout=900) == "success", airflow.task_states(DAG, run)

    assert seeded.unacknowledged() == before - reminders
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "applied"
    assert request["answer"]["by"] == "bob"  # type: ignore[index]
    assert request["backlog"] == {"before": 56, "plannedAfter": 53, "after": 53}
    [skip] = seeded.audit("skip")  # one transaction for the whole plan
    assert skip["via"] == "airflow" and len(skip["skipped"]) == 3  # type: ignore[arg-type]

    received = delivered_later(seeded)
    assert sorted(received) == sorted(before - reminders)  # each other one, exactly once
    assert not reminders & set(received)


def test_reject_applies_nothing(airflow: Airflow, cursorops_home):
    airflow.wait_dag(DAG)
    seeded = seed_topic(cursorops_home)
    before = seeded.unacknowledged()
    run = airflow.trigger(DAG, conf(seeded), user="alice")
    airflow.wait_awaiting_input(DAG, run, GATE, timeout=1200)
    assert airflow.answer(DAG, run, GATE, "Reject", user="bob").status_code == 200

    assert airflow.wait_run(DAG, run, timeout=900) == "failed"
    states = airflow.task_states(DAG, run)
    assert states[GATE] == ["failed"]
    assert states["apply_skip"] == ["upstream_failed"]
    assert seeded.unacknowledged() == before
    assert seeded.audit("skip") == []
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "rejected"
    assert sorted(delivered_later(seeded)) == sorted(before)


def test_more_matches_than_the_limit_are_refused(airflow: Airflow, cursorops_home):
    airflow.wait_dag(DAG)
    seeded = seed_topic(cursorops_home)
    before = seeded.unacknowledged()
    run = airflow.trigger(DAG, conf(seeded, limit=2), user="alice")

    assert airflow.wait_run(DAG, run, timeout=1200) == "failed"
    states = airflow.task_states(DAG, run)
    assert states["find_messages"] == ["success"]
    assert states["plan_matched_ids"] == ["failed"]
    assert airflow.task_instance(DAG, run, "plan_matched_ids")["try_number"] == 1  # no retry
    assert states[GATE] == ["upstream_failed"]
    assert "matches 3 messages, above the limit of 2" in airflow.task_log(
        DAG, run, "plan_matched_ids"
    )
    assert seeded.unacknowledged() == before
    assert seeded.audit("skip") == []
    # The refusal is audited on the topic, naming the run and the stage: no content in it.
    [refused] = seeded.audit("skip-refused")
    assert refused["runId"] == run and refused["stage"] == "plan"
    assert "above the limit of 2" in str(refused["reason"])
    assert refused["planDigest"] is None


def test_an_exclusive_subscription_is_refused_before_the_scan_and_audited(
    airflow: Airflow, cursorops_home
):
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.broker import Broker

    airflow.wait_dag(DAG)
    seeded = seed_topic(cursorops_home)
    with Broker(seeded.config) as broker:
        broker.admin.create_subscription(
            "admin", seeded.topic, "exclusive-reader", SubscriptionType.EXCLUSIVE
        )
    run = airflow.trigger(DAG, conf(seeded, subscription="exclusive-reader"), user="alice")

    assert airflow.wait_run(DAG, run, timeout=1200) == "failed"
    states = airflow.task_states(DAG, run)
    assert states["authorize"] == ["failed"]
    assert states["find_messages"] == ["upstream_failed"]  # no Spark job ran
    [refused] = seeded.audit("skip-refused")
    assert refused["runId"] == run and refused["stage"] == "authorize"
    assert "Unsupported subscription type" in str(refused["reason"])
    assert seeded.audit("skip") == []


OLD_KEYS = ("topic", "subscription", "predicateJson", "role", "ledgerRoot", "matchList", "summary")
"""The per-key XComs validate_request once returned and find_messages took its arguments
from: forged too, so that nothing reading them again would go unnoticed."""


def _xcom_path(run: str, key: str | None = None) -> str:
    path = f"/api/v2/dags/{DAG}/dagRuns/{run}/taskInstances/validate_request/xcomEntries"
    return path if key is None else f"{path}/{key}"


def _pause_after_validate(airflow: Airflow, run: str) -> None:
    """Pause the DAG as soon as validate_request has succeeded, so its XComs can be forged
    before find_messages starts (the scheduler queues no task of a paused DAG)."""
    import time

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        states = airflow.task_states(DAG, run)
        if states.get("validate_request") == ["success"]:
            break
        assert states.get("validate_request") not in (["failed"], ["upstream_failed"]), states
        time.sleep(0.2)
    paused = airflow.request("admin", "PATCH", f"/api/v2/dags/{DAG}", json={"is_paused": True})
    assert paused.status_code == 200, paused.text
    started = airflow.task_states(DAG, run).get("find_messages", ["none"])
    assert started in (["none"], ["None"], ["scheduled"]), (
        f"find_messages started before the XComs could be forged: {started}"
    )


def test_xcoms_forged_before_the_scan_change_nothing_scanned_written_or_applied(
    airflow: Airflow, cursorops_home, tmp_path
):
    """alice asks to cancel 3 reminders. Once validate_request has stored her request, she
    rewrites every XCom of that task (each key and ``return_value``): another topic, a
    predicate matching everything, the admin role, a ledger root of hers, and for the
    match list and summary a folder and a file outside the run's scratch folder. The scan
    reads the request from the store, writes only in the run's scratch folder, the gate
    shows the 3 reminders, and exactly those are skipped; her folder and file are as
    they were, and the other topic keeps its backlog."""
    from cursorops.core.services.broker import Broker

    airflow.wait_dag(DAG)
    seeded = seed_topic(cursorops_home)
    other = seed_topic(cursorops_home)
    reminders = {label(m) for m in seeded.ids[-3:]}
    before, other_before = seeded.unacknowledged(), other.unacknowledged()
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "keep.txt").write_text("kept", encoding="utf-8")
    target = tmp_path / "precious.json"
    target.write_text('{"kept": true}', encoding="utf-8")
    ledgers = tmp_path / "ledgers-of-hers"
    ledgers.symlink_to(cursorops_home.ledger_root, target_is_directory=True)
    forged: dict[str, Any] = {
        "topic": other.topic,
        "subscription": SUBSCRIPTION,
        "predicateJson": '{"publishTime": {"after": 0}}',
        "role": "admin",
        "ledgerRoot": str(ledgers),
        "matchList": str(folder),
        "summary": str(target),
    }

    run = airflow.trigger(DAG, conf(seeded), user="alice")
    try:
        _pause_after_validate(airflow, run)
        entries = airflow.get("alice", _xcom_path(run))["xcom_entries"]
        keys = {entry["key"] for entry in entries}
        assert "return_value" in keys
        for key in sorted(keys | set(OLD_KEYS)):
            value = forged.get(key, {**conf(seeded), **forged, "requestDigest": "f" * 64})
            if key in keys:
                response = airflow.request(
                    "alice", "PATCH", _xcom_path(run, key), json={"value": value, "map_index": -1}
                )
            else:
                response = airflow.request(
                    "alice",
                    "POST",
                    _xcom_path(run),
                    json={"key": key, "value": value, "map_index": -1},
                )
            assert response.status_code in (200, 201), (key, response.text)
    finally:
        resumed = airflow.request(
            "admin", "PATCH", f"/api/v2/dags/{DAG}", json={"is_paused": False}
        )
        assert resumed.status_code == 200, resumed.text

    detail = airflow.wait_awaiting_input(DAG, run, GATE, timeout=1200)
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]
    assert (folder / "keep.txt").read_text(encoding="utf-8") == "kept"
    assert target.read_text(encoding="utf-8") == '{"kept": true}'
    assert "Skip 3 message(s), 3 id(s)" in detail["body"]
    assert seeded.topic in detail["body"] and other.topic not in detail["body"]
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, run, timeout=900) == "success", airflow.task_states(DAG, run)

    assert seeded.unacknowledged() == before - reminders
    assert other.unacknowledged() == other_before
    assert other.audit("skip") == []
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]
    assert target.read_text(encoding="utf-8") == '{"kept": true}'
    with Broker(cursorops_home) as broker:
        request = broker.metadata.requests.for_run(DAG, run)
        plan = broker.metadata.plans.current(DAG, run)
    assert request is not None and plan is not None
    assert request.topic == seeded.topic and request.role == "alice"
    assert plan.document["request"] == request.digest

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
    from cursorops.core.broker import Broker, wall_clock_ms

    with Broker(seeded.config, clock=lambda: wall_clock_ms() + TWO_HOURS_MS) as broker:
        got = broker.consume("admin", seeded.topic, SUBSCRIPTION, 1000, ack=True)
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
    from cursorops.core.broker import Broker
    from cursorops.core.subscription import SubscriptionType

    airflow.wait_dag(DAG)
    seeded = seed_topic(cursorops_home)
    with Broker(seeded.config) as broker:
        broker.create_subscription(
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

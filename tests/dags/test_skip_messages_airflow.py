"""cursorops_skip_messages on a real Airflow (standalone, LocalExecutor, SQLite).

Each run is requested as a door requests it (the plan record stored, the run started
over REST as alice with its digest: :func:`tests.dags.conftest.request_skip`);
approvals are answered over REST as the users a person would be. Every test checks the
subscription afterwards: which messages a consumer would still receive. No answer
within the timeout is a rejection: tests/dags/test_dag_test.py checks it (the scheduler's
sweep times out any run's gate, this DAG's included), and tests/plugins/test_ui_pages.py
on a run requested as here.
"""

from __future__ import annotations

import pytest

from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.services.gating import skip as skip_slice
from tests.airflow_harness import Airflow
from tests.dags.conftest import (
    SUBSCRIPTION,
    SeededTopic,
    label,
    request_skip,
    seed_topic,
)

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG = "cursorops_skip_messages"
GATE = "approve_skip"


def triplet(mid: MessageId) -> str:
    return f"{mid.ledger_id}:{mid.entry_id}" + (
        f":{mid.batch_index}" if mid.batch_index >= 0 else ""
    )


def pick(seeded: SeededTopic) -> list[MessageId]:
    """One index inside a batch, one delayed message, and a whole batched entry's first
    index, over at least two partitions; none acknowledged by the seeding."""
    unacked = seeded.unacknowledged()
    chosen: list[MessageId] = []
    partitions: set[int] = set()
    for mid in seeded.ids[10:60]:
        if label(mid) in unacked and mid.partition not in partitions:
            chosen.append(mid)
            partitions.add(mid.partition)
        if len(partitions) == 2:
            break
    chosen.append(seeded.ids[-1])  # delayed, due in an hour: skipping it cancels it
    return chosen


def assert_untouched(seeded: SeededTopic, before: set[str]) -> None:
    assert seeded.unacknowledged() == before
    assert seeded.audit("skip") == []


def test_approved_by_a_second_user_skips_exactly_the_plan(airflow: Airflow, cursorops_home):
    seeded = seed_topic(cursorops_home)
    ids = pick(seeded)
    before = seeded.unacknowledged()
    run = request_skip(airflow, seeded, ids)

    detail = airflow.wait_awaiting_input(DAG, run, GATE)
    # Four eyes: the permitted approvers (admin is a superuser, bob holds consume), never
    # the requester, nor dave (an Airflow op without the Pulsar permission).
    assert sorted(u["id"] for u in detail["assigned_users"]) == ["admin", "bob"]
    assert "Backlog:** 56 message(s) now, **53** after" in detail["body"]
    # Payloads are masked on Airflow's page (any Airflow user may open it).
    assert "reminder" not in detail["body"] and "masked" in detail["body"]
    # Messages counted as messages: the whole batched entry counts its 5.
    assert detail["subject"].startswith(f"Skip {len(ids)} message(s), {len(ids)} id(s)") or (
        " id(s) on " in detail["subject"]
    )
    assert seeded.unacknowledged() == before  # planning changed nothing

    refused = airflow.answer(DAG, run, GATE, "Approve", user="alice")
    assert refused.status_code == 403, refused.text
    refused = airflow.answer(DAG, run, GATE, "Approve", user="dave")
    assert refused.status_code == 403, refused.text
    assert seeded.unacknowledged() == before

    # Someone acknowledges one planned message between the preview and the approval.
    from cursorops.core.services.broker import Broker

    with Broker(seeded.config) as broker:
        skip_slice.skip_messages(broker.gated, "admin", seeded.topic, SUBSCRIPTION, [ids[0]])

    approved = airflow.answer(DAG, run, GATE, "Approve", user="bob")
    assert approved.status_code == 200, approved.text
    assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)

    states = airflow.task_states(DAG, run)
    assert states["apply_skip"] == ["success"]
    assert seeded.unacknowledged() == before - {label(m) for m in ids}
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "applied"
    assert request["requester"] == "alice"
    assert request["answer"]["by"] == "bob"  # type: ignore[index]
    assert request["reason"] == "poison pills from a bad producer"
    assert request["ticket"] == "OPS-42"
    assert request["backlog"] == {"before": 56, "plannedAfter": 53, "after": 53}
    meanwhile = {
        p: v["acknowledgedMeanwhile"]
        for p, v in request["perPartition"].items()  # type: ignore[attr-defined]
        if v["acknowledgedMeanwhile"]
    }
    assert meanwhile == {f"{seeded.topic}-partition-{ids[0].partition}": [triplet(ids[0])]}
    skips = seeded.audit("skip")
    # The admin's skip meanwhile, then the run's one apply of every partition together.
    assert sorted(str(s["via"]) for s in skips) == ["airflow", "broker"]


def test_reject_applies_nothing_and_says_so(airflow: Airflow, cursorops_home):
    seeded = seed_topic(cursorops_home)
    before = seeded.unacknowledged()
    run = request_skip(airflow, seeded, pick(seeded))
    airflow.wait_awaiting_input(DAG, run, GATE)
    assert airflow.answer(DAG, run, GATE, "Reject", user="bob").status_code == 200

    assert airflow.wait_run(DAG, run) == "failed"
    states = airflow.task_states(DAG, run)
    assert states[GATE] == ["failed"]
    assert states["apply_skip"] == ["upstream_failed"]
    assert_untouched(seeded, before)
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "rejected"
    assert str(request["statement"]).startswith("Rejected by bob")


def test_a_run_started_by_hand_with_another_runs_digest_applies_nothing(
    airflow: Airflow, cursorops_home
):
    """alice's request waits at its gate; mallory's way round it, as alice herself or as
    bob: a run of the DAG started by hand with that request's digest. Each is refused at
    its first gate, without retry, and records nothing; alice's request still waits, and
    bob's approval of it applies exactly it."""
    seeded = seed_topic(cursorops_home)
    ids = pick(seeded)
    before = seeded.unacknowledged()
    run = request_skip(airflow, seeded, ids)
    airflow.wait_awaiting_input(DAG, run, GATE)
    digest = airflow.dag_run(DAG, run)["conf"]["plan_digest"]
    for user in ("alice", "bob"):
        by_hand = airflow.trigger(DAG, {"plan_digest": digest}, user=user)
        assert airflow.wait_run(DAG, by_hand) == "failed"
        states = airflow.task_states(DAG, by_hand)
        assert states[GATE] == ["failed"] and states["apply_skip"] == ["upstream_failed"]
        assert airflow.task_instance(DAG, by_hand, GATE)["try_number"] == 1  # no retry
        assert "not to this run" in airflow.task_log(DAG, by_hand, GATE)
    without = airflow.trigger(DAG, {}, user="alice")
    assert airflow.wait_run(DAG, without) == "failed"
    assert airflow.task_states(DAG, without)[GATE] == ["failed"]
    assert_untouched(seeded, before)
    assert seeded.audit("skip-request") == [] and seeded.audit("skip-refused") == []
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
    assert seeded.unacknowledged() == before - {label(m) for m in ids}


def test_gate_marked_success_by_hand_and_forged_xcom_apply_nothing(
    airflow: Airflow, cursorops_home
):
    seeded = seed_topic(cursorops_home)
    before = seeded.unacknowledged()
    run = request_skip(airflow, seeded, pick(seeded))
    airflow.wait_awaiting_input(DAG, run, GATE)

    base = f"/api/v2/dags/{DAG}/dagRuns/{run}/taskInstances/{GATE}"
    forged = airflow.request(
        "alice",
        "POST",
        f"{base}/xcomEntries",
        json={
            "key": "return_value",
            "value": {
                "chosen_options": ["Approve"],
                "params_input": {},
                "responded_by_user": {"id": "bob", "name": "bob"},
                "responded_at": "2026-01-01T00:00:00Z",
            },
        },
    )
    assert forged.status_code in (200, 201), forged.text
    marked = airflow.request("alice", "PATCH", base, json={"new_state": "success"})
    assert marked.status_code == 200, marked.text

    assert airflow.wait_run(DAG, run) == "failed"
    states = airflow.task_states(DAG, run)
    assert states[GATE] == ["success"]
    assert states["apply_skip"] == ["failed"]
    log = airflow.task_log(DAG, run, "apply_skip")
    assert "No approval on record" in log
    assert_untouched(seeded, before)
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "refused"
    assert "No approval on record" in str(request["statement"])

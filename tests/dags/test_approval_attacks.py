"""A hostile requester against the approval, on a real Airflow, over REST.

alice (the requester, an Airflow op who may also edit task state and XComs)
tries to make bob approve one thing while another is applied, to approve
with fewer people than the namespace asks, or to use an approval after its
time. Each test checks the cursor afterwards: exactly the approved messages
acknowledged, or none.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from cursorops.core.domain.config import Config
from tests.airflow_fixtures import APPROVAL_MINUTE_S
from tests.airflow_harness import Airflow
from tests.dags.conftest import SUBSCRIPTION, SeededTopic, label, request_skip, seed_topic
from tests.dags.test_skip_messages_airflow import assert_untouched, triplet

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG = "cursorops_skip_messages"
GATE = "approve_skip"
SECOND = "approve_skip_2"
QUORUM_NAMESPACE = "acme/quorum"
FAKE_DIGEST = "f" * 64
# The forged plan id line comes last: its 64-digit run is where the body cuts the reason
# (a run without a space is cut, the cut said), and what comes before it is shown inert.
HIDDEN = (
    "one pill from a bad producer\n| forged | row |\n[click](javascript:alert(1)) <b>bold</b> "
    "\u202eevil\n<!--\n**Plan id:** `" + FAKE_DIGEST + "`\n-->"
)


def first_unacked(seeded: SeededTopic, count: int, start: int = 10) -> list[Any]:
    before = seeded.unacknowledged()
    return [m for m in seeded.ids[start:60] if label(m) in before][:count]


def xcom_path(run: str, task: str, key: str = "return_value") -> str:
    return f"/api/v2/dags/{DAG}/dagRuns/{run}/taskInstances/{task}/xcomEntries/{key}"


def forge_required_approvals(airflow: Airflow, run: str, value: int) -> None:
    """alice writes the first gate's ``required_approvals`` XCom (creates it, or PATCHes it
    where a gate wrote one), as any Airflow user with edit rights may."""
    created = airflow.request(
        "alice",
        "POST",
        f"/api/v2/dags/{DAG}/dagRuns/{run}/taskInstances/{GATE}/xcomEntries",
        json={"key": "required_approvals", "value": value},
    )
    if created.status_code in (200, 201):
        return
    patched = airflow.request(
        "alice",
        "PATCH",
        xcom_path(run, GATE, "required_approvals"),
        json={"value": value, "map_index": -1},
    )
    assert patched.status_code == 200, (created.text, patched.text)


def test_hidden_line_in_the_reason_is_shown_as_text_and_applies_only_the_plan(
    airflow: Airflow, cursorops_home: Config
):
    seeded = seed_topic(cursorops_home)
    [pill] = first_unacked(seeded, 1)
    before = seeded.unacknowledged()
    run = request_skip(airflow, seeded, [pill], reason=HIDDEN)
    detail = airflow.wait_awaiting_input(DAG, run, GATE)
    body = str(detail["body"])
    # The requester's text is inert: escaped, on one line, no forged plan id line.
    assert "\\<\\!\\-\\-" in body and "\n<!--" not in body
    assert "\\[click\\]\\(javascript\\:alert\\(1\\)\\)" in body
    assert "\\\\u\\{202E\\}" in body
    assert body.count("**Plan id:**") == 1 and FAKE_DIGEST not in body.split("\n", 1)[0]
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
    assert seeded.unacknowledged() == before - {label(pill)}
    [request] = seeded.audit("skip-request")
    assert request["reason"] == HIDDEN and request["approvedBy"] == ["bob"]


def test_xcoms_written_while_the_gate_waits_change_nothing_applied(
    airflow: Airflow, cursorops_home: Config
):
    """alice asks for 1 message, and for 10 in another request of hers; while the 1-message
    gate waits, she writes the gate's XComs: a result naming the 10-message plan's digest
    and approved by bob, and the count of approvals it needs. Nothing reads a plan or an
    approval from an XCom: bob approves what he sees, and exactly that 1 message is
    applied; the 10-message request applies nothing (its own gate is rejected)."""
    seeded = seed_topic(cursorops_home)
    pills = first_unacked(seeded, 11)
    before = seeded.unacknowledged()
    big = request_skip(airflow, seeded, pills[1:11])
    airflow.wait_parked(DAG, big, GATE)
    big_digest = airflow.dag_run(DAG, big)["conf"]["plan_digest"]

    run = request_skip(airflow, seeded, pills[:1], reason=HIDDEN)
    detail = airflow.wait_awaiting_input(DAG, run, GATE)
    assert "Skip 1 message(s)" in detail["subject"]
    forged = airflow.request(
        "alice",
        "POST",
        f"/api/v2/dags/{DAG}/dagRuns/{run}/taskInstances/{GATE}/xcomEntries",
        json={
            "key": "return_value",
            "value": {"planDigest": big_digest, "chosen_options": ["Approve"]},
        },
    )
    assert forged.status_code in (200, 201), forged.text
    forge_required_approvals(airflow, run, 9)
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    # Every gate reads the count from the record, which needs one: the forged 9 is ignored.
    assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
    assert airflow.task_states(DAG, run)[SECOND] == ["skipped"]
    assert seeded.unacknowledged() == before - {label(pills[0])}
    assert airflow.answer(DAG, big, GATE, "Reject", user="bob").status_code == 200
    assert airflow.wait_run(DAG, big) == "failed"
    assert seeded.unacknowledged() == before - {label(pills[0])}
    [skip] = seeded.audit("skip")
    assert skip["skipped"] == [triplet(pills[0])]
    outcomes = sorted(str(r["outcome"]) for r in seeded.audit("skip-request"))
    assert outcomes == ["applied", "rejected"]


def _clear(airflow: Airflow, run: str, tasks: list[str] | None = None) -> None:
    body: dict[str, Any] = {
        "dry_run": False,
        "dag_run_id": run,
        "only_failed": False,
        "reset_dag_runs": True,
        "include_downstream": True,
    }
    if tasks is not None:
        body["task_ids"] = tasks
    cleared = airflow.request("alice", "POST", f"/api/v2/dags/{DAG}/clearTaskInstances", json=body)
    assert cleared.status_code == 200, cleared.text


def _wait_state(airflow: Airflow, run: str, task: str, states: set[str]) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if airflow.task_instance(DAG, run, task)["state"] in states:
            return
        time.sleep(1)
    raise TimeoutError(f"{task} of {run} never reached {states}")


def test_reruns_tell_the_truth(airflow: Airflow, cursorops_home: Config):
    from cursorops.core.services.broker import Broker

    seeded = seed_topic(cursorops_home)
    pills = first_unacked(seeded, 3)
    before = seeded.unacknowledged()
    run = request_skip(airflow, seeded, pills)
    first = airflow.wait_awaiting_input(DAG, run, GATE)
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, run) == "success"
    assert seeded.unacknowledged() == before - {label(m) for m in pills}

    # Clearing apply after the approval: the plan is applied at most once; the run fails.
    _clear(airflow, run, ["apply_skip"])
    assert airflow.wait_run(DAG, run) == "failed"
    latest = airflow.task_instance(DAG, run, "apply_skip")["try_number"]
    assert "applied already" in airflow.task_log(DAG, run, "apply_skip", try_number=latest)
    [refused] = seeded.audit("skip-refused")
    assert "applied already" in str(refused["reason"])
    outcomes = [str(r["outcome"]) for r in seeded.audit("skip-request")]
    assert outcomes == ["refused", "applied"]  # newest first

    # Clearing the whole finished run: the request was closed. The gate refuses to ask
    # again (Airflow would show the first run's text), records nothing, nothing is applied.
    _clear(airflow, run)
    assert airflow.wait_run(DAG, run) == "failed"
    states = airflow.task_states(DAG, run)
    assert states[GATE] == ["failed"] and states["apply_skip"] == ["upstream_failed"]
    gate_try = airflow.task_instance(DAG, run, GATE)["try_number"]
    log = airflow.task_log(DAG, run, GATE, try_number=gate_try)
    assert "This request was closed" in log and "Make a new request" in log
    with Broker(cursorops_home) as broker:
        assert [r.gate for r in broker.workflow.approval_requests(DAG, run)] == [GATE]
        [answer] = broker.workflow.approval_answers(DAG, run)
    assert answer.responded_by == "bob" and answer.request.try_number == 1
    assert seeded.unacknowledged() == before - {label(m) for m in pills}
    assert len(seeded.audit("skip")) == 1
    # The re-run ends red with a closing record of its own that says why.
    closings = seeded.audit("skip-request")
    assert [str(r["outcome"]) for r in closings] == ["refused", "refused", "applied"]
    assert str(closings[0]["statement"]).startswith(f"{GATE} refused: This request was closed")
    assert "applied nothing" in str(closings[0]["statement"])

    # A new request is a new run: its own plan record, its own fresh preview.
    again = request_skip(airflow, seeded, pills)
    second = airflow.wait_awaiting_input(DAG, again, GATE)
    assert second["body"] != first["body"]
    assert "Already acknowledged, left as is:** 3 message(s)" in second["body"]
    assert "Already acknowledged, left as is:** 0 message(s)" in first["body"]
    assert "### Skip 0 message(s), 0 id(s); 3 already acknowledged on" in second["body"]
    assert airflow.answer(DAG, again, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, again) == "success"
    newest = seeded.audit("skip-request")[0]
    assert newest["outcome"] == "applied" and newest["runId"] == again
    assert str(newest["statement"]).startswith("Approved by bob: 0 id(s) acknowledged")
    assert seeded.unacknowledged() == before - {label(m) for m in pills}


@pytest.fixture(scope="module")
def quorum_namespace(cursorops_home: Config) -> str:
    from cursorops.core.services.broker import Broker

    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", QUORUM_NAMESPACE)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", QUORUM_NAMESPACE, role, ["consume"])
        broker.admin.set_approval_quorum(
            "admin", QUORUM_NAMESPACE, large_above_messages=2, approvals=2
        )
    return QUORUM_NAMESPACE


def test_a_quorum_plan_approved_by_one_person_applies_nothing(
    airflow: Airflow, cursorops_home: Config, quorum_namespace: str
):
    seeded = seed_topic(cursorops_home, namespace=quorum_namespace)
    pills = first_unacked(seeded, 3)
    before = seeded.unacknowledged()
    run = request_skip(airflow, seeded, pills)
    detail = airflow.wait_awaiting_input(DAG, run, GATE)
    assert "approval 1 of 2" in detail["subject"]
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    second = airflow.wait_awaiting_input(DAG, run, SECOND)
    assert [u["id"] for u in second["assigned_users"]] == ["admin"]  # neither alice nor bob
    assert airflow.answer(DAG, run, SECOND, "Approve", user="bob").status_code == 403
    base = f"/api/v2/dags/{DAG}/dagRuns/{run}/taskInstances/{SECOND}"
    marked = airflow.request("alice", "PATCH", base, json={"new_state": "success"})
    assert marked.status_code == 200, marked.text
    assert airflow.wait_run(DAG, run) == "failed"
    assert "nobody answered the approval gate approve_skip_2" in airflow.task_log(
        DAG, run, "apply_skip"
    )
    assert_untouched(seeded, before)


def test_an_expired_approval_applies_nothing_and_a_full_quorum_applies(
    airflow: Airflow, cursorops_home: Config, quorum_namespace: str
):
    seeded = seed_topic(cursorops_home, namespace=quorum_namespace)
    pills = first_unacked(seeded, 3)
    before = seeded.unacknowledged()
    late = request_skip(
        airflow, seeded, pills, approval_valid_minutes=1, approval_timeout_minutes=10
    )
    fresh = request_skip(airflow, seeded, pills)
    airflow.wait_awaiting_input(DAG, late, GATE)
    assert airflow.answer(DAG, late, GATE, "Approve", user="bob").status_code == 200
    approved = time.monotonic()  # after Airflow recorded bob's answer
    airflow.wait_awaiting_input(DAG, late, SECOND)
    # bob's approval is now older than its minute (counted from his answer, not from here).
    time.sleep(max(0.0, approved + APPROVAL_MINUTE_S + 2 - time.monotonic()))
    assert airflow.answer(DAG, late, SECOND, "Approve", user="admin").status_code == 200
    assert airflow.wait_run(DAG, late) == "failed"
    # The second gate finds the first approval expired: it records the Approve, refuses it,
    # and apply never runs.
    assert "expired" in airflow.task_log(DAG, late, SECOND)
    assert airflow.task_states(DAG, late)["apply_skip"] == ["upstream_failed"]
    assert_untouched(seeded, before)
    # Its closing record says why: the Approve was refused, the first approval had expired.
    [closing] = seeded.audit("skip-request")
    assert closing["outcome"] == "refused" and closing["runId"] == late
    assert str(closing["statement"]).startswith(f"{SECOND} refused: This Approve cannot apply")
    assert "expired" in str(closing["statement"]) and closing["approvedBy"] == []
    assert [a["chosen"] for a in closing["answers"]] == [["Approve"], ["Approve"]]

    airflow.wait_awaiting_input(DAG, fresh, GATE)
    # A count forged downwards skips no gate: the second reads the record, which needs two.
    forge_required_approvals(airflow, fresh, 1)
    assert airflow.answer(DAG, fresh, GATE, "Approve", user="bob").status_code == 200
    airflow.wait_awaiting_input(DAG, fresh, SECOND)
    assert airflow.answer(DAG, fresh, SECOND, "Approve", user="admin").status_code == 200
    assert airflow.wait_run(DAG, fresh) == "success", airflow.task_states(DAG, fresh)
    assert seeded.unacknowledged() == before - {label(m) for m in pills}
    [applied] = [r for r in seeded.audit("skip-request") if r["outcome"] == "applied"]
    assert applied["approvedBy"] == ["bob", "admin"]
    [skip] = seeded.audit("skip")
    assert skip["approvedBy"] == ["bob", "admin"]
    assert sorted(skip["skipped"]) == sorted(triplet(m) for m in pills)  # type: ignore[arg-type]


def test_every_door_of_an_approval_namespace_asks_first(
    airflow: Airflow, cursorops_home: Config, tmp_path
):
    """REST reset-cursor and unsubscribe, and a CLI skip, on a namespace that requires
    approval: nothing applied, the cursor unchanged. REST asks for a reason to request the
    operation (tests/dags/test_gated_operations_airflow.py goes on from there); the CLI on
    the home refuses: it has no workflow to start."""
    import subprocess
    import sys

    from cursorops.core.services.broker import Broker

    seeded = seed_topic(cursorops_home)
    namespace = "acme/approved"
    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", namespace)
        broker.admin.grant_permission("admin", namespace, "alice", ["consume"])
    guarded = seed_topic(cursorops_home, namespace=namespace)
    with Broker(cursorops_home) as broker:
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    before = guarded.unacknowledged()
    short = guarded.topic.removeprefix("persistent://")
    path = f"/cursorops/admin/v2/persistent/{short}/subscription/{SUBSCRIPTION}"
    reset = airflow.request("alice", "POST", f"{path}/resetcursor/{2**62}")
    assert reset.status_code == 400, reset.text
    assert "A reason is required" in reset.json()["reason"]
    gone = airflow.request("alice", "DELETE", path, params={"force": True})
    assert gone.status_code == 400, gone.text
    assert "A reason is required" in gone.json()["reason"]
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "cursorops.cli.main",
            "--home",
            str(cursorops_home.home),
            "--role",
            "alice",
            "topics",
            "skip-messages",
            guarded.topic,
            "-s",
            SUBSCRIPTION,
            "--messageId-triplet",
            triplet(first_unacked(guarded, 1)[0]),
            "--reason",
            "poison pill",
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert cli.returncode == 5, cli.stderr
    assert "requires a second person's approval" in cli.stderr
    assert guarded.unacknowledged() == before
    assert seeded.unacknowledged()  # the other namespace is untouched by the policy

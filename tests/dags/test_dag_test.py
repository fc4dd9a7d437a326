"""Each DAG through ``dag.test()`` on SQLite, the approval answered over Airflow's REST API.

``dag.test(run_conf=...)`` runs in a subprocess whose environment is the
session Airflow's (:meth:`Airflow.environment`: same AIRFLOW_HOME, SQLite
metadata database, DAGs folder and connections), so the running api-server
takes the HITL REST calls and resumes the gate with the answer. The
DAG is paused in the standalone while dag.test runs it: Airflow's scheduler
only examines runs of unpaused DAGs, so no task runs twice; each test checks
that the scheduler ran none of the run's tasks. The scheduler's awaiting-input
timeout sweep does not look at pauses, so a gate's timeout is applied to a
dag.test run as to any other.

The requester: dag.test() creates its run with ``triggering_user_name="dag_test"``
(hard-coded in Airflow 3.3.2), and the DAGs take the requester from the run
only, never from the conf the requester writes. So the requester here is the
Airflow user ``dag_test`` (an op of the session's SimpleAuthManager), acting as
the Pulsar role of the same name, which holds ``consume`` on this module's own
namespace only. Every test checks the cursor and what a consumer then receives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cursorops.core.domain.config import Config
from tests.airflow_harness import DAG_TEST_USER, Airflow
from tests.dags.conftest import SECRET_NAMESPACE, SUBSCRIPTION, SeededTopic, label, seed_topic
from tests.dags.test_skip_matching_airflow import conf as matching_conf
from tests.dags.test_skip_matching_airflow import delivered_later
from tests.dags.test_skip_messages_airflow import pick

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
MESSAGES = "cursorops_skip_messages"
MATCHING = "cursorops_skip_matching"
AUDIT = "cursorops_backlog_audit"
GATE = "approve_skip"
NAMESPACE = "acme/dag-test"
"""dag_test and bob hold ``consume`` here; a role granted nowhere else, so the real-Airflow
tier's approver lists stay as they are."""
GATE_SETTLE_S = 2.5
"""Answer a gate only after it has waited this long (see airflow-notes: an answer within
about 1 s of parking can race the LocalExecutor; dag.test has no executor, but the answer
reaches the same api-server)."""
MARK = "DAGTEST "
RUNNER = f"""
import json, sys
from datetime import datetime, timezone
from airflow.dag_processing.dagbag import DagBag
from airflow.models.dagrun import DagRun
from airflow.utils.types import DagRunType

path, dag_id, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
dag = DagBag(dag_folder=path).dags[dag_id]
when = datetime.fromisoformat(sys.argv[4]) if len(sys.argv) > 4 else datetime.now(timezone.utc)
run_id = DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=when, run_after=when)
print({MARK!r} + json.dumps({{"run_id": run_id}}), flush=True)
run = dag.test(run_after=when, logical_date=when, run_conf=conf)
print({MARK!r} + json.dumps({{"state": str(run.state)}}), flush=True)
"""


@dataclass
class DagTest:
    """One ``dag.test()`` in its own process (and process group)."""

    dag_id: str
    process: subprocess.Popen[bytes]
    log: Path
    run_id: str = ""

    def marks(self) -> list[dict[str, Any]]:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [
            json.loads(line[len(MARK) :]) for line in text.splitlines() if line.startswith(MARK)
        ]

    def wait_started(self, airflow: Airflow, timeout: float = 300) -> str:
        """The run's id, once dag.test() has created the run (and its task instances)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [m["run_id"] for m in self.marks() if "run_id" in m]
            if found:
                path = f"/api/v2/dags/{self.dag_id}/dagRuns/{found[0]}"
                if airflow.request("admin", "GET", path).status_code == 200:
                    self.run_id = found[0]
                    return self.run_id
            if self.process.poll() is not None:
                raise AssertionError(f"dag.test exited {self.process.returncode}: {self.log}")
            time.sleep(0.5)
        self.kill()
        raise TimeoutError(f"dag.test never created its run: {self.log}")

    def wait(self, timeout: float = 900) -> str:
        """The run's final state, as dag.test() returned it."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TimeoutError(f"dag.test not done after {timeout} s: {self.log}") from None
        states = [m["state"] for m in self.marks() if "state" in m]
        assert self.process.returncode == 0 and states, f"dag.test failed: {self.log}"
        return str(states[0])

    def kill(self) -> None:
        # dag.test() ignores SIGTERM and SIGINT while it waits for an answer.
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture(scope="module")
def granted(cursorops_home: Config) -> Config:
    from cursorops.core.services.broker import Broker

    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", NAMESPACE)
        for role in (DAG_TEST_USER, "bob"):
            broker.admin.grant_permission("admin", NAMESPACE, role, ["consume"])
    return cursorops_home


def now() -> datetime:
    return datetime.now(UTC)


def run_id_at(when: datetime) -> str:
    """The id dag.test() gives the run it creates at ``when`` (the runner's too)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    return str(
        DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=when, run_after=when)
    )


@contextmanager
def dag_test(
    airflow: Airflow,
    dag_id: str,
    conf: dict[str, Any],
    folder: Path,
    when: datetime | None = None,
) -> Iterator[DagTest]:
    """Pause ``dag_id`` in the standalone, start ``dag.test(run_conf=conf)`` (its run at
    ``when``: the id a request's record was bound to) with the session Airflow's
    environment and wait for its run; afterwards check that the scheduler ran none of its
    tasks and unpause."""
    paused = airflow.request("admin", "PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": True})
    paused.raise_for_status()
    log = folder / f"dag-test-{dag_id}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(REPO / "dags" / f"{dag_id}.py"), dag_id]
            + [json.dumps(conf)]
            + ([] if when is None else [when.isoformat()]),
            env=airflow.environment(),
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    run = DagTest(dag_id, process, log)
    try:
        run.wait_started(airflow)
        yield run
        assert airflow.get("admin", f"/api/v2/dags/{dag_id}")["is_paused"] is True
        scheduled = [
            line
            for line in airflow.log.read_text(encoding="utf-8", errors="replace").splitlines()
            if f"TaskInstance Finished: dag_id={dag_id}," in line
            and f"run_id={run.run_id}," in line
        ]
        assert scheduled == [], "the standalone scheduler ran tasks of the dag.test run"
    finally:
        run.kill()
        airflow.request("admin", "PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})


def wait_gate(airflow: Airflow, run: DagTest, timeout: float = 900) -> dict[str, Any]:
    """Wait until the gate is parked and has waited :data:`GATE_SETTLE_S`; its HITL record."""
    airflow.wait_parked(run.dag_id, run.run_id, GATE, timeout=timeout)
    time.sleep(GATE_SETTLE_S)
    return airflow.hitl_detail(run.dag_id, run.run_id, GATE)


def skip_conf(dag_id: str, seeded: SeededTopic, when: datetime) -> dict[str, Any]:
    """Three messages to skip: picked ids (two partitions and a delayed one) by id,
    requested as a door requests them (the plan record stored, bound to the run dag.test
    makes at ``when``, requested by dag_test; the conf its digest), or the three delayed
    reminders by the predicate "still scheduled" (skip matching is triggered with its
    request)."""
    if dag_id == MESSAGES:
        from cursorops.core.services.broker import Broker
        from cursorops.core.services.gating import Caller, Run, SkipMessages

        arguments = SkipMessages(
            topic=seeded.topic,
            subscription=SUBSCRIPTION,
            ids=tuple(pick(seeded)),
            reason="poison pills from a bad producer",
        )
        caller = Caller(DAG_TEST_USER, DAG_TEST_USER, "rest")
        with Broker(seeded.config) as broker:
            record = broker.plan_request(
                "skip-messages", caller, arguments, Run(MESSAGES, run_id_at(when))
            )
        return {"plan_digest": record.digest}
    return matching_conf(seeded)


def planned(dag_id: str, seeded: SeededTopic) -> set[str]:
    """What :func:`skip_conf` asks to skip, as labels."""
    if dag_id == MESSAGES:
        return {label(m) for m in pick(seeded)}
    return {label(m) for m in seeded.ids[-3:]}


def assert_untouched(seeded: SeededTopic, before: set[str]) -> None:
    assert seeded.unacknowledged() == before
    assert seeded.audit("skip") == []
    assert sorted(delivered_later(seeded)) == sorted(before)


@pytest.mark.parametrize("dag_id", [MESSAGES, MATCHING])
def test_approved_by_a_second_user(airflow: Airflow, granted: Config, tmp_path: Path, dag_id):
    seeded = seed_topic(granted, namespace=NAMESPACE)
    before = seeded.unacknowledged()
    skipped = planned(dag_id, seeded)
    assert skipped <= before
    when = now()
    with dag_test(airflow, dag_id, skip_conf(dag_id, seeded, when), tmp_path, when) as run:
        detail = wait_gate(airflow, run)
        assert sorted(u["id"] for u in detail["assigned_users"]) == ["admin", "bob"]
        assert "Backlog:** 56 message(s) now, **53** after" in detail["body"]
        assert seeded.unacknowledged() == before  # planning changed nothing
        # dave is an Airflow op whose Pulsar role may not skip here: not a respondent.
        assert airflow.answer(dag_id, run.run_id, GATE, "Approve", user="dave").status_code == 403
        approved = airflow.answer(dag_id, run.run_id, GATE, "Approve", user="bob")
        assert approved.status_code == 200, approved.text
        assert run.wait() == "success", airflow.task_states(dag_id, run.run_id)

    assert airflow.dag_run(dag_id, run.run_id)["triggering_user_name"] == DAG_TEST_USER
    assert airflow.task_states(dag_id, run.run_id)["apply_skip"] == ["success"]
    assert seeded.unacknowledged() == before - skipped
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "applied"
    assert request["requester"] == DAG_TEST_USER
    assert request["answer"]["by"] == "bob"  # type: ignore[index]
    assert request["backlog"] == {"before": 56, "plannedAfter": 53, "after": 53}
    [skip] = seeded.audit("skip")  # the whole plan in one transaction
    assert skip["via"] == "airflow"
    received = delivered_later(seeded)
    assert sorted(received) == sorted(before - skipped)  # each other one, exactly once
    assert not skipped & set(received)


@pytest.mark.parametrize("dag_id", [MESSAGES])
def test_reject_applies_nothing(airflow: Airflow, granted: Config, tmp_path: Path, dag_id):
    """A Reject through dag.test; the matching DAG's Reject under the scheduler is
    tests/dags/test_skip_matching_airflow.py's, with the same checks."""
    seeded = seed_topic(granted, namespace=NAMESPACE)
    before = seeded.unacknowledged()
    when = now()
    with dag_test(airflow, dag_id, skip_conf(dag_id, seeded, when), tmp_path, when) as run:
        wait_gate(airflow, run)
        rejected = airflow.answer(dag_id, run.run_id, GATE, "Reject", user="bob")
        assert rejected.status_code == 200, rejected.text
        assert run.wait() == "failed"

    states = airflow.task_states(dag_id, run.run_id)
    assert states[GATE] == ["failed"]
    assert states["apply_skip"] == ["upstream_failed"]
    assert_untouched(seeded, before)
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "rejected"
    assert str(request["statement"]).startswith("Rejected by bob")


def test_self_approval_is_refused_and_no_answer_times_out(
    airflow: Airflow, granted: Config, tmp_path: Path
):
    """Four eyes: the requester cannot answer their own request; with nobody else
    answering, the gate times out (2 minutes of the session Airflow, 20 s; the standalone
    scheduler's sweep sees it) and that is a rejection. At the end bob rejects it, so no
    approval is left waiting."""
    seeded = seed_topic(granted, namespace=NAMESPACE)
    before = seeded.unacknowledged()
    when = now()
    conf = {**skip_conf(MESSAGES, seeded, when), "approval_timeout_minutes": 2}
    run_id = ""
    try:
        with dag_test(airflow, MESSAGES, conf, tmp_path, when) as run:
            run_id = run.run_id
            detail = wait_gate(airflow, run)
            assert DAG_TEST_USER not in {u["id"] for u in detail["assigned_users"]}
            assert f"the requester {DAG_TEST_USER} may not approve" in detail["body"]
            refused = airflow.answer(MESSAGES, run.run_id, GATE, "Approve", user=DAG_TEST_USER)
            assert refused.status_code == 403, refused.text
            assert "not a respondent" in refused.text
            assert seeded.unacknowledged() == before
            assert run.wait(timeout=600) == "failed"

        states = airflow.task_states(MESSAGES, run_id)
        assert states[GATE] == ["failed"]
        assert states["apply_skip"] == ["upstream_failed"]
        assert airflow.hitl_detail(MESSAGES, run_id, GATE)["responded_by_user"] is None
        assert_untouched(seeded, before)
        [request] = seeded.audit("skip-request")
        assert request["outcome"] == "not-approved"
        # Airflow still lists a timed-out gate among the unanswered ones.
        assert run_id in unanswered(airflow, MESSAGES)
    finally:
        rejected = reject_unanswered(airflow, MESSAGES, run_id)

    assert rejected is not None and rejected.status_code == 200, rejected
    assert run_id not in unanswered(airflow, MESSAGES)
    # The late answer changes nothing: the gate stays failed, nothing is applied.
    states = airflow.task_states(MESSAGES, run_id)
    assert states[GATE] == ["failed"]
    assert states["apply_skip"] == ["upstream_failed"]
    assert seeded.audit("skip") == []
    assert [r["outcome"] for r in seeded.audit("skip-request")] == ["not-approved"]


def unanswered(airflow: Airflow, dag_id: str) -> set[str]:
    """The runs whose gate Airflow lists as unanswered (``response_received=false``)."""
    found = airflow.get(
        "admin", f"/api/v2/dags/{dag_id}/dagRuns/~/hitlDetails?response_received=false&limit=1000"
    )
    return {h["task_instance"]["dag_run_id"] for h in found["hitl_details"]}


def reject_unanswered(airflow: Airflow, dag_id: str, run_id: str) -> Any:
    """bob rejects the run's gate if Airflow lists it as unanswered (waiting, or timed out),
    so no test leaves an approval behind on the session's Airflow (the Cursors page and
    Required Actions list them); the answer, or None when there was nothing to answer."""
    if run_id and run_id in unanswered(airflow, dag_id):
        return airflow.answer(dag_id, run_id, GATE, "Reject", user="bob")
    return None


def test_unauthorized_requester_is_refused_before_planning(
    airflow: Airflow, granted: Config, tmp_path: Path
):
    """A request of skip by ids is refused at its door, nothing stored; skip matching,
    triggered with its request, refuses in ``authorize`` before its scan."""
    from cursorops.core.domain.errors import NotAuthorizedError

    seeded = seed_topic(granted, namespace=SECRET_NAMESPACE)  # dag_test holds no grant there
    before = seeded.unacknowledged()
    with pytest.raises(NotAuthorizedError):
        skip_conf(MESSAGES, seeded, now())
    with dag_test(airflow, MATCHING, skip_conf(MATCHING, seeded, now()), tmp_path) as run:
        assert run.wait() == "failed"

    states = airflow.task_states(MATCHING, run.run_id)
    assert states["authorize"] == ["failed"]
    assert airflow.task_instance(MATCHING, run.run_id, "authorize")["try_number"] == 1
    assert states["plan_matched_ids"] == ["upstream_failed"]
    assert states[GATE] == ["upstream_failed"]
    assert_untouched(seeded, before)


@pytest.mark.parametrize(
    ("dag_id", "bad", "failing"),
    [
        (MESSAGES, {"plan_digest": "f" * 64}, GATE),
        (MATCHING, {"property": ["no-equals-sign"]}, "validate_request"),
    ],
    ids=["messages-unknown-digest", "matching-bad-property"],
)
def test_bad_conf_fails_at_once_without_retry(
    airflow: Airflow, granted: Config, tmp_path: Path, dag_id, bad, failing
):
    seeded = seed_topic(granted, namespace=NAMESPACE)
    before = seeded.unacknowledged()
    conf = {**skip_conf(dag_id, seeded, now()), **bad}
    with dag_test(airflow, dag_id, conf, tmp_path) as run:
        assert run.wait() == "failed"

    ti = airflow.task_instance(dag_id, run.run_id, failing)
    assert ti["state"] == "failed"
    assert ti["try_number"] == 1
    assert airflow.task_states(dag_id, run.run_id)["apply_skip"] == ["upstream_failed"]
    assert_untouched(seeded, before)


def test_backlog_audit_records_the_exact_backlog(airflow: Airflow, granted: Config, tmp_path):
    import secrets

    from cursorops.core.services.broker import Broker

    namespace = f"acme/audit-dt-{secrets.token_hex(3)}"
    with Broker(granted) as broker:
        broker.admin.create_namespace("admin", namespace)
    seeded = seed_topic(granted, namespace=namespace)
    before = seeded.unacknowledged()
    thresholds = {"namespaces": {namespace: {"maxMessages": 50}}}
    conf = {"namespaces": [namespace], "thresholds": thresholds}
    with dag_test(airflow, AUDIT, conf, tmp_path) as run:
        assert run.wait() == "failed"  # 56 messages > 50: check_thresholds fails, naming it

    states = airflow.task_states(AUDIT, run.run_id)
    assert states["record_history"] == ["success"]
    assert states["check_thresholds"] == ["failed"]
    with Broker(granted) as broker:
        [row] = broker.analysis.backlog_history("admin", seeded.topic)
    assert (row.subscription, row.run_id, row.messages) == (SUBSCRIPTION, run.run_id, 56)
    assert seeded.unacknowledged() == before  # an audit acknowledges nothing
    assert sorted(delivered_later(seeded)) == sorted(before)

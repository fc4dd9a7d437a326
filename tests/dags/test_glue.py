"""The Airflow glue without a running Airflow: error map, role map, request, approval check."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cursorops.airflow import environment
from cursorops.airflow.outcomes import OUTCOMES, Outcome, airflow_outcome, outcome_of
from cursorops.core.domain import errors
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    ConsumerBusyError,
    InvalidArgumentError,
    InvalidMessageIdError,
    MetadataStoreError,
    NotAuthorizedError,
    TopicNotFoundError,
    UnsupportedSubscriptionTypeError,
)


def test_every_error_leaf_has_an_airflow_outcome():
    assert set(OUTCOMES) == set(errors.leaf_classes())


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (InvalidMessageIdError("x"), Outcome.FAIL),
        (TopicNotFoundError("x"), Outcome.FAIL),
        (NotAuthorizedError("x"), Outcome.FAIL),
        (UnsupportedSubscriptionTypeError("x"), Outcome.FAIL),
        (ConsumerBusyError("x"), Outcome.RETRY),
        (MetadataStoreError("x"), Outcome.RETRY),
    ],
)
def test_fail_or_retry(error, outcome):
    from airflow.sdk.exceptions import AirflowFailException

    assert outcome_of(error) is outcome
    expected = AirflowFailException if outcome is Outcome.FAIL else type(error)
    with pytest.raises(expected) as caught, airflow_outcome():
        raise error
    if outcome is Outcome.FAIL:
        assert str(caught.value) == f"{type(error).__name__}: x"


def test_role_map_default_is_the_same_name(tmp_path: Path):
    assert environment.pulsar_role("alice", {}) == "alice"
    assert environment.pulsar_role("alice", {"CURSOROPS_ROLE_MAP": "alice=ops, bob=ops2"}) == "ops"
    mapping = tmp_path / "roles.json"
    mapping.write_text(json.dumps({"carol": "auditors", "alice": "file"}))
    env = {"CURSOROPS_ROLE_MAP_FILE": str(mapping), "CURSOROPS_ROLE_MAP": "alice=env"}
    assert environment.role_map(env) == {"carol": "auditors", "alice": "env"}
    with pytest.raises(InvalidArgumentError, match="expected user=role"):
        environment.role_map({"CURSOROPS_ROLE_MAP": "alice"})
    mapping.write_text("[1]")
    with pytest.raises(InvalidArgumentError, match="JSON object"):
        environment.role_map({"CURSOROPS_ROLE_MAP_FILE": str(mapping)})


def test_approver_candidates():
    assert environment.approver_candidates({"CURSOROPS_APPROVER_CANDIDATES": "bob, alice,bob"}) == [
        "alice",
        "bob",
    ]


def test_config_from_environ(tmp_path: Path):
    config = environment.config({"CURSOROPS_HOME": str(tmp_path)})
    assert config == Config.from_home(tmp_path)
    other = environment.config(
        {
            "CURSOROPS_HOME": str(tmp_path),
            "CURSOROPS_METADATA_URL": "sqlite:///x.db",
            "CURSOROPS_LEDGER_ROOT": "/data/ledgers",
        }
    )
    assert (other.metadata_url, other.ledger_root) == ("sqlite:///x.db", "/data/ledgers")


def _record(tmp_path: Path, run_id: str = "manual__1"):
    """A seeded topic and a plan record of two of its ids, bound to ``run_id`` of alice."""
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.gating import Caller, Run, SkipMessages
    from tests.dags.conftest import GRANTED, NAMESPACE, SUBSCRIPTION, TENANT, seed_topic

    config = Config.from_home(tmp_path)
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", TENANT)
        broker.admin.create_namespace("admin", NAMESPACE)
        for role in GRANTED:
            broker.admin.grant_permission("admin", NAMESPACE, role, ["consume"])
    seeded = seed_topic(config)
    ask = SkipMessages(
        topic=seeded.topic, subscription=SUBSCRIPTION, ids=tuple(seeded.ids[20:22]), reason="r"
    )
    with Broker(config) as broker:
        run = Run("cursorops_skip_messages", run_id)
        return (
            config,
            seeded,
            broker.plan_request("skip-messages", Caller("alice", "alice"), ask, run),
        )


def _presented(broker, record, gate: str = "approve_skip", at: int = 0, approvers=("bob",)):
    """What gate ``gate`` of the record's run showed, recorded as the gate records it."""
    from cursorops.airflow.operators.gate import body_sha256
    from cursorops.core.domain.plans.plan_record import ApprovalRequest

    b = record.binding
    shown = ApprovalRequest(
        record.digest,
        b.dag_id,
        b.run_id,
        gate,
        body_sha256(GATE_BODY),
        approvers,
        at,
        60_000,
        try_number=1,
    )
    broker.workflow.record_approval_request(shown)
    return shown


def test_record_is_written_once_per_attempt(tmp_path: Path):
    from types import SimpleNamespace

    from cursorops.airflow.closing_record import close_request
    from cursorops.core.services.broker import Broker

    config, seeded, record = _record(tmp_path)
    run = SimpleNamespace(
        dag_id="cursorops_skip_messages", run_id="manual__1", triggering_user_name="alice"
    )
    gates = ("approve_skip", "approve_skip_2")
    with Broker(config) as broker:
        _presented(broker, record)
        unanswered = close_request(broker, run, record, gates)
        assert unanswered["outcome"] == "not-approved"
        assert unanswered["answers"] == [
            {"gate": "approve_skip", "chosen": None, "by": None, "at": None}
        ]
        at = 1_795_395_600_000  # 2026-11-23T01:00:00Z
        broker.workflow.record_approval_answer(
            run.dag_id, run.run_id, "approve_skip", 1, ["Reject"], "bob", at
        )
        first = close_request(broker, run, record, gates)
        again = close_request(broker, run, record, gates)
    assert first == again
    assert first["outcome"] == "rejected"
    assert (
        first["statement"] == "Rejected by bob at 2026-11-23T01:00:00.000+00:00: nothing applied."
    )
    assert [r["outcome"] for r in seeded.audit("skip-request")] == ["rejected", "not-approved"]


def test_the_closing_record_lists_only_answers_to_its_own_plan(tmp_path: Path):
    """The planning task cleared while the gate waited: the run's plan is a new record, and
    the answer given to the first one is not an answer to it."""
    from types import SimpleNamespace

    from cursorops.airflow.closing_record import close_request
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.gating import Caller, Run, SkipMessages
    from tests.dags.conftest import SUBSCRIPTION

    config, seeded, first = _record(tmp_path)
    run = SimpleNamespace(
        dag_id="cursorops_skip_messages", run_id="manual__1", triggering_user_name="alice"
    )
    ask = SkipMessages(
        topic=seeded.topic, subscription=SUBSCRIPTION, ids=tuple(seeded.ids[30:31]), reason="r"
    )
    with Broker(config) as broker:
        _presented(broker, first)
        broker.workflow.record_approval_answer(
            run.dag_id, run.run_id, "approve_skip", 1, ["Approve"], "bob", 9
        )
        second = broker.plan_request(
            "skip-messages", Caller("alice", "alice"), ask, Run(run.dag_id, run.run_id)
        )
        assert broker.workflow.current_plan_record("alice", run.dag_id, run.run_id) == second
        closing = close_request(broker, run, second, ("approve_skip",))
    assert closing["planDigest"] == second.digest
    assert closing["answers"] == [] and closing["outcome"] == "not-approved"


GATE_BODY = "the text the gate showed"
AT = 1_795_395_600_000
"""2026-11-23T01:00:00Z, when the gates showed their text."""


def _answer(shown, by: str | None = "bob", chosen=("Approve",), at: int = AT):
    from cursorops.core.domain.plans.plan_record import ApprovalAnswer

    return ApprovalAnswer(shown, tuple(chosen), by, at)


def test_approval_check_refuses_all_but_a_permitted_second_user_for_this_very_plan(
    tmp_path: Path,
):
    from dataclasses import replace

    from cursorops.airflow.approval import check_approvals
    from cursorops.airflow.operators.gate import body_sha256
    from cursorops.core.domain.plans.plan_record import ApprovalRequest

    _, _, record = _record(tmp_path)
    shown = ApprovalRequest(
        record.digest, "d", "r", "approve_skip", body_sha256(GATE_BODY), ("bob", "dave"), AT, 60_000
    )
    stale = replace(shown, digest="0" * 64)
    allowed = {"bob", "carol", "admin"}.__contains__
    good = _answer(shown)

    def check(answer, now=AT + 1_000, requester="alice"):
        answers = [] if answer is None else [answer]
        return check_approvals(["approve_skip"], answers, record, requester, allowed, now)

    assert check(good) == [
        {"approver": "bob", "approvedAt": "2026-11-23T01:00:00.000+00:00", "gate": "approve_skip"}
    ]
    refusals = {
        "nobody answered": (None, {}),
        "answered ['Reject']": (_answer(shown, chosen=["Reject"]), {}),
        "the requester (alice) themselves": (
            _answer(replace(shown, approvers=("alice",)), "alice"),
            {},
        ),
        "may not skip": (_answer(shown, "dave"), {}),
        "was not assigned": (_answer(shown, "carol"), {}),
        "names no user": (_answer(shown, None), {}),
        "The plan differs from the one approved": (_answer(stale), {}),
        "no valid answer time": (_answer(shown, at=AT - 60_000), {}),
        "expired": (good, {"now": AT + 61_000}),
        "is not the plan's": (good, {"requester": "mallory"}),
    }
    for message, (answer, options) in refusals.items():
        with pytest.raises(NotAuthorizedError, match=re.escape(message)):
            check(answer, **options)
    # An answer recorded by another gate is not this gate's.
    other = _answer(replace(shown, gate="approve_skip_2"))
    with pytest.raises(NotAuthorizedError, match="nobody answered the approval gate approve_skip"):
        check(other)


def test_a_quorum_needs_distinct_approvers_on_every_gate(tmp_path: Path):
    from dataclasses import replace

    from cursorops.airflow.approval import check_approvals
    from cursorops.airflow.operators.gate import body_sha256
    from cursorops.core.domain.plans.plan_record import ApprovalRequest

    _, _, record = _record(tmp_path)
    record = replace(record, required_approvals=2)
    gates = ["approve_skip", "approve_skip_2", "approve_skip_3"]
    first, second = (
        ApprovalRequest(
            record.digest, "d", "r", gate, body_sha256(GATE_BODY), ("bob", "carol"), AT, 600_000
        )
        for gate in gates[:2]
    )

    def check(*answers):
        return check_approvals(gates, list(answers), record, "alice", lambda _: True, AT + 1)

    approved = check(_answer(first, "bob"), _answer(second, "carol"))
    assert [a["approver"] for a in approved] == ["bob", "carol"]
    with pytest.raises(NotAuthorizedError, match="approved twice"):
        check(_answer(first, "bob"), _answer(second, "bob"))
    with pytest.raises(
        NotAuthorizedError, match="nobody answered the approval gate approve_skip_2"
    ):
        check(_answer(first, "bob"))
    with pytest.raises(NotAuthorizedError, match="needs 2 approvals; this workflow has 1"):
        check_approvals(gates[:1], [_answer(first)], record, "alice", lambda _: True, AT + 1)


def _gate_context(config: Config, monkeypatch: pytest.MonkeyPatch, try_number: int = 1):
    """What the gate reads of its Airflow context, for run ``manual__1`` of alice."""
    from types import SimpleNamespace

    monkeypatch.setenv("CURSOROPS_HOME", str(config.home))
    monkeypatch.setenv("CURSOROPS_METADATA_URL", "")
    monkeypatch.setenv("CURSOROPS_APPROVER_CANDIDATES", "alice,bob,carol")
    run = SimpleNamespace(
        dag_id="cursorops_skip_messages", run_id="manual__1", triggering_user_name="alice"
    )
    pushed: dict[str, object] = {}
    ti = SimpleNamespace(
        id="0199c0de-0000-7000-8000-000000000001",
        try_number=try_number,
        xcom_push=lambda key, value: pushed.__setitem__(key, value),
        xcom_pull=lambda task_ids, key: pushed.get(key),
    )
    return {"dag_run": run, "ti": ti, "task_instance": ti, "params": {}}


def test_the_gate_records_the_answer_it_is_resumed_with(tmp_path: Path, monkeypatch):
    """Airflow hands the resumed gate its answer; the gate records it against what it
    showed, before the operator acts on it. A Reject is recorded, then fails the gate."""
    from datetime import UTC, datetime

    from airflow.providers.standard.exceptions import HITLRejectException, HITLTimeoutError

    from cursorops.airflow.operators.gate import FourEyesApprovalOperator
    from cursorops.core.services.broker import Broker

    config, _, record = _record(tmp_path)
    context = _gate_context(config, monkeypatch)
    gate = FourEyesApprovalOperator(task_id="approve_skip", subject="s", body="")
    second = FourEyesApprovalOperator(task_id="approve_skip_2", subject="s", body="")
    at = datetime(2026, 11, 23, 1, tzinfo=UTC)
    with Broker(config) as broker:
        _presented(broker, record, at=AT)
        _presented(broker, record, "approve_skip_2", at=AT)

    def event(chosen: str, by: str | None = "bob") -> dict[str, object]:
        user = None if by is None else {"id": by, "name": by}
        return {
            "chosen_options": [chosen],
            "params_input": {},
            "responded_at": at,
            "responded_by_user": user,
        }

    from airflow.sdk.exceptions import AirflowFailException

    assert gate.execute_complete(context, event("Approve"))["chosen_options"] == ["Approve"]
    # A timeout records nothing; it and a Reject fail the gate without a retry.
    with pytest.raises(AirflowFailException) as timed_out:
        second.execute_complete(context, {"error": "no answer", "error_type": "timeout"})
    assert isinstance(timed_out.value.__cause__, HITLTimeoutError)
    with pytest.raises(AirflowFailException) as rejected:
        second.execute_complete(context, event("Reject", "carol"))
    assert isinstance(rejected.value.__cause__, HITLRejectException)
    with Broker(config) as broker:
        answers = broker.workflow.approval_answers("cursorops_skip_messages", "manual__1")
    assert [(a.request.gate, a.chosen, a.responded_by, a.responded_at_ms) for a in answers] == [
        ("approve_skip", ("Approve",), "bob", AT),
        ("approve_skip_2", ("Reject",), "carol", AT),
    ]
    # Another answer to a presentation already answered is refused; the first stands.

    with pytest.raises(AirflowFailException, match="answered already"):
        gate.execute_complete(context, event("Approve", "carol"))
    # A try that showed nothing records nothing.
    later = _gate_context(config, monkeypatch, try_number=2)
    with pytest.raises(AirflowFailException, match="Try 2 of gate approve_skip"):
        gate.execute_complete(later, event("Approve"))


def test_a_gate_that_showed_its_request_refuses_to_ask_again(tmp_path: Path, monkeypatch):
    """A cleared or re-run gate: the request was closed, nothing is recorded, and Airflow's
    approval record (which keeps the first text) is never created or answered again."""
    from airflow.sdk.exceptions import AirflowFailException

    from cursorops.airflow.operators.gate import FourEyesApprovalOperator
    from cursorops.core.services.broker import Broker

    config, seeded, record = _record(tmp_path)
    context = _gate_context(config, monkeypatch, try_number=2)
    _airflow_holds(monkeypatch, None)
    with Broker(config) as broker:
        shown = _presented(broker, record)
    gate = FourEyesApprovalOperator(task_id="approve_skip", subject="s", body="")
    with pytest.raises(AirflowFailException) as refused:
        _through_the_trigger(gate, context)
    message = str(refused.value)
    assert message.startswith("This request was closed: gate approve_skip of run manual__1")
    for door in ("REST route", "`cursorops` CLI", "Cursors page"):
        assert door in message
    with Broker(config) as broker:
        assert broker.workflow.approval_requests("cursorops_skip_messages", "manual__1") == [shown]
        assert broker.workflow.approval_answers("cursorops_skip_messages", "manual__1") == []
    assert seeded.audit("skip") == []
    [why] = seeded.audit("skip-refused")
    assert why["stage"] == "gate" and why["reason"] == message


def _through_the_trigger(gate: Any, context: dict[str, Any]) -> Any:
    """A retried gate whose store holds no answer defers to the trigger that reads Airflow's
    (as the triggerer runs it), and resumes with what it fired."""
    import asyncio

    from airflow.sdk.exceptions import TaskDeferred

    with pytest.raises(TaskDeferred) as deferred:
        gate.execute(context)
    assert deferred.value.method_name == "resume_held_answer"
    trigger = deferred.value.trigger
    classpath, kwargs = trigger.serialize()
    assert (classpath, kwargs) == (
        "cursorops.airflow.triggers.held_answer.HeldAnswerTrigger",
        {"ti_id": context["ti"].id},
    )

    async def fired() -> list[Any]:
        return [event async for event in trigger.run()]

    [event] = asyncio.run(fired())
    return gate.resume_held_answer(context, event.payload)


def _airflow_holds(monkeypatch: pytest.MonkeyPatch, by: str | None, chosen: str = "Approve"):
    """What Airflow's HITL record of the gate's task holds: an answer by ``by``, or none."""
    from datetime import UTC, datetime

    from airflow.sdk.api.datamodels._generated import HITLDetailResponse, HITLUser
    from airflow.sdk.execution_time import hitl

    held = HITLDetailResponse(
        response_received=by is not None,
        responded_by_user=None if by is None else HITLUser(id=by, name=by),
        responded_at=None if by is None else datetime.fromtimestamp(AT / 1000, UTC),
        chosen_options=None if by is None else [chosen],
        params_input={},
    )
    monkeypatch.setattr(hitl, "get_hitl_detail_content_detail", lambda ti_id: held)


def test_a_retried_gate_takes_the_answer_airflow_accepted_and_never_asks_again(
    tmp_path: Path, monkeypatch
):
    """Airflow failed the gate after it accepted bob's answer (its scheduler's race): the
    retry records that answer against what try 1 showed and goes on with it; once the
    request is closed, a later try refuses it."""
    from airflow.sdk.exceptions import AirflowFailException

    from cursorops.airflow.closing_record import request_kind
    from cursorops.airflow.operators.gate import FourEyesApprovalOperator
    from cursorops.core.services.broker import Broker

    config, seeded, record = _record(tmp_path)
    context = _gate_context(config, monkeypatch, try_number=2)
    _airflow_holds(monkeypatch, "bob")
    with Broker(config) as broker:
        shown = _presented(broker, record, at=AT)
    gate = FourEyesApprovalOperator(task_id="approve_skip", subject="s", body="")
    assert _through_the_trigger(gate, context)["chosen_options"] == ["Approve"]
    with Broker(config) as broker:
        [answer] = broker.workflow.approval_answers("cursorops_skip_messages", "manual__1")
        assert broker.workflow.approval_requests("cursorops_skip_messages", "manual__1") == [shown]
    assert (answer.request, answer.chosen, answer.responded_by) == (shown, ("Approve",), "bob")
    assert answer.responded_at_ms == AT
    # The same answer again (a third try) is taken from the store.
    assert gate.execute(context)["chosen_options"] == ["Approve"]  # type: ignore[arg-type]
    with Broker(config) as broker:
        broker.workflow.record_audit(
            "alice",
            request_kind("skip"),
            record.topic,
            record.subscription,
            {"runId": "manual__1", "planDigest": record.digest, "outcome": "applied"},
        )
    with pytest.raises(AirflowFailException, match="This request was closed"):
        gate.execute(context)  # type: ignore[arg-type]
    assert seeded.audit("skip") == []


def test_a_run_finds_only_the_plan_record_bound_to_it(tmp_path: Path):
    """The steps read the record the run's ``plan_digest`` names, only when it is bound to
    this very run and its requester: another run started by hand with that digest, or a
    run started by someone else, gets nothing."""
    from types import SimpleNamespace

    from airflow.sdk.exceptions import AirflowFailException

    from cursorops.airflow.steps import run_plan_record
    from cursorops.core.services.broker import Broker

    config, _seeded, record = _record(tmp_path, "request__1")

    def context(run_id: str, user: str, digest: str | None) -> dict[str, object]:
        run = SimpleNamespace(
            dag_id="cursorops_skip_messages", run_id=run_id, triggering_user_name=user
        )
        return {"dag_run": run, "params": {} if digest is None else {"plan_digest": digest}}

    with Broker(config) as broker:
        found = run_plan_record(broker, context("request__1", "alice", record.digest), first=True)
        assert found == record
        for run_id, user, digest in (
            ("manual__by_hand", "alice", record.digest),
            ("request__1", "bob", record.digest),
            ("request__1", "alice", "f" * 64),
            ("manual__by_hand", "alice", None),
        ):
            with pytest.raises(AirflowFailException):
                run_plan_record(broker, context(run_id, user, digest))


def test_a_gate_whose_plan_was_replanned_or_whose_earlier_approval_expired_is_stale(
    tmp_path: Path,
):
    """Apply would refuse each of these: the gate says so instead of offering Approve."""
    from dataclasses import replace

    from cursorops.core.domain.plans.plan_record import ApprovalRequest
    from cursorops.core.services.gating.staleness import stale_reason

    _, _, record = _record(tmp_path)
    first = ApprovalRequest(record.digest, "d", "r", "approve_skip", "x", ("bob",), AT, 600_000)
    assert stale_reason(record, record, None, [], AT) is None
    assert stale_reason(record, record, record.digest, [_answer(first)], AT + 1) is None
    newer = replace(record, digest="e" * 64)
    assert "re-planned: its plan is now " + "e" * 64 in str(
        stale_reason(record, newer, None, [], AT)
    )
    # The gate showed one plan; the run's plan is another by the time it is answered.
    assert "re-planned" in str(stale_reason(newer, newer, record.digest, [], AT))
    assert "was given to plan " + record.digest in str(
        stale_reason(newer, newer, None, [_answer(first)], AT)
    )
    expired = stale_reason(record, record, None, [_answer(first)], AT + 600_001)
    assert "The approval by bob at 2026-11-23T01:00:00.000+00:00 (gate approve_skip) expired" in (
        str(expired)
    )
    # A Reject of an earlier gate is not an approval that could go stale.
    assert stale_reason(record, record, None, [_answer(first, chosen=["Reject"])], AT * 2) is None
    applied = replace(record, applied_at_ms=AT)
    assert "applied already" in str(stale_reason(applied, applied, None, [], AT))


def test_an_approve_given_after_a_replan_is_answered_as_stale(tmp_path: Path, monkeypatch):
    """Airflow keeps the text a gate showed: when the run was re-planned while the gate
    waited, its Approve is recorded, then refused, and nothing can apply."""
    from datetime import UTC, datetime

    from airflow.sdk.exceptions import AirflowFailException

    from cursorops.airflow.operators.gate import FourEyesApprovalOperator
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.gating import Caller, Run, SkipMessages

    config, seeded, record = _record(tmp_path)
    context = _gate_context(config, monkeypatch)
    with Broker(config) as broker:
        _presented(broker, record, at=AT)
        again = SkipMessages(
            topic=record.topic,
            subscription=record.subscription,
            ids=tuple(seeded.ids[20:21]),
            reason="fewer ids",
        )
        replanned = broker.plan_request(
            "skip-messages",
            Caller("alice", "alice"),
            again,
            Run("cursorops_skip_messages", "manual__1"),
        )
    assert replanned.digest != record.digest
    gate = FourEyesApprovalOperator(task_id="approve_skip", subject="s", body="")
    event = {
        "chosen_options": ["Approve"],
        "params_input": {},
        "responded_at": datetime(2026, 11, 23, 1, tzinfo=UTC),
        "responded_by_user": {"id": "bob", "name": "bob"},
    }
    with pytest.raises(AirflowFailException) as refused:
        gate.execute_complete(context, event)
    message = str(refused.value)
    assert message.startswith("This Approve cannot apply: The run was re-planned")
    assert "make a new request" in message
    with Broker(config) as broker:
        [answer] = broker.workflow.approval_answers("cursorops_skip_messages", "manual__1")
    assert (answer.chosen, answer.request.digest) == (("Approve",), record.digest)
    assert seeded.audit("skip") == []

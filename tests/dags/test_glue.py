"""The Airflow glue without a running Airflow: error map, role map, request, approval check."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from airflow_glue import environment
from airflow_glue.outcomes import OUTCOMES, Outcome, airflow_outcome, outcome_of
from airflow_glue.request import parse_request
from core import errors
from core.config import Config
from core.errors import (
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


def test_request_accepts_every_id_shape():
    from core.ids.message_id import MessageId

    b64 = MessageId(7, 3, 1, 2).to_base64()
    request = parse_request(
        {
            "topic": "persistent://a/b/c",
            "subscription": "s",
            "message_ids": ["1:2", "1:2:3", b64],
            "payload": {"type": "messageId", "messageIds": [{"ledgerId": "4", "entryId": 5}]},
            "reason": " poison ",
            "ticket": "",
        }
    )
    assert request.reason == "poison"
    assert request.ticket is None
    assert [(m.ledger_id, m.entry_id, m.batch_index) for m in request.ids()] == [
        (1, 2, -1),
        (1, 2, 3),
        (7, 3, 2),
        (4, 5, -1),
    ]
    assert request.ids()[2].partition == 1


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"subscription": "s", "reason": "r", "message_ids": ["1:2"]}, "topic: Field required"),
        ({"topic": "t", "subscription": "s", "reason": "", "message_ids": ["1:2"]}, "reason"),
        ({"topic": "t", "subscription": "s", "reason": "r", "message_ids": []}, "No message ids"),
        ({"topic": "t", "subscription": "s", "reason": "r", "x": 1}, "x: Extra inputs"),
        ({"topic": "t", "subscription": "s", "reason": "r", "message_ids": ["1:-2"]}, "triplet"),
        ({"topic": "t", "subscription": "s", "reason": "r", "payload": {"type": "z"}}, "payload"),
    ],
)
def test_bad_request_is_one_line(conf, message):
    with pytest.raises(errors.InvalidInputError, match=message) as caught:
        parse_request(conf)
    assert "\n" not in str(caught.value)


def _record(tmp_path: Path, run_id: str = "manual__1"):
    """A seeded topic and a plan record of two of its ids, bound to ``run_id`` of alice."""
    from core.broker import Broker
    from core.gating import Caller, Run, SkipMessages
    from tests.dags.conftest import GRANTED, NAMESPACE, SUBSCRIPTION, TENANT, seed_topic

    config = Config.from_home(tmp_path)
    with Broker(config) as broker:
        broker.create_tenant("admin", TENANT)
        broker.create_namespace("admin", NAMESPACE)
        for role in GRANTED:
            broker.grant_permission("admin", NAMESPACE, role, ["consume"])
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


def test_record_is_written_once_per_attempt(tmp_path: Path):
    from types import SimpleNamespace

    from airflow_glue.record import record_request

    config, seeded, record = _record(tmp_path)
    run = SimpleNamespace(
        dag_id="cursorops_skip_messages", run_id="manual__1", triggering_user_name="alice"
    )
    answer = {
        "response_received": True,
        "chosen_options": ["Reject"],
        "responded_by_user": {"id": "bob", "name": "bob"},
        "responded_at": "2026-11-23T01:00:00Z",
    }
    first = record_request(config, run, record, {"approve_skip": answer})
    again = record_request(config, run, record, {"approve_skip": answer})
    assert first == again
    assert first["outcome"] == "rejected"
    assert first["statement"] == "Rejected by bob at 2026-11-23T01:00:00Z: nothing applied."
    assert len(seeded.audit("skip-request")) == 1
    assert record_request(config, run, record, {})["outcome"] == "not-approved"
    assert len(seeded.audit("skip-request")) == 2


GATE_BODY = "the text the gate showed"


def _answer(by: str = "bob", at: str = "2026-11-23T01:00:00Z", body: str = GATE_BODY):
    return {
        "response_received": True,
        "chosen_options": ["Approve"],
        "responded_by_user": {"id": by, "name": by},
        "responded_at": at,
        "body": body,
    }


def test_approval_check_refuses_all_but_a_permitted_second_user_for_this_very_plan(
    tmp_path: Path,
):
    from airflow_glue.approval import _ms, check_approvals
    from airflow_glue.gate import body_sha256
    from core.skipping.plan_record import ApprovalRequest

    _, _, record = _record(tmp_path)
    at = _ms("2026-11-23T01:00:00Z") or 0
    shown = ApprovalRequest(
        record.digest, "d", "r", "approve_skip", body_sha256(GATE_BODY), ("bob", "dave"), at, 60_000
    )
    stale = ApprovalRequest(
        "0" * 64, "d", "r", "approve_skip", body_sha256("older"), ("bob",), at, 60_000
    )
    allowed = {"bob", "carol", "admin"}.__contains__
    good = _answer()

    def check(answer, requests=(shown,), now=at + 1_000, requester="alice"):
        return check_approvals({"approve_skip": answer}, requests, record, requester, allowed, now)

    assert check(good) == [
        {"approver": "bob", "approvedAt": "2026-11-23T01:00:00Z", "gate": "approve_skip"}
    ]
    refusals = {
        "nobody answered": ({**good, "response_received": False}, {}),
        "answered ['Reject']": ({**good, "chosen_options": ["Reject"]}, {}),
        "the requester (alice) themselves": (_answer("alice"), {}),
        "may not skip": (_answer("dave"), {}),
        "was not assigned": (_answer("carol"), {}),
        "names no user": ({**good, "responded_by_user": None}, {}),
        "not one this run's gate showed": (_answer(body=GATE_BODY + "<!-- -->"), {}),
        "The plan differs from the one approved": (
            _answer(body="older"),
            {"requests": (shown, stale)},
        ),
        "expired": (good, {"now": at + 61_000}),
        "is not the plan's": (good, {"requester": "mallory"}),
    }
    for message, (answer, options) in refusals.items():
        with pytest.raises(NotAuthorizedError, match=re.escape(message)):
            check(answer, **options)
    with pytest.raises(NotAuthorizedError, match="nobody answered"):
        check({})


def test_a_quorum_needs_distinct_approvers_on_every_gate(tmp_path: Path):
    from dataclasses import replace

    from airflow_glue.approval import _ms, check_approvals
    from airflow_glue.gate import body_sha256
    from core.skipping.plan_record import ApprovalRequest

    _, _, record = _record(tmp_path)
    record = replace(record, required_approvals=2)
    at = _ms("2026-11-23T01:00:00Z") or 0
    requests = [
        ApprovalRequest(
            record.digest, "d", "r", gate, body_sha256(GATE_BODY), ("bob", "carol"), at, 600_000
        )
        for gate in ("approve_skip", "approve_skip_2")
    ]

    def check(second):
        answers = {"approve_skip": _answer("bob"), "approve_skip_2": second}
        return check_approvals(answers, requests, record, "alice", lambda _: True, at + 1)

    assert [a["approver"] for a in check(_answer("carol"))] == ["bob", "carol"]
    with pytest.raises(NotAuthorizedError, match="approved twice"):
        check(_answer("bob"))
    gate_2 = "nobody answered the approval gate approve_skip_2"
    with pytest.raises(NotAuthorizedError, match=gate_2):
        check({})

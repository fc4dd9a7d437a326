"""cursorops_skip_matching's glue without Airflow: the request and its predicate, the
limit, the plan document kept in a file, and the per-partition outcome."""

from __future__ import annotations

import json

import pytest

from cursorops.airflow.matching import (
    DEFAULT_LIMIT,
    EVERYTHING,
    MatchRequest,
    match_params,
    over_limit,
    parse_match_request,
)
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidInputError
from cursorops.core.services.broker import Broker
from tests.dags.conftest import SUBSCRIPTION, label, seed_topic

NOW = 1_800_000_000_000
BASE = {"topic": "persistent://acme/orders/t", "subscription": "s", "reason": "why"}


def predicate(**conf):
    request, text = parse_match_request({**BASE, **conf}, NOW)
    return request, json.loads(text)


def test_each_option_becomes_the_find_messages_predicate():
    assert predicate(still_scheduled=True)[1] == {"deliverAt": {"after": "now"}}
    assert predicate(key="k", property=["a=1", "b=x=y"])[1] == {
        "key": "k",
        "properties": {"a": "1", "b": "x=y"},
    }
    assert predicate(publish_time_after="1h", publish_time_before="now")[1] == {
        "publishTime": {"after": "1h", "before": "now"}
    }
    assert predicate(payload_contains="boom", predicate={"jsonField": {"path": "a", "equals": 1}})[
        1
    ] == {"payloadContains": "boom", "jsonField": {"path": "a", "equals": 1}}
    assert predicate(producer="orders-a", key="k")[1] == {"producer": "orders-a", "key": "k"}
    request, document = predicate(everything=True, ticket="", key="", producer="")
    assert document == EVERYTHING and request.ticket is None
    assert request.limit == DEFAULT_LIMIT and request.allow_large is False


def test_the_params_are_the_request_fields_and_the_match_options():
    from cursorops.core.domain.analysis.match_conditions import MATCH_OPTIONS

    params = match_params()
    assert set(params) == set(MatchRequest.model_fields)
    assert list(params)[:2] == ["topic", "subscription"]
    assert {o.name for o in MATCH_OPTIONS} <= set(params)
    assert params["property"].schema == {"type": "array", "items": {"type": "string"}}
    assert params["publish_time_after"].schema == {"type": ["null", "string"]}
    assert params["limit"].schema == {"type": "integer", "minimum": 1}
    assert params["limit"].value == DEFAULT_LIMIT and params["topic"].value == ""
    assert params["predicate"].schema == {"type": ["null", "object"]}
    assert all(p.description for p in params.values())


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({}, "give at least one condition"),
        ({"everything": True, "key": "k"}, "everything matches every message"),
        ({"still_scheduled": True, "deliver_at_after": "1h"}, "both set"),
        ({"key": "k", "predicate": {"key": "j"}}, "key given both"),
        ({"property": ["novalue"]}, "^Invalid property 'novalue': expected NAME=VALUE$"),
        (
            {"producer": "a", "predicate": {"producer": "b"}},
            "^Invalid predicate: producer given both in predicate and as an option$",
        ),
        ({"everything": True, "producer": "p"}, "everything matches every message"),
        ({"predicate": {"producer": ""}}, "producer must not be empty"),
        ({"publish_time_after": "yesterday"}, "publishTime.after"),
        ({"key": "k", "reason": ""}, "reason"),
        ({"key": "k", "limit": 0}, "limit"),
        ({"key": "k", "unknown": 1}, "unknown"),
        ({"predicate": {"nope": 1}}, "nope"),
    ],
)
def test_bad_requests_are_one_line(conf, message):
    with pytest.raises(InvalidInputError, match=message) as raised:
        parse_match_request({**BASE, **conf}, NOW)
    assert "\n" not in str(raised.value)


def test_over_limit_needs_allow_large():
    assert over_limit(10, 10, False) is None
    assert "matches 11 messages, above the limit of 10" in str(over_limit(11, 10, False))
    assert over_limit(11, 10, True) is None


def test_the_plan_record_is_what_apply_reads_and_a_tampered_one_is_refused(tmp_path):
    from sqlalchemy import update

    from cursorops.core.domain.plans.plan_record import PlanBinding
    from cursorops.core.services.gating import Caller, Run, SkipMatching
    from cursorops.core.services.gating.approval_text import preview_markdown
    from cursorops.core.store.tables import PlanRecordRow

    config = Config.from_home(tmp_path / "home")
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/orders")
    seeded = seed_topic(config)
    reminders = seeded.ids[-3:]
    with Broker(config) as broker:
        arguments = SkipMatching(
            topic=seeded.topic,
            subscription=SUBSCRIPTION,
            predicate={"deliverAt": {}},
            matches=tuple(reminders),
            reason="cancel",
        )
        record = broker.plan_request(
            "skip-matching",
            Caller("admin", "alice"),
            arguments,
            Run("cursorops_skip_matching", "manual__1"),
        )
        plan = record.skip_plan()
        assert sorted(m.triplet() for m in plan.message_ids()) == sorted(
            m.triplet() for m in reminders
        )
        document = record.document
        assert document["backlog"]["before"] - document["backlog"]["after"] == 3
        shown = preview_markdown(record, content=True)
        assert "- **Matching:** delayed\\, due at any time" in shown
        assert "reminder \\#1" in shown
        assert "reminder" not in preview_markdown(record, content=False)
        applied = broker.apply_approved_plan(record, [{"approver": "bob"}])
        assert sorted(applied.outcome["skipped"]) == sorted(m.triplet() for m in reminders)
        assert not {label(m) for m in reminders} & seeded.unacknowledged()

        other = broker.workflow.save_plan_record(
            PlanBinding("cursorops_skip_matching", "manual__2", "alice", "admin"),
            plan,
            document,
        )
        with broker.metadata.transaction() as work:
            work.session.execute(
                update(PlanRecordRow)
                .where(PlanRecordRow.digest == other.digest)
                .values(messages=1, plan_json=plan.for_partition(plan.partitions()[0]).dumps())
            )
        with pytest.raises(InvalidInputError, match="does not match its content"):
            broker.workflow.current_plan_record("admin", "cursorops_skip_matching", "manual__2")


DAG = "cursorops_skip_matching"


def _dag():
    from tests.dags.test_no_xcom_inputs import load_dag

    return load_dag(DAG)


def test_the_scan_gets_the_run_s_identity_only():
    find = _dag().get_task("find_messages")
    assert find.application_args == [
        "--dag-id={{ dag_run.dag_id }}",
        "--run-id={{ dag_run.run_id }}",
        "--requester={{ dag_run.triggering_user_name }}",
    ]
    assert find.application.endswith("find_run_matches.py")


def _context(params=None, run_id="manual__1", user="alice"):
    from types import SimpleNamespace

    def no_xcom(*_args, **_kwargs):
        raise AssertionError("a task read an XCom")

    run = SimpleNamespace(dag_id=DAG, run_id=run_id, triggering_user_name=user)
    ti = SimpleNamespace(try_number=1, xcom_pull=no_xcom, xcom_push=lambda *a, **k: None)
    return {"dag_run": run, "ti": ti, "params": params or {}}


def _call(dag, task_id, context):
    from airflow.sdk.execution_time.context import set_current_context

    with set_current_context(context):
        return dag.get_task(task_id).python_callable()


@pytest.fixture
def seeded_home(tmp_path, monkeypatch):
    config = Config.from_home(tmp_path / "home")
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/orders")
        broker.admin.grant_permission("admin", "acme/orders", "alice", ["consume"])
    monkeypatch.setenv("CURSOROPS_HOME", str(config.home))
    monkeypatch.setenv("CURSOROPS_METADATA_URL", "")
    monkeypatch.setenv("CURSOROPS_LEDGER_ROOT", "")
    return config, seed_topic(config)


def _write_scan(config, run_id, topic, ids, request, subscription=SUBSCRIPTION):
    """What find_run_matches writes in the run's scratch folder, written here."""
    import pyarrow.parquet as pq

    from cursorops.spark.match_list import match_list_from_ids
    from cursorops.spark.run_scratch import MATCH_LIST, SUMMARY, checked_scratch

    folder = checked_scratch(config, DAG, run_id, create=True)
    (folder / MATCH_LIST).mkdir(exist_ok=True)
    pq.write_table(
        match_list_from_ids(topic, subscription, ids), folder / MATCH_LIST / "part-0.parquet"
    )
    summary = {"topic": topic, "subscription": subscription, "matches": len(ids)}
    (folder / SUMMARY).write_text(json.dumps({**summary, "request": request}))


def test_a_run_s_request_is_recorded_once_and_read_by_the_run_only(seeded_home):
    from airflow.sdk.exceptions import AirflowFailException
    from sqlalchemy import update

    from cursorops.core.domain.errors import NotAuthorizedError
    from cursorops.core.store.tables import RequestRecordRow

    config, seeded = seeded_home
    dag = _dag()
    conf = {**BASE, "topic": seeded.topic, "subscription": SUBSCRIPTION, "still_scheduled": True}
    shown = _call(dag, "validate_request", _context(conf))
    assert _call(dag, "validate_request", _context(conf)) == shown  # run again: the same record
    other = {**conf, "still_scheduled": False, "everything": True}
    with pytest.raises(AirflowFailException, match="has a request recorded already"):
        _call(dag, "validate_request", _context(other))
    [refused] = seeded.audit("skip-refused")
    assert refused["stage"] == "validate" and refused["runId"] == "manual__1"
    with Broker(config) as broker:
        record = broker.workflow.run_request_record(DAG, "manual__1", "alice")
        assert record.digest == shown["requestDigest"]
        assert record.arguments["predicate"] == {"deliverAt": {"after": "now"}}
        with pytest.raises(NotAuthorizedError, match="not this one"):
            broker.workflow.save_request_record(
                request_record_of(record, topic="persistent://acme/orders/other")
            )
        with pytest.raises(NotAuthorizedError, match="No request is recorded"):
            broker.workflow.run_request_record(DAG, "manual__2", "alice")
        with pytest.raises(NotAuthorizedError, match="asked for by alice"):
            broker.workflow.run_request_record(DAG, "manual__1", "bob")
        with broker.metadata.transaction() as work:
            work.session.execute(
                update(RequestRecordRow).values(arguments={"predicate": {"publishTime": {}}})
            )
        with pytest.raises(InvalidInputError, match="does not match its content"):
            broker.workflow.run_request_record(DAG, "manual__1", "alice")


def request_record_of(record, **changed):
    from dataclasses import asdict

    from cursorops.core.domain.plans.request_record import RequestRecord

    fields = {**asdict(record), **changed}
    fields.pop("digest")
    return RequestRecord.create(**fields)


def test_plan_matched_ids_plans_only_a_scan_made_for_the_run_s_request(seeded_home):
    from airflow.sdk.exceptions import AirflowFailException

    config, seeded = seeded_home
    other = seed_topic(config)
    dag = _dag()
    conf = {**BASE, "topic": seeded.topic, "subscription": SUBSCRIPTION, "still_scheduled": True}
    digest = _call(dag, "validate_request", _context(conf))["requestDigest"]
    reminders = seeded.ids[-3:]
    context = _context()

    hostile = [
        (seeded.topic, reminders, "f" * 64, SUBSCRIPTION, "names request 'fff"),
        (other.topic, other.ids[10:40], digest, SUBSCRIPTION, "another topic or subscription"),
        (seeded.topic, seeded.ids[10:40], digest, "other-sub", "another topic or subscription"),
    ]
    for topic, ids, request, subscription, refusal in hostile:
        _write_scan(config, "manual__1", topic, ids, request, subscription)
        with pytest.raises(AirflowFailException, match=refusal):
            _call(dag, "plan_matched_ids", context)
    refused = seeded.audit("skip-refused") + other.audit("skip-refused")
    assert [r["stage"] for r in refused] == ["plan"] * 3
    with Broker(config) as broker:
        assert broker.metadata.plans.current(DAG, "manual__1") is None

    _write_scan(config, "manual__1", seeded.topic, reminders, digest)
    summary = _call(dag, "plan_matched_ids", context)
    with Broker(config) as broker:
        plan = broker.metadata.plans.current(DAG, "manual__1")
    assert plan is not None and summary["planDigest"] == plan.digest
    assert plan.document["request"] == digest
    assert sorted(m.triplet() for m in plan.skip_plan().message_ids()) == sorted(
        m.triplet() for m in reminders
    )

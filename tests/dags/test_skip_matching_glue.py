"""cursorops_skip_matching's glue without Airflow: the request and its predicate, the
limit, the plan document kept in a file, and the per-partition outcome."""

from __future__ import annotations

import json

import pytest

from airflow_glue.matching import DEFAULT_LIMIT, EVERYTHING, over_limit, parse_match_request
from airflow_glue.plan import build_document, skip_plan
from airflow_glue.steps import partition_outcomes
from core.broker import Broker
from core.config import Config
from core.errors import InvalidInputError, InvalidSkipPlanError
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


def test_plan_in_a_file_is_what_apply_reads_and_an_edit_is_refused(tmp_path):
    config = Config.from_home(tmp_path / "home")
    with Broker(config) as broker:
        broker.create_tenant("admin", "acme")
        broker.create_namespace("admin", "acme/orders")
    seeded = seed_topic(config)
    reminders = seeded.ids[-3:]
    with Broker(config) as broker:
        plan = broker.plan_skip("admin", seeded.topic, SUBSCRIPTION, reminders)
        request = {"requester": "alice", "reason": "cancel", "ticket": None}
        path = tmp_path / "plan.json"
        document = build_document(
            broker, request, "admin", plan, plan_path=str(path), predicate={"deliverAt": {}}
        )
        assert "skipPlan" not in document and document["skipPlanPath"] == str(path)
        assert skip_plan(document) == plan
        assert document["backlog"]["before"] - document["backlog"]["after"] == 3
        assert '**Matching:** `{"deliverAt": {}}`' in document["preview"]
        assert "reminder #1" in document["preview"]
        outcome = broker.apply_skip("admin", skip_plan(document))
    rows = partition_outcomes(outcome, {"approver": "bob"})
    assert sorted(t for r in rows for t in r["skipped"]) == sorted(m.triplet() for m in reminders)
    assert {r["partition"] for r in rows} == set(plan.partitions())
    assert all(r["approver"] == "bob" for r in rows)
    assert not {label(m) for m in reminders} & seeded.unacknowledged()

    edited = json.loads(path.read_text())
    edited["items"] = edited["items"][:1]
    path.write_text(json.dumps(edited))
    with pytest.raises(InvalidSkipPlanError, match="does not match its content"):
        skip_plan(document)

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
from cursorops.core.broker import Broker
from cursorops.core.config import Config
from cursorops.core.errors import InvalidInputError
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
    from cursorops.core.analysis.match_conditions import MATCH_OPTIONS

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

    from cursorops.core.gating import Caller, Run, SkipMatching
    from cursorops.core.gating.approval_text import preview_markdown
    from cursorops.core.skipping.plan_record import PlanBinding
    from cursorops.core.store.tables import PlanRecordRow

    config = Config.from_home(tmp_path / "home")
    with Broker(config) as broker:
        broker.create_tenant("admin", "acme")
        broker.create_namespace("admin", "acme/orders")
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

        other = broker.save_plan_record(
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
            broker.current_plan_record("admin", "cursorops_skip_matching", "manual__2")

"""Each route's happy path and main errors, in-process on Airflow's real API app."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from cursorops.core.domain import errors as core_errors
from cursorops.core.services.gating import skip as skip_slice
from cursorops.core.services.gating import unsubscribe
from cursorops.rest.errors import status_of
from tests.dags.conftest import label
from tests.plugins.conftest import (
    APPROVAL_NS,
    OPEN_NS,
    SUBSCRIPTION,
    Api,
    rest_path,
)

SEEDED_BACKLOG = 56
"""63 messages (60 batched orders, 3 delayed reminders) minus the 7 acknowledged."""


def _reason(answer: Any, status: int) -> str:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) <= {"reason", "error"} and body["reason"], body
    if "error" in body:
        # The error tree's class, for a client that raises the same error (the CLI).
        kind = getattr(core_errors, body["error"])
        assert issubclass(kind, core_errors.CursorOpsError), body
        assert status_of(kind("x")) == status, body
    return str(body["reason"])


# -- tenants, namespaces, topics, permissions ----------------------------------


def test_tenants_for_superusers_only(api: Api) -> None:
    answer = api.call("admin", "GET", "/admin/v2/tenants")
    assert answer.status_code == 200 and "acme" in answer.json()
    assert "superuser" in _reason(api.call("alice", "GET", "/admin/v2/tenants"), 403)


def test_namespaces_of_a_tenant(api: Api) -> None:
    answer = api.call("admin", "GET", "/admin/v2/namespaces/acme")
    assert answer.status_code == 200
    assert {OPEN_NS, APPROVAL_NS} <= set(answer.json())
    _reason(api.call("alice", "GET", "/admin/v2/namespaces/acme"), 403)
    _reason(api.call("admin", "GET", "/admin/v2/namespaces/nosuch"), 404)


def test_topics_of_a_namespace(api: Api) -> None:
    seeded = api.seeded(partitions=2)
    listed = api.call("alice", "GET", "/admin/v2/persistent/acme/orders").json()
    assert f"{seeded.topic}-partition-0" in listed and f"{seeded.topic}-partition-1" in listed
    partitioned = api.call("alice", "GET", "/admin/v2/persistent/acme/orders/partitioned")
    assert seeded.topic in partitioned.json()
    _reason(api.call("carol", "GET", "/admin/v2/persistent/acme/orders"), 403)
    meta = api.call("alice", "GET", rest_path(seeded.topic) + "/partitions")
    assert meta.json() == {"partitions": 2}


def test_grant_permission(api: Api) -> None:
    from cursorops.core.services.broker import Broker

    with Broker(api.config) as broker:
        broker.admin.create_namespace("admin", "acme/grants")
    listing = "/admin/v2/persistent/acme/grants"
    _reason(api.call("carol", "GET", listing), 403)
    granted = api.call(
        "admin", "POST", "/admin/v2/namespaces/acme/grants/permissions/carol", json=["produce"]
    )
    assert granted.status_code == 204
    # Pulsar's get-topics is allowed to any role that may produce or consume there.
    assert api.call("carol", "GET", listing).json() == []
    path = "/admin/v2/namespaces/acme/orders/permissions/erin"
    assert api.call("admin", "POST", path, json=["produce"]).status_code == 204
    _reason(api.call("admin", "POST", path, json=["fly"]), 400)
    _reason(api.call("admin", "POST", path, json={"actions": ["consume"]}), 400)
    _reason(api.call("alice", "POST", path, json=["consume"]), 403)
    _reason(
        api.call(
            "admin", "POST", "/admin/v2/namespaces/acme/nosuch/permissions/erin", json=["consume"]
        ),
        404,
    )


def test_skip_approval_policy_is_for_tenant_admins(api: Api) -> None:
    path = "/admin/v2/namespaces/acme/orders/skipApproval"
    _reason(api.call("alice", "POST", path, json=True), 403)
    _reason(api.call("admin", "POST", path, json="yes"), 400)
    _reason(
        api.call("admin", "POST", "/admin/v2/namespaces/acme/nosuch/skipApproval", json=True), 404
    )
    assert api.call("admin", "POST", path, json=False).status_code == 204


# -- stats -----------------------------------------------------------------------


def test_stats_give_the_exact_backlog(api: Api) -> None:
    seeded = api.seeded()
    whole = api.call("alice", "GET", rest_path(seeded.topic) + "/stats")
    assert whole.status_code == 200
    assert whole.json()["subscriptions"][SUBSCRIPTION]["msgBacklog"] == SEEDED_BACKLOG
    parts = [
        api.call("alice", "GET", rest_path(f"{seeded.topic}-partition-{i}") + "/stats").json()
        for i in range(3)
    ]
    assert [p["partitionIndex"] for p in parts] == [0, 1, 2]
    assert sum(p["subscriptions"][SUBSCRIPTION]["msgBacklog"] for p in parts) == SEEDED_BACKLOG
    stats = api.call("alice", "GET", rest_path(seeded.topic) + "/partitioned-stats").json()
    assert stats["metadata"] == {"partitions": 3}
    assert sorted(stats["partitions"]) == [f"{seeded.topic}-partition-{i}" for i in range(3)]
    assert stats["subscriptions"][SUBSCRIPTION]["msgBacklog"] == SEEDED_BACKLOG
    _reason(api.call("alice", "GET", rest_path(seeded.topic + "-partition-7") + "/stats"), 404)
    _reason(api.call("alice", "GET", "/admin/v2/persistent/acme/orders/nosuch/stats"), 404)
    _reason(api.call("dave", "GET", rest_path(seeded.topic) + "/stats"), 403)
    _reason(api.call("alice", "GET", "/admin/v2/persistent/acme/orders/a%20b/stats"), 400)
    flat = api.seeded(partitions=0)
    _reason(api.call("alice", "GET", rest_path(flat.topic) + "/partitioned-stats"), 404)


# -- subscriptions --------------------------------------------------------------


def test_create_list_and_delete_subscriptions(api: Api) -> None:
    seeded = api.seeded(partitions=0)
    base = rest_path(seeded.topic)
    assert api.call("alice", "GET", base + "/subscriptions").json() == [SUBSCRIPTION]
    created = api.call("alice", "PUT", base + "/subscription/audit?subscriptionType=Shared")
    assert created.status_code == 204
    assert "already exists" in _reason(api.call("alice", "PUT", base + "/subscription/audit"), 409)
    earliest = api.call(
        "alice", "PUT", base + "/subscription/replay", json={"ledgerId": -1, "entryId": -1}
    )
    assert earliest.status_code == 204
    assert api.backlog(seeded.topic, "replay") == 63
    assert api.backlog(seeded.topic, "audit") == 0
    assert set(api.call("alice", "GET", base + "/subscriptions").json()) == {
        SUBSCRIPTION,
        "audit",
        "replay",
    }
    _reason(api.call("alice", "PUT", base + "/subscription/x", json={"ledgerId": 1}), 400)
    _reason(
        api.call(
            "alice",
            "PUT",
            base + "/subscription/x",
            json={"ledgerId": 1, "entryId": 1, "batchIndex": 2},
        ),
        400,
    )
    _reason(api.call("alice", "PUT", base + "/subscription/x?replicated=true"), 400)
    _reason(api.call("carol", "PUT", base + "/subscription/x"), 403)
    assert api.call("alice", "DELETE", base + "/subscription/audit").status_code == 204
    _reason(api.call("alice", "DELETE", base + "/subscription/audit"), 404)
    assert "x" not in api.call("alice", "GET", base + "/subscriptions").json()


def test_unsubscribe_with_a_connected_consumer_is_412_unless_forced(api: Api) -> None:
    from cursorops.core.services.broker import Broker

    seeded = api.seeded(partitions=0)
    base = rest_path(seeded.topic)
    with Broker(api.config) as broker:
        consumer = broker.reading.dispatcher("admin", seeded.topic, SUBSCRIPTION).subscribe(
            "c1", 10
        )
        consumer.receive_many(1)
        _reason(api.call("alice", "DELETE", base + f"/subscription/{SUBSCRIPTION}"), 412)
        forced = api.call("alice", "DELETE", base + f"/subscription/{SUBSCRIPTION}?force=true")
        assert forced.status_code == 204


# -- backlog analysis and reset ----------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_analyze_backlog_per_partition_and_whole(api: Api, method: str) -> None:
    seeded = api.seeded()
    path = f"/subscription/{SUBSCRIPTION}/analyzeBacklog"
    whole = api.call("alice", method, rest_path(seeded.topic) + path).json()
    assert whole["messages"] == SEEDED_BACKLOG
    assert len(whole["partitions"]) == 3
    one = api.call("alice", method, rest_path(seeded.topic + "-partition-1") + path).json()
    assert one["messages"] == whole["partitions"][1]["messages"]
    assert one["firstMessageId"] is not None
    _reason(
        api.call("alice", method, rest_path(seeded.topic) + "/subscription/nosuch/analyzeBacklog"),
        404,
    )
    _reason(api.call("carol", method, rest_path(seeded.topic) + path), 403)


def test_analyze_backlog_refuses_a_start_position(api: Api) -> None:
    seeded = api.seeded()
    path = rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}/analyzeBacklog"
    _reason(api.call("alice", "POST", path, json={"ledgerId": 1, "entryId": 0}), 400)


def test_reset_cursor_to_a_time(api: Api) -> None:
    seeded = api.seeded()
    path = rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}/resetcursor/"
    assert api.call("alice", "POST", path + "0").status_code == 204
    assert api.backlog(seeded.topic) == 63
    assert api.call("alice", "POST", path + str(2**62)).status_code == 204
    assert api.backlog(seeded.topic) == 0
    _reason(api.call("alice", "POST", path + "-1"), 400)
    _reason(api.call("dave", "POST", path + "0"), 403)
    assert api.call("alice", "GET", path + "0").status_code == 405


# -- peek and examine ----------------------------------------------------------------


def test_peek_the_nth_message(api: Api) -> None:
    seeded = api.seeded()
    sub = f"/subscription/{SUBSCRIPTION}/position/"
    assert "partitioned topic" in _reason(
        api.call("alice", "GET", rest_path(seeded.topic) + sub + "1"), 405
    )
    answer = api.call("alice", "GET", rest_path(seeded.topic + "-partition-0") + sub + "1")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.content.startswith(b"order #")
    assert answer.headers["X-Pulsar-partition-index"] == "0"
    assert "X-Pulsar-Message-ID" in answer.headers
    _reason(api.call("alice", "GET", rest_path(seeded.topic + "-partition-0") + sub + "99999"), 404)
    _reason(api.call("alice", "GET", rest_path(seeded.topic + "-partition-0") + sub + "0"), 400)
    _reason(api.call("carol", "GET", rest_path(seeded.topic + "-partition-0") + sub + "1"), 403)


def test_examine_a_message(api: Api) -> None:
    seeded = api.seeded(partitions=0)
    path = rest_path(seeded.topic) + "/examinemessage"
    first = api.call("alice", "GET", path + "?initialPosition=earliest&messagePosition=1")
    assert first.status_code == 200, first.text
    assert first.content == b"order #0"
    last = api.call("alice", "GET", path)
    assert last.content.startswith(b"reminder #2")
    _reason(api.call("alice", "GET", path + "?messagePosition=0"), 400)
    _reason(api.call("alice", "GET", path + "?initialPosition=middle"), 400)
    _reason(api.call("alice", "GET", path + "?messagePosition=1000"), 404)
    partitioned = api.seeded()
    _reason(api.call("alice", "GET", rest_path(partitioned.topic) + "/examinemessage"), 405)


# -- skipByMessageIds ------------------------------------------------------------------


def _skip(api: Api, user: str, topic: str, body: Any, sub: str = SUBSCRIPTION, **kw: Any) -> Any:
    return api.call(
        user, "POST", rest_path(topic) + f"/subscription/{sub}/skipByMessageIds", json=body, **kw
    )


def test_skip_with_each_pip_423_body_shape(api: Api) -> None:
    seeded = api.seeded()
    open_ids = seeded.unacknowledged()
    unacked = [m for m in seeded.ids if label(m) in open_ids]
    a, b, c = unacked[0], unacked[10], unacked[-1]
    assert _skip(api, "alice", seeded.topic, [a.to_base64()]).status_code == 204
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG - 1
    body = {"type": "byteArray", "messageIds": [b.to_base64()]}
    assert _skip(api, "alice", seeded.topic, body).status_code == 204
    body = {
        "type": "MessageId",
        "messageIds": [
            {"ledgerId": str(c.ledger_id), "entryId": c.entry_id, "batchIndex": c.batch_index}
        ],
    }
    assert _skip(api, "bob", seeded.topic, body).status_code == 204
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG - 3
    skips = [k for k in api.audit(seeded.topic) if k == "skip"]
    assert len(skips) == 3


def test_skip_on_a_partition_path_takes_only_its_ids(api: Api) -> None:
    seeded = api.seeded()
    open_ids = seeded.unacknowledged()
    on_0 = [m for m in seeded.ids if m.partition == 0 and label(m) in open_ids]
    on_1 = [m for m in seeded.ids if m.partition == 1 and label(m) in open_ids]
    part0 = seeded.topic + "-partition-0"
    assert "other partitions" in _reason(
        _skip(api, "alice", part0, [on_0[0].to_base64(), on_1[0].to_base64()]), 400
    )
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG
    assert _skip(api, "alice", part0, [on_0[0].to_base64()]).status_code == 204
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG - 1


def test_skip_errors_change_nothing(api: Api) -> None:
    seeded = api.seeded()
    good = seeded.ids[20].to_base64()
    for body in ([good, "!!"], {"type": "nope", "messageIds": []}, [], {"messageIds": 3}, "x"):
        _reason(_skip(api, "alice", seeded.topic, body), 400)
    missing = {"type": "messageId", "messageIds": [{"ledgerId": 999999, "entryId": 0}]}
    assert "beyond the last entry" in _reason(_skip(api, "alice", seeded.topic, missing), 400)
    _reason(_skip(api, "alice", seeded.topic, [good], sub="nosuch"), 404)
    _reason(_skip(api, "dave", seeded.topic, [good]), 403)
    _reason(_skip(api, "carol", seeded.topic, [good]), 403)
    api.call(
        "alice", "PUT", rest_path(seeded.topic) + "/subscription/solo?subscriptionType=Exclusive"
    )
    assert "Unsupported subscription type" in _reason(
        _skip(api, "alice", seeded.topic, [good], sub="solo"), 409
    )
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG
    assert "skip" not in api.audit(seeded.topic)


def test_skip_on_an_approval_namespace_applies_nothing(api: Api) -> None:
    seeded = api.seeded(APPROVAL_NS)
    good = seeded.ids[20].to_base64()
    # Bad ids are refused before anything is triggered.
    _reason(_skip(api, "alice", seeded.topic, [good, "AAAA"], params={"reason": "x"}), 400)
    assert "A reason is required" in _reason(_skip(api, "alice", seeded.topic, [good]), 400)
    # This Airflow (in-process) has no DAGs: asked before anything is planned, 503, nothing
    # applied, nothing stored.
    missing = _skip(api, "alice", seeded.topic, [good], headers={"X-Cursorops-Reason": "dup"})
    assert "Airflow has no DAG cursorops_skip_messages" in _reason(missing, 503)
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG
    assert api.audit(seeded.topic) == []


def test_a_user_airflow_does_not_let_trigger_the_workflow_stores_nothing(api: Api) -> None:
    """carol, an Airflow viewer, holds the Pulsar permission to skip on a namespace that
    requires approval: Airflow's auth manager refuses her the run (403) before anything is
    planned or stored; on an ordinary namespace her skip applies at once."""
    from cursorops.core.services.broker import Broker

    namespace = f"acme/viewers-{secrets.token_hex(3)}"
    with Broker(api.config) as broker:
        broker.admin.create_namespace("admin", namespace)
        broker.admin.grant_permission("admin", namespace, "carol", ["consume"])
    guarded = api.seeded(namespace)
    with Broker(api.config) as broker:
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    good = guarded.ids[20].to_base64()
    refused = _skip(api, "carol", guarded.topic, [good], headers={"X-Cursorops-Reason": "pill"})
    assert "Airflow does not let carol trigger cursorops_skip_messages" in _reason(refused, 403)
    assert api.backlog(guarded.topic) == SEEDED_BACKLOG
    assert api.audit(guarded.topic) == []
    with Broker(api.config) as broker:
        assert broker.workflow.waiting_plan_records("admin", guarded.topic) == []
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=False)
    assert _skip(api, "carol", guarded.topic, [good]).status_code == 204
    assert api.backlog(guarded.topic) == SEEDED_BACKLOG - 1


# -- hostile bodies ------------------------------------------------------------------------


def test_a_body_over_the_cap_is_413_before_it_is_read(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded = api.seeded()
    monkeypatch.setenv("CURSOROPS_API_MAX_BODY_BYTES", "1000")
    ids = [seeded.ids[20].to_base64()] * 200
    assert "too large" in _reason(_skip(api, "alice", seeded.topic, ids), 413)

    def chunks() -> Any:
        yield b"["
        for _ in range(200):
            yield b'"' + ids[0].encode() + b'",'
        yield b'"x"]'

    streamed = api.call(
        "alice",
        "POST",
        rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}/skipByMessageIds",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert "too large" in _reason(streamed, 413)
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG


def test_more_ids_than_the_cap_is_413(api: Api) -> None:
    from cursorops.rest.limits import MAX_SKIP_IDS

    seeded = api.seeded()
    ids = ["CAEQAA=="] * (MAX_SKIP_IDS + 1)
    assert "Too many message ids" in _reason(_skip(api, "alice", seeded.topic, ids), 413)
    body = {"type": "messageId", "messageIds": [{"ledgerId": 1, "entryId": 0}] * (MAX_SKIP_IDS + 1)}
    assert "Too many message ids" in _reason(_skip(api, "alice", seeded.topic, body), 413)
    one_million = [seeded.ids[20].to_base64()] * 1_000_000
    assert "too large" in _reason(_skip(api, "alice", seeded.topic, one_million), 413)
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG


# -- skip/{numMessages} and skip_all (clear-backlog) ------------------------------------


def test_skip_n_counts_messages_per_partition_and_skip_all_clears(api: Api) -> None:
    seeded = api.seeded()
    sub = rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}"
    assert api.call("alice", "POST", sub + "/skip/2").status_code == 204
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG - 6  # two messages on each of three
    partition = rest_path(seeded.topic) + f"-partition-1/subscription/{SUBSCRIPTION}"
    assert api.call("alice", "POST", partition + "/skip/1").status_code == 204
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG - 7
    assert api.call("alice", "POST", sub + "/skip_all").status_code == 204
    assert api.backlog(seeded.topic) == 0
    assert api.audit(seeded.topic).count("skip") == 3


def test_skip_n_bad_input_is_refused_and_changes_nothing(api: Api) -> None:
    seeded = api.seeded()
    sub = rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}"
    for count in ("0", "-1", "x", "1.5", str(2**63)):
        assert api.call("alice", "POST", sub + f"/skip/{count}").status_code in (400, 422)
    _reason(api.call("carol", "POST", sub + "/skip/1"), 403)
    missing = rest_path(seeded.topic) + "/subscription/nobody"
    _reason(api.call("alice", "POST", missing + "/skip_all"), 404)
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG


# -- poisonRadar (cursorops extension) --------------------------------------------------


def test_poison_radar_lists_the_head_behind_a_consumers_ack_not_behind_a_skip(api: Api) -> None:
    """An operator's skip of the sixth message is no evidence: nothing is behind it. A
    consumer that acknowledges the seventh while it holds the six before it is: they are."""
    from cursorops.core.services.broker import Broker

    seeded = api.seeded(partitions=1)
    unacked = [m for m in seeded.ids if label(m) in seeded.unacknowledged()]
    sub = rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}"
    skipped = api.call("alice", "POST", sub + "/skipByMessageIds", json=[unacked[5].to_base64()])
    assert skipped.status_code == 204
    answer = api.call("alice", "GET", sub + "/poisonRadar?minAgeSeconds=0&maxListed=3")
    assert answer.status_code == 200, answer.text
    assert (answer.json()["stuck"], answer.json()["listed"]) == (0, [])
    with Broker(api.config) as broker:
        consumer = broker.reading.dispatcher("alice", seeded.topic, SUBSCRIPTION).subscribe(
            "c", receiver_queue_size=6
        )
        received = consumer.receive_many(6)
        assert [m.message_id.triplet() for m in received][:5] == [m.triplet() for m in unacked[:5]]
        consumer.acknowledge(received[5])
        radar = api.call("alice", "GET", sub + "/poisonRadar?minAgeSeconds=0&maxListed=3").json()
        consumer.close()
    assert radar["behindAcks"] == 5 and len(radar["listed"]) == 3
    assert [m["messageId"] for m in radar["listed"]] == [m.triplet() for m in unacked[:3]]
    assert radar["skipRequest"]["conf"]["message_ids"] == [m["messageId"] for m in radar["listed"]]
    assert radar["approvalRequired"] is False
    assert api.call("alice", "GET", sub + "/poisonRadar?maxListed=5000").status_code in (400, 422)
    assert api.call("carol", "GET", sub + "/poisonRadar").status_code == 403
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG - 2


@pytest.mark.parametrize("namespace", [OPEN_NS, APPROVAL_NS])
def test_a_skip_preview_plans_what_the_skip_would_do_and_changes_nothing(
    api: Api, namespace: str
) -> None:
    seeded = api.seeded(namespace, partitions=2)
    unacked = [m for m in seeded.ids if label(m) in seeded.unacknowledged()]
    chosen = [*unacked[:3], seeded.ids[0]]  # the last one is acknowledged already
    sub = rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}"
    audit_before = api.audit(seeded.topic)
    answer = api.call(
        "alice",
        "POST",
        sub + "/skipByMessageIds?preview=true",
        json=[m.to_base64() for m in chosen],
    )
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    assert plan["approvalRequired"] is (namespace == APPROVAL_NS)
    assert (plan["ids"], plan["alreadyAcknowledged"]) == (4, 1)
    assert [m["messageId"] for m in plan["messageIds"]] == [m.triplet() for m in chosen]
    assert plan["backlog"]["before"] == SEEDED_BACKLOG
    assert plan["backlog"]["after"] == SEEDED_BACKLOG - 3
    per_partition = plan["backlog"]["perPartition"]
    assert sum(p["before"] - p["after"] for p in per_partition.values()) == 3
    # Nothing applied, stored or audited; a preview needs no reason, and no more rights.
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG
    assert api.audit(seeded.topic) == audit_before
    refused = api.call(
        "carol", "POST", sub + "/skipByMessageIds?preview=true", json=[chosen[0].to_base64()]
    )
    assert refused.status_code == 403


def test_skip_on_a_partitions_url_skips_its_ids_and_refuses_the_others(api: Api) -> None:
    """As Pulsar's REST path has it: a partition's URL acts on that partition alone."""
    seeded = api.seeded()
    open_ids = seeded.unacknowledged()
    unacked = [m for m in seeded.ids if label(m) in open_ids]
    on_one = next(m for m in unacked if m.partition == 1)
    on_two = next(m for m in unacked if m.partition == 2)
    path = rest_path(seeded.topic + "-partition-1") + f"/subscription/{SUBSCRIPTION}"
    refused = api.call(
        "alice", "POST", path + "/skipByMessageIds", json=[on_one.to_base64(), on_two.to_base64()]
    )
    assert refused.status_code == 400, refused.text
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG
    done = api.call("alice", "POST", path + "/skipByMessageIds", json=[on_one.to_base64()])
    assert done.status_code == 204, done.text
    assert seeded.unacknowledged() == open_ids - {label(on_one)}


def test_delete_and_create_again_are_cursor_moves_on_an_approval_namespace(api: Api) -> None:
    """The trial's door over REST: a delete is a request of the unsubscribe workflow (here
    Airflow has no DAGs: 503, nothing applied), and a name with history comes back at latest
    only."""
    from cursorops.core.domain.plans.plan_record import PlanBinding
    from cursorops.core.services.broker import Broker

    seeded = api.seeded(APPROVAL_NS)
    path = rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}"
    assert "A reason is required" in _reason(api.call("alice", "DELETE", path), 400)
    asked = api.call("alice", "DELETE", path, headers={"X-Cursorops-Reason": "drained"})
    assert "Airflow has no DAG cursorops_unsubscribe" in _reason(asked, 503)
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG
    with Broker(api.config) as broker:  # what the approved workflow's apply does
        plan = unsubscribe.plan_unsubscribe(broker.gated, "alice", seeded.topic, SUBSCRIPTION)
        binding = PlanBinding("cursorops_unsubscribe", "manual__r", "alice", "alice", "unsubscribe")
        record = broker.workflow.save_plan_record(binding, plan, {})
        broker.apply_approved_plan(record, [{"approver": "bob"}])
    for start in ({"ledgerId": -1, "entryId": -1}, {"ledgerId": 0, "entryId": 0}):
        refused = api.call("alice", "PUT", path + "?subscriptionType=Shared", json=start)
        assert "cursorops_reset_cursor" in _reason(refused, 403)
        assert api.audit(seeded.topic).count("unsubscribe") == 1
    again = api.call("alice", "PUT", path + "?subscriptionType=Shared")
    assert again.status_code == 204, again.text
    assert api.backlog(seeded.topic) == 0


def test_open_requests_list_what_was_planned_and_never_closed(api: Api) -> None:
    """A run forced green never writes its closing record: its request stays listed, with
    the plan digest its approvers read, as not applied."""
    from cursorops.core.domain.plans.plan_record import PlanBinding
    from cursorops.core.services.broker import Broker

    seeded = api.seeded(APPROVAL_NS)
    with Broker(api.config) as broker:  # what the DAG's planning task stores
        plan = skip_slice.plan_skip(
            broker.gated, "alice", seeded.topic, SUBSCRIPTION, seeded.ids[20:22]
        )
        binding = PlanBinding("cursorops_skip_messages", "manual__forced", "alice", "alice")
        record = broker.workflow.save_plan_record(binding, plan, {"reason": "stuck"})
    path = rest_path(seeded.topic) + "/openRequests"
    answer = api.call("bob", "GET", path)
    assert answer.status_code == 200, answer.text
    [listed] = [r for r in answer.json() if r["runId"] == "manual__forced"]
    assert listed["planDigest"] == record.digest and listed["applied"] is False
    who = (listed["requester"], listed["reason"], listed["operation"])
    assert who == ("alice", "stuck", "skip")
    _reason(api.call("carol", "GET", path), 403)

"""``skip -n`` and ``clear-backlog`` where the namespace requires approval: REST starts
``cursorops_skip_head`` as the caller, and nothing moves until a second person approves."""

from __future__ import annotations

import secrets

import httpx
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from tests.airflow_harness import Airflow
from tests.dags.conftest import SUBSCRIPTION, seed_topic
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG = "cursorops_skip_head"
GATE = "approve_skip"


def head_of_each_partition(labels: set[str], n: int) -> set[str]:
    """The first ``n`` of each partition's labels ``p/L:E:B``, in position order."""
    by_partition: dict[str, list[tuple[int, int, int, str]]] = {}
    for text in labels:
        partition, triplet = text.split("/")
        ledger, entry, index = (int(v) for v in triplet.split(":"))
        by_partition.setdefault(partition, []).append((ledger, entry, index, text))
    return {row[3] for rows in by_partition.values() for row in sorted(rows)[:n]}


def test_skip_n_waits_for_a_second_person_then_skips_exactly_the_preview(
    airflow: Airflow, cursorops_home: Config
) -> None:
    namespace = f"acme/approved-{secrets.token_hex(3)}"
    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", namespace, role, ["consume"])
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    seeded = seed_topic(cursorops_home, namespace)
    before = seeded.unacknowledged()
    path = f"{PREFIX}{rest_path(seeded.topic)}/subscription/{SUBSCRIPTION}"

    def post(suffix: str, **headers: str) -> httpx.Response:
        return airflow.request("alice", "POST", path + suffix, headers=headers)

    refused = post("/skip/3")  # no reason
    assert refused.status_code == 400 and "reason" in refused.json()["reason"]
    answer = post("/skip/3", **{"X-Cursorops-Reason": "stale orders"})
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["dagId"] == DAG
    assert body["url"] == body["runUrl"] + f"/tasks/{GATE}/required_actions"
    run = body["runId"]
    # The run carries the plan record's digest only: the door planned and stored it.
    assert airflow.dag_run(DAG, run)["conf"] == {"plan_digest": body["planDigest"]}
    with Broker(cursorops_home) as broker:
        record = broker.workflow.current_plan_record("admin", DAG, run)
    assert record is not None and record.digest == body["planDigest"]
    assert (
        record.document["head"] == {"messages": 3} and record.document["reason"] == "stale orders"
    )

    detail = airflow.wait_awaiting_input(DAG, run, GATE)
    assert "the first 3 unacknowledged message\\(s\\) of each partition" in detail["body"]
    assert (
        f"Backlog:** {len(before)} message(s) now, **{len(before) - 9}** after" in (detail["body"])
    )
    # A consumer acknowledges; new messages arrive: neither changes what was approved.
    with Broker(cursorops_home) as broker:
        from cursorops.core.services.producer import OutgoingMessage

        broker.producing.produce("admin", seeded.topic, [OutgoingMessage(b"late")] * 6)
    after_produce = seeded.unacknowledged()
    assert seeded.audit("skip") == []

    assert airflow.answer(DAG, run, GATE, "Approve", user="alice").status_code == 403
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
    assert seeded.unacknowledged() == after_produce - head_of_each_partition(before, 3)
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "applied"
    assert request["requester"] == "alice"

"""Message content on the real Airflow: a skip's and a redrive's approval, read by a viewer
(carol) and by an Airflow operator with no Pulsar grant (dave), holds no key, property or
payload, nor does anything else of the run they may open (its conf, its task logs, its
XComs, the plan record over REST); an approver who may peek reads them on the Cursors
page's plan record."""

from __future__ import annotations

from typing import Any

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from tests.airflow_harness import Airflow
from tests.dags.test_gated_operations_airflow import approval_topic
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

KEY = "card-4111"
SECRETS = (KEY, "pii", "secret-payload")
READERS = ("carol", "dave")
"""A viewer, and an operator with no Pulsar grant: every reader of the DAG may open its
approval."""


def _message(i: int) -> OutgoingMessage:
    return OutgoingMessage(b"secret-payload-%d" % i, key=KEY, properties={"pii": "yes"})


def _everything_of_the_run(airflow: Airflow, user: str, dag: str, run: str) -> dict[str, str]:
    """What ``user`` gets from Airflow's API about the run: the run (its conf), each task's
    approval details, log and XComs; and the plan record from cursorops' REST app."""
    base = f"/api/v2/dags/{dag}/dagRuns/{run}"
    texts = {"run": airflow.request(user, "GET", base).text}
    for ti in airflow.task_instances(dag, run):
        task = ti["task_id"]
        if ti["state"] in (None, "scheduled", "queued", "upstream_failed", "skipped"):
            continue
        path = f"{base}/taskInstances/{task}"
        texts[f"{task} approval"] = airflow.request(user, "GET", f"{path}/-1/hitlDetails").text
        texts[f"{task} log"] = airflow.request(
            user, "GET", f"{path}/logs/1", headers={"Accept": "application/json"}
        ).text
        entries = airflow.request(user, "GET", f"{path}/xcomEntries")
        texts[f"{task} xcoms"] = entries.text
        if entries.status_code == 200:
            for entry in entries.json().get("xcom_entries", []):
                key = entry["key"]
                texts[f"{task} xcom {key}"] = airflow.request(
                    user, "GET", f"{path}/xcomEntries/{key}"
                ).text
    texts["plan record"] = airflow.request(user, "GET", f"{PREFIX}/planRecords/{dag}/{run}").text
    return texts


def test_no_reader_without_peek_sees_content_of_a_skip_or_a_redrive(
    airflow: Airflow, cursorops_home: Config
) -> None:
    topic = approval_topic(cursorops_home, "billing")
    dlq = f"{topic}-billing-DLQ"
    with Broker(cursorops_home) as broker:
        ids = broker.producing.produce("admin", topic, [_message(i) for i in range(3)])
        broker.admin.create_topic("admin", dlq)
        broker.admin.create_subscription(
            "admin", dlq, "reader", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce("admin", dlq, [_message(i) for i in range(2)])
    path = f"{PREFIX}{rest_path(topic)}/subscription/billing"
    why = {"X-Cursorops-Reason": "card data"}
    asked: list[tuple[Any, str]] = [
        (
            airflow.request(
                "alice", "POST", f"{path}/skipByMessageIds", json=[ids[0].to_base64()], headers=why
            ),
            "approve_skip",
        ),
        (airflow.request("alice", "POST", f"{path}/redrive", headers=why), "approve_redrive"),
    ]
    for answer, gate in asked:
        assert answer.status_code == 202, answer.text
        dag, run = answer.json()["dagId"], answer.json()["runId"]
        detail = airflow.wait_awaiting_input(dag, run, gate)
        body = detail["body"].replace("\\", "")
        assert "masked here" in body and "9 bytes, masked" in body, body
        for user in READERS:
            texts = _everything_of_the_run(airflow, user, dag, run)
            # Both read the run and its approval (the body is the gate's, masked) ...
            assert "masked here" in texts[f"{gate} approval"], (user, texts[f"{gate} approval"])
            assert run in texts["run"]
            # ... and nothing of the run holds content.
            for what, text in texts.items():
                for secret in SECRETS:
                    assert secret not in text, (gate, user, what, secret)
        # bob may peek on both topics: the plan record shows him what the body masks.
        shown = airflow.get("bob", f"{PREFIX}/planRecords/{dag}/{run}")
        assert shown["contentShown"] is True
        assert KEY in shown["preview"].replace("\\", "") and "pii" in shown["preview"]
        assert airflow.answer(dag, run, gate, "Approve", user="bob").status_code == 200
        assert airflow.wait_run(dag, run) == "success", airflow.task_states(dag, run)

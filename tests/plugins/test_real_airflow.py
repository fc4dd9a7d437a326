"""The plugin inside the session's real ``airflow standalone`` (tests/dags' harness)."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest

from core.broker import Broker
from core.config import Config
from tests.airflow_harness import Airflow
from tests.dags.conftest import SUBSCRIPTION, label, seed_topic
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

SKIP_DAG = "cursorops_skip_messages"


def _runs(airflow: Airflow) -> int:
    return int(airflow.get("admin", f"/api/v2/dags/{SKIP_DAG}/dagRuns")["total_entries"])


def test_the_plugin_is_mounted_behind_airflows_login(airflow: Airflow) -> None:
    anonymous = httpx.get(f"{airflow.base_url}{PREFIX}/admin/v2/tenants", timeout=60)
    assert anonymous.status_code == 401 and anonymous.json() == {"reason": "Not authenticated"}
    answer = airflow.request("admin", "GET", f"{PREFIX}/admin/v2/tenants")
    assert answer.status_code == 200 and "acme" in answer.json()
    cookie = httpx.get(
        f"{airflow.base_url}{PREFIX}/admin/v2/tenants",
        cookies={"_token": airflow.token("admin")},
        timeout=60,
    )
    assert cookie.status_code == 200
    assert httpx.get(f"{airflow.base_url}{PREFIX}/openapi.json", timeout=60).status_code == 401
    plugins = airflow.get("admin", "/api/v2/plugins")["plugins"]
    apps = [app for p in plugins if p["name"] == "cursorops" for app in p["fastapi_apps"]]
    assert [app["url_prefix"] for app in apps] == [PREFIX]


def test_a_skip_where_approval_is_required_triggers_the_workflow_as_the_caller(
    airflow: Airflow, cursorops_home: Config
) -> None:
    namespace = f"acme/approved-{secrets.token_hex(3)}"
    with Broker(cursorops_home) as broker:
        broker.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.grant_permission("admin", namespace, role, ["consume"])
    policy = airflow.request(
        "admin", "POST", f"{PREFIX}/admin/v2/namespaces/{namespace}/skipApproval", json=True
    )
    assert policy.status_code == 204, policy.text
    seeded = seed_topic(cursorops_home, namespace)
    before = seeded.unacknowledged()
    chosen = next(m for m in seeded.ids if label(m) in before)
    path = f"{PREFIX}{rest_path(seeded.topic)}/subscription/{SUBSCRIPTION}/skipByMessageIds"
    runs_before = _runs(airflow)

    def skip(body: Any, **headers: str) -> httpx.Response:
        return airflow.request("alice", "POST", path, json=body, headers=headers)

    refused = skip([chosen.to_base64(), "AAAA"], **{"X-Cursorops-Reason": "poison pill"})
    assert refused.status_code == 400 and "reason" in refused.json()
    assert _runs(airflow) == runs_before

    answer = skip(
        [chosen.to_base64()], **{"X-Cursorops-Reason": "poison pill", "X-Cursorops-Ticket": "OPS-9"}
    )
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert set(body) == {"dagId", "runId", "url"} and body["dagId"] == SKIP_DAG
    assert body["url"].startswith(f"{airflow.base_url}/dags/{SKIP_DAG}/runs/")
    run = airflow.dag_run(SKIP_DAG, body["runId"])
    assert run["triggering_user_name"] == "alice"
    assert run["conf"] == {
        "topic": seeded.topic,
        "subscription": SUBSCRIPTION,
        "message_ids": [chosen.triplet()],
        "reason": "poison pill",
        "ticket": "OPS-9",
    }
    # The workflow plans it and waits for a second person; nothing is acknowledged.
    airflow.wait_parked(SKIP_DAG, body["runId"], "approve_skip")
    assert seeded.unacknowledged() == before
    assert seeded.audit("skip") == []

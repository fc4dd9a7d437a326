"""The plugin inside the session's real ``airflow standalone`` (tests/dags' harness)."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.header_text import header_value
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import undo_skip
from tests.airflow_harness import Airflow
from tests.dags.conftest import SUBSCRIPTION, label, seed_topic
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

SKIP_DAG = "cursorops_skip_messages"
REASON = "Rückbuchung für Kunde 顧客の返金 🧾"
TICKET = "OPS\u20119"
"""A ticket with a non-breaking hyphen: neither fits an HTTP header as it is."""


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
    middlewares = [
        m for p in plugins if p["name"] == "cursorops" for m in p["fastapi_root_middlewares"]
    ]
    assert [m["middleware"] for m in middlewares] == ["cursorops.airflow.late_answers.LateAnswers"]


def test_a_skip_where_approval_is_required_triggers_the_workflow_as_the_caller(
    airflow: Airflow, cursorops_home: Config
) -> None:
    namespace = f"acme/approved-{secrets.token_hex(3)}"
    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", namespace, role, ["consume"])
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

    # Text beyond Latin-1 travels as RFC 8187 values, as the CLI and the Cursors page send it.
    answer = skip(
        [chosen.to_base64()],
        **{
            "X-Cursorops-Reason": header_value(REASON),
            "X-Cursorops-Ticket": header_value(TICKET),
        },
    )
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert set(body) == {"dagId", "runId", "url", "runUrl", "planDigest"}
    assert body["dagId"] == SKIP_DAG
    assert body["runUrl"].startswith(f"{airflow.base_url}/dags/{SKIP_DAG}/runs/")
    # The link opens the approval itself, not the run.
    assert body["url"] == body["runUrl"] + "/tasks/approve_skip/required_actions"
    run = airflow.dag_run(SKIP_DAG, body["runId"])
    assert run["triggering_user_name"] == "alice"
    # Started in Airflow's API server itself, as a REST trigger would, with the digest only.
    assert run["triggered_by"] == "rest_api" and run["run_type"] == "manual"
    assert run["conf"] == {"plan_digest": body["planDigest"]}
    with Broker(cursorops_home) as broker:
        [record] = broker.workflow.waiting_plan_records("admin", seeded.topic)
    assert record.digest == body["planDigest"] and record.binding.run_id == body["runId"]
    assert record.document["reason"] == REASON and record.document["ticket"] == TICKET
    # The workflow waits for a second person; nothing is acknowledged.
    airflow.wait_parked(SKIP_DAG, body["runId"], "approve_skip")
    assert seeded.unacknowledged() == before
    assert seeded.audit("skip") == []


def _cli(airflow: Airflow, *args: str, **env: str) -> Any:
    import os
    import subprocess
    import sys

    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "CURSOROPS_ADMIN_URL": f"{airflow.base_url}{PREFIX}",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "cursorops.cli.main", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def test_the_cli_logged_in_acts_as_its_user_through_rest(
    airflow: Airflow, cursorops_home: Config
) -> None:
    """--admin-url with a token or a login: the server decides who the user is; the
    approval policy holds; --role and commands without a REST path are refused."""
    import json

    namespace = f"acme/cli-{secrets.token_hex(3)}"
    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", namespace, role, ["consume"])
    seeded = seed_topic(cursorops_home, namespace)
    before = seeded.unacknowledged()
    token = {"CURSOROPS_AUTH_TOKEN": airflow.token("alice")}

    stats = _cli(airflow, "-o", "json", "topics", "stats", seeded.topic, **token)
    assert stats.returncode == 0, stats.stderr
    with Broker(cursorops_home) as broker:
        local = broker.analysis.topic_stats("admin", seeded.topic)
    backlog = json.loads(stats.stdout)["subscriptions"][SUBSCRIPTION]["msgBacklog"]
    assert backlog == local.subscriptions[SUBSCRIPTION].msg_backlog == len(before)

    login = _cli(
        airflow, "--login", "dave", "topics", "stats", seeded.topic, CURSOROPS_PASSWORD="dave-pw"
    )
    assert login.returncode == 5 and "not authorized" in login.stderr  # dave: no grant
    wrong = _cli(
        airflow, "--login", "alice", "topics", "stats", seeded.topic, CURSOROPS_PASSWORD="nope"
    )
    assert wrong.returncode == 5 and "Login as alice" in wrong.stderr
    claimed = _cli(airflow, "--role", "admin", "topics", "stats", seeded.topic, **token)
    assert claimed.returncode == 2 and "--role is for the embedded home" in claimed.stderr
    # Every admin command goes through REST as the user: alice may not produce here.
    produced = _cli(airflow, "produce", seeded.topic, "-m", "x", **token)
    assert produced.returncode == 5, produced.stderr
    assert "not authorized to produce" in produced.stderr
    home_only = _cli(airflow, "db", "migrate", **token)
    assert home_only.returncode == 2 and "not through --admin-url" in home_only.stderr

    # skip -n and undo-skip through REST, applied at once on this namespace.
    head = _cli(airflow, "topics", "skip", seeded.topic, "-s", SUBSCRIPTION, "-n", "1", **token)
    assert head.returncode == 0, head.stderr
    assert len(seeded.unacknowledged()) == len(before) - 3  # one per partition
    with Broker(cursorops_home) as broker:
        [latest] = undo_skip.list_skips(broker.gated, "admin", seeded.topic, SUBSCRIPTION, limit=1)
    undo = _cli(
        airflow,
        "-o",
        "json",
        "topics",
        "undo-skip",
        seeded.topic,
        "-s",
        SUBSCRIPTION,
        "--skip-id",
        str(latest.skip_id),
        **token,
    )
    assert undo.returncode == 0, undo.stderr
    assert len(json.loads(undo.stdout)["unacknowledged"]) == 3
    assert seeded.unacknowledged() == before

    with Broker(cursorops_home) as broker:
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    chosen = next(m for m in seeded.ids if label(m) in before)
    skip = _cli(
        airflow,
        "topics",
        "skip-messages",
        seeded.topic,
        "-s",
        SUBSCRIPTION,
        "--messageId-triplet",
        chosen.triplet(),
        "--reason",
        REASON,
        "--ticket",
        TICKET,
        **token,
    )
    assert skip.returncode == 0, skip.stderr
    assert "Waiting for approval" in skip.stdout and "required_actions" in skip.stdout
    run = skip.stdout.split("Run ", 1)[1].split(" of ", 1)[0]
    assert airflow.dag_run(SKIP_DAG, run)["triggering_user_name"] == "alice"
    airflow.wait_parked(SKIP_DAG, run, "approve_skip")
    with Broker(cursorops_home) as broker:
        [record] = [
            r
            for r in broker.workflow.waiting_plan_records("admin", seeded.topic)
            if r.binding.run_id == run
        ]
    assert record.document["reason"] == REASON and record.document["ticket"] == TICKET
    assert seeded.unacknowledged() == before


def test_the_standalone_starts_a_run_through_airflows_rest_api_with_the_callers_token(
    airflow: Airflow, cursorops_home: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cursorops standalone`` serves the same REST app in another process: its request on
    a namespace that requires approval starts the run through Airflow's REST API with the
    caller's own token (run id core's, conf the digest, alice the requester). A token
    Airflow refuses: 403, and the stored request closed as not started, nothing applied."""
    from fastapi.testclient import TestClient

    from cursorops.wire.web import web_app

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", airflow.base_url)
    namespace = f"acme/standalone-{secrets.token_hex(3)}"
    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", namespace, role, ["consume"])
    seeded = seed_topic(cursorops_home, namespace)
    with Broker(cursorops_home) as broker:
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    before = seeded.unacknowledged()
    chosen = [m for m in seeded.ids if label(m) in before][:2]
    path = f"{rest_path(seeded.topic)}/subscription/{SUBSCRIPTION}/skipByMessageIds"
    with TestClient(web_app(cursorops_home, "alice", None)) as client:

        def skip(token: str, mid: Any) -> httpx.Response:
            headers = {"Authorization": f"Bearer {token}", "X-Cursorops-Reason": "pill"}
            return client.post(path, json=[mid.to_base64()], headers=headers)

        refused = skip("not-a-token", chosen[1])
        answer = skip(airflow.token("alice"), chosen[0])
    assert refused.status_code == 403, refused.text
    assert "Airflow refused to start cursorops_skip_messages" in refused.json()["reason"]
    [closed] = seeded.audit("skip-request")
    assert closed["outcome"] == "not-started"
    assert answer.status_code == 202, answer.text
    body = answer.json()
    run = airflow.dag_run(SKIP_DAG, body["runId"])
    assert run["triggering_user_name"] == "alice" and run["conf"] == {
        "plan_digest": body["planDigest"]
    }
    with Broker(cursorops_home) as broker:
        [waiting] = broker.workflow.open_requests("admin", seeded.topic)
    assert waiting.planned.detail["planDigest"] == body["planDigest"]
    airflow.wait_awaiting_input(SKIP_DAG, body["runId"], "approve_skip")
    assert (
        airflow.answer(SKIP_DAG, body["runId"], "approve_skip", "Reject", user="bob").status_code
        == 200
    )
    assert airflow.wait_run(SKIP_DAG, body["runId"]) == "failed"
    assert seeded.unacknowledged() == before and seeded.audit("skip") == []

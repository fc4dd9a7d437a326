"""The production topology as local processes, end to end (``scripts/topology-up.sh``).

PostgreSQL (the test server) holds two fresh databases, Airflow's and cursorops';
the script starts two cursorops brokers on the cursorops store (each answers its
health check, and the script prints their multi-host URL), a Spark standalone master
and worker, then Airflow's api-server, scheduler, dag-processor and triggerer as
separate processes with ``spark_default`` set to the master. Then:

1. alice asks for a skip over the REST path on a namespace that requires
   approval: 202, a ``cursorops_skip_messages`` run as alice;
2. bob approves it over REST (Airflow's HITL endpoint); it is applied;
3. alice asks ``cursorops_skip_matching`` (over Airflow's REST API) to skip the
   delayed reminders: its ``find_messages`` step runs on the Spark Connect
   server the script started, itself an application of the cluster (the master
   lists it); bob approves; it is applied;
4. the REST stats show the exact backlog (what a consumer still gets);
5. everything stops: no process of the script's group is left, the ports close; two
   hours later (the reminders due) a consumer gets every other message once, the
   skipped ones never.

Airflow's tables are on PostgreSQL (no SQLite file beside it). This is the one end-to-end
test of Airflow as separate processes on PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from cursorops.core.domain.config import Config
from cursorops.local.ports import listening
from tests.airflow_harness import USERS, Airflow, free_port, password
from tests.conftest import postgres_databases
from tests.dags.conftest import SUBSCRIPTION, TENANT, label, seed_topic
from tests.dags.test_skip_messages_airflow import GATE, pick

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
DATABASES = ("airflow_topology", "cursorops_topology")
NAMESPACE = f"{TENANT}/approved"
SKIP_DAG = "cursorops_skip_messages"
MATCH_DAG = "cursorops_skip_matching"
TWO_HOURS_MS = 2 * 3_600_000


@pytest.fixture
def databases() -> Iterator[dict[str, str]]:
    with postgres_databases(*DATABASES) as urls:
        yield urls


def start_topology(root: Path, environ: dict[str, str]) -> tuple[Airflow, dict[str, int]]:
    """``scripts/topology-up.sh`` on free ports, in its own process group; ready when the
    worker joined the master and the api-server serves the skip DAG."""
    from cursorops.airflow.local_airflow import _wait_ready, default_sigint

    home = root / "airflow"
    home.mkdir(parents=True)
    (home / "simple_auth_manager_passwords.json.generated").write_text(
        json.dumps({user: password(user) for user in USERS})
    )
    ports = {
        "airflow": free_port(),
        "logs": free_port(span=2),
        "spark": free_port(),
        "spark_ui": free_port(),
        "worker_ui": free_port(),
        "connect": free_port(),
        "broker": free_port(span=2),
        "web": free_port(span=2),
    }
    ports["broker_2"], ports["web_2"] = ports["broker"] + 1, ports["web"] + 1
    env = {
        **os.environ,
        **environ,
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW_PORT": str(ports["airflow"]),
        "AIRFLOW_LOG_PORT": str(ports["logs"]),
        "SPARK_MASTER_PORT": str(ports["spark"]),
        "SPARK_MASTER_UI_PORT": str(ports["spark_ui"]),
        "SPARK_WORKER_UI_PORT": str(ports["worker_ui"]),
        "SPARK_WORKER_MEMORY": "2g",
        "SPARK_CONNECT_PORT": str(ports["connect"]),
        "CURSOROPS_BROKERS": "2",
        "CURSOROPS_BROKER_PORT": str(ports["broker"]),
        "CURSOROPS_WEB_PORT": str(ports["web"]),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
        # Only the DAGs this test triggers run: no hourly audit competing for the CPU.
        "CURSOROPS_AUDIT_SCHEDULE": "none",
    }
    log = root / "topology.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", str(REPO / "scripts" / "topology-up.sh"), str(home)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=default_sigint,
        )
    airflow = Airflow(f"http://127.0.0.1:{ports['airflow']}", home, log, process, env)
    try:
        _wait_ready(airflow, SKIP_DAG, lambda _text: None, 600)
        _wait_ready(airflow, MATCH_DAG, lambda _text: None, 300)
    except BaseException:
        airflow.stop()
        raise
    return airflow, ports


def spark_master(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=10) as answer:
        return dict(json.loads(answer.read()))


@pytest.mark.timeout(2400)
def test_production_topology_as_local_processes(tmp_path: Path, databases: dict[str, str]):
    from cursorops.core.services.broker import Broker, wall_clock_ms

    config = Config.from_home(tmp_path / "cursorops", metadata_url=databases["cursorops_topology"])
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", TENANT)
        broker.admin.create_namespace("admin", NAMESPACE)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", NAMESPACE, role, ["consume"])
        broker.admin.set_namespace_policy("admin", NAMESPACE, skip_requires_approval=True)
    seeded = seed_topic(config, NAMESPACE, partitions=3)
    before = seeded.unacknowledged()
    reminders = {label(m) for m in seeded.ids[-3:]}
    ids = [m for m in pick(seeded) if label(m) not in reminders]
    assert len(ids) == 2

    airflow, ports = start_topology(
        tmp_path / "stack",
        {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": databases["airflow_topology"],
            "CURSOROPS_HOME": str(config.home),
            "CURSOROPS_METADATA_URL": config.metadata_url,
            "CURSOROPS_LEDGER_ROOT": str(config.ledger_root),
        },
    )
    try:
        master = (config.home / "spark" / "master-url").read_text().strip()
        assert master == f"spark://127.0.0.1:{ports['spark']}"
        state = spark_master(ports["spark_ui"])
        assert state["aliveworkers"] == 1
        # Two brokers on the same stores, each answering, behind one multi-host URL.
        brokers = (config.home / "brokers-url").read_text().strip()
        assert brokers == f"pulsar://127.0.0.1:{ports['broker']},127.0.0.1:{ports['broker_2']}"
        assert f"cursorops brokers ready: {brokers}" in airflow.log.read_text()
        for web in (ports["web"], ports["web_2"]):
            with urllib.request.urlopen(
                f"http://127.0.0.1:{web}/admin/v2/brokers/health", timeout=10
            ) as answer:
                assert answer.read() == b"ok"
        # -ww: ps cuts args at 80 columns when its output is a pipe, and a
        # checkout path of a few more characters hides "airflow scheduler".
        processes = subprocess.run(
            ["ps", "-ww", "-o", "args=", "-g", str(airflow.process.pid)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
            assert f"airflow {component}" in processes.replace("api_server", "api-server"), (
                component
            )
        health = airflow.request("alice", "GET", "/api/v2/monitor/health").json()
        for component in ("metadatabase", "scheduler", "dag_processor", "triggerer"):
            assert health[component]["status"] == "healthy", health
        # Airflow's own tables are on PostgreSQL, not in a SQLite file beside it.
        engine = create_engine(databases["airflow_topology"], poolclass=NullPool)
        with engine.connect() as connection:
            parsed = connection.execute(
                text("SELECT dag_id FROM dag WHERE dag_id IN (:skip, :match)"),
                {"skip": SKIP_DAG, "match": MATCH_DAG},
            )
            assert {row[0] for row in parsed} == {SKIP_DAG, MATCH_DAG}
        engine.dispose()
        assert not (airflow.home / "airflow.db").exists()

        # 1. alice, over the REST path: the namespace requires approval, so 202 and a run.
        topic_path = "/cursorops/admin/v2/persistent/" + seeded.topic.removeprefix("persistent://")
        asked = airflow.request(
            "alice",
            "POST",
            f"{topic_path}/subscription/{SUBSCRIPTION}/skipByMessageIds",
            json={
                "type": "messageId",
                "messageIds": [
                    {"ledgerId": m.ledger_id, "entryId": m.entry_id, "batchIndex": m.batch_index}
                    for m in ids
                ],
            },
            headers={"X-Cursorops-Reason": "poison pills", "X-Cursorops-Ticket": "OPS-9"},
        )
        assert asked.status_code == 202, asked.text
        run = asked.json()["runId"]
        assert asked.json()["dagId"] == SKIP_DAG
        assert airflow.dag_run(SKIP_DAG, run)["triggering_user_name"] == "alice"
        assert seeded.unacknowledged() == before

        # 2. bob approves over REST.
        airflow.wait_awaiting_input(SKIP_DAG, run, GATE, timeout=600)
        assert airflow.answer(SKIP_DAG, run, GATE, "Approve", user="bob").status_code == 200
        assert airflow.wait_run(SKIP_DAG, run, timeout=600) == "success", airflow.task_states(
            SKIP_DAG, run
        )
        assert seeded.unacknowledged() == before - {label(m) for m in ids}

        # 3. The Spark path: find_messages runs on the cluster, bob approves, applied.
        matching = airflow.trigger(
            MATCH_DAG,
            {
                "topic": seeded.topic,
                "subscription": SUBSCRIPTION,
                "still_scheduled": True,
                "reason": "cancel the reminders of a withdrawn campaign",
                "ticket": "OPS-10",
            },
            user="alice",
        )
        detail = airflow.wait_awaiting_input(MATCH_DAG, matching, GATE, timeout=900)
        assert "Skip 3 message(s), 3 id(s)" in detail["body"]
        find_log = airflow.task_log(MATCH_DAG, matching, "find_messages")
        # On the Spark Connect server airflow-topology.sh started, which runs on the cluster.
        assert f"on Spark Connect sc://127.0.0.1:{ports['connect']}" in find_log, find_log[-3000:]
        apps = spark_master(ports["spark_ui"])["activeapps"]
        assert any(app["name"] == "cursorops Spark Connect server" for app in apps), apps
        assert airflow.answer(MATCH_DAG, matching, GATE, "Approve", user="bob").status_code == 200
        assert airflow.wait_run(MATCH_DAG, matching, timeout=600) == "success", airflow.task_states(
            MATCH_DAG, matching
        )
        expected = before - {label(m) for m in ids} - reminders
        assert seeded.unacknowledged() == expected

        # 4. The REST stats: the exact backlog.
        stats = airflow.request("admin", "GET", f"{topic_path}/stats").json()
        assert stats["subscriptions"][SUBSCRIPTION]["msgBacklog"] == len(expected)
        with Broker(config) as broker:
            audit = [r.detail for r in broker.metadata.audit_log(seeded.topic, 100)]
        requests = [d for d in audit if d.get("outcome")]
        assert sorted(d["answer"]["by"] for d in requests) == ["bob", "bob"]
        assert {d["requester"] for d in requests} == {"alice"}
    finally:
        airflow.stop()

    # 5. Nothing left: the group is empty (checked by stop) and every port is closed.
    for name, port in ports.items():
        if name != "logs":
            assert not listening(port), name
    with Broker(config, clock=lambda: wall_clock_ms() + TWO_HOURS_MS) as broker:
        delivered = [
            label(m.message_id)
            for m in broker.reading.consume("admin", seeded.topic, SUBSCRIPTION, 1000, ack=True)
        ]
    assert len(delivered) == len(set(delivered))
    assert set(delivered) == expected

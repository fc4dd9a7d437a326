"""Airflow as ``make up`` starts it with its metadata on PostgreSQL; five people answer five
gates at the same moment.

``scripts/airflow-up.sh`` with ``CURSOROPS_AIRFLOW_DB=postgres`` (``make up``'s setting),
pointed at the test server's port and a database of the test's: the launcher finds a
PostgreSQL answering there and runs ``airflow standalone`` on that database (a server of
its own, and its stop, are tested on a stand-in in tests/test_airflow_up_postgres.py).
alice asks for five skips at the REST door of a namespace that requires approval; once
the five gates wait, bob, erin, frank, grace and heidi each approve one, all at once.
Every answer is recorded by its gate in cursorops's store, every run applies its own plan, and the
subscription loses exactly the five messages; Airflow's runs and answers are rows of the
PostgreSQL database, and no SQLite file of Airflow's exists.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from tests.airflow_harness import USERS
from tests.conftest import _postgres_base_url, postgres_databases
from tests.dags.conftest import SUBSCRIPTION, TENANT, label, seed_topic
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]

DAG = "cursorops_skip_messages"
GATE = "approve_skip"
APPROVERS = ("bob", "erin", "frank", "grace", "heidi")
ALL_USERS = {**USERS, **{user: "op" for user in APPROVERS}}


@pytest.fixture
def airflow_database() -> Iterator[str]:
    """A fresh database of this test's on the test server (the launcher finds it there,
    ``AIRFLOW_PG_DATABASE``), dropped afterwards."""
    name = f"airflow_five_{secrets.token_hex(4)}"
    with postgres_databases(name) as urls:
        yield urls[name]


def test_five_approvers_answer_five_gates_at_once_on_postgres(
    tmp_path: Path, airflow_database: str
) -> None:
    from cursorops.airflow.local_airflow import start_airflow

    config = Config.from_home(tmp_path / "cursorops")
    namespace = f"{TENANT}/five-{secrets.token_hex(3)}"
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", TENANT)
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", *APPROVERS):
            broker.admin.grant_permission("admin", namespace, role, ["consume"])
    seeded = seed_topic(config, namespace)
    with Broker(config) as broker:
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    before = seeded.unacknowledged()
    chosen = [m for m in seeded.ids[10:60] if label(m) in before][:5]
    port = make_url(_postgres_base_url()).port

    airflow = start_airflow(
        tmp_path,
        {
            "CURSOROPS_HOME": str(config.home),
            "CURSOROPS_METADATA_URL": "",
            "CURSOROPS_AUDIT_SCHEDULE": "none",
            "CURSOROPS_AIRFLOW_DB": "postgres",
            "AIRFLOW_PG_PORT": str(port),
            "AIRFLOW_PG_DATABASE": make_url(airflow_database).database or "",
        },
        users=ALL_USERS,
    )
    try:
        path = f"{PREFIX}{rest_path(seeded.topic)}/subscription/{SUBSCRIPTION}/skipByMessageIds"
        runs = []
        for mid in chosen:
            answer = airflow.request(
                "alice",
                "POST",
                path,
                json=[mid.to_base64()],
                headers={"X-Cursorops-Reason": "five at once"},
            )
            assert answer.status_code == 202, answer.text
            runs.append(str(answer.json()["runId"]))
        for run in runs:
            detail = airflow.wait_awaiting_input(DAG, run, GATE, timeout=900)
            assert {u["id"] for u in detail["assigned_users"]} >= set(APPROVERS)

        ready = threading.Barrier(len(runs))
        answers: dict[str, httpx.Response] = {}

        def approve(run: str, user: str) -> None:
            ready.wait(timeout=120)
            answers[run] = airflow.answer(DAG, run, GATE, "Approve", user=user)

        threads = [
            threading.Thread(target=approve, args=(run, user))
            for run, user in zip(runs, APPROVERS, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert {run: answers[run].status_code for run in runs} == dict.fromkeys(runs, 200)
        for run in runs:
            assert airflow.wait_run(DAG, run, timeout=900) == "success", airflow.task_states(
                DAG, run
            )
    finally:
        airflow.stop()

    # Each gate recorded its own answer, and each run applied its own plan.
    with Broker(config) as broker:
        for run, user in zip(runs, APPROVERS, strict=True):
            [recorded] = broker.workflow.approval_answers(DAG, run)
            assert recorded.request.gate == GATE
            assert list(recorded.chosen) == ["Approve"] and recorded.responded_by == user
    applied = {str(r["runId"]): r for r in seeded.audit("skip-request")}
    assert {run: applied[run]["outcome"] for run in runs} == dict.fromkeys(runs, "applied")
    assert [applied[run]["approvedBy"] for run in runs] == [[user] for user in APPROVERS]
    assert seeded.unacknowledged() == before - {label(m) for m in chosen}

    # Airflow kept its runs and the answers on PostgreSQL, none in a SQLite file.
    assert not list((tmp_path / "airflow").glob("*.db"))
    engine = create_engine(airflow_database, poolclass=NullPool)
    with engine.connect() as connection:
        count = connection.execute(
            text("SELECT count(*) FROM dag_run WHERE dag_id = :dag"), {"dag": DAG}
        ).scalar_one()
        responders = connection.execute(
            text(
                "SELECT h.responded_by FROM hitl_detail h JOIN task_instance t ON t.id = h.ti_id "
                "WHERE t.dag_id = :dag"
            ),
            {"dag": DAG},
        ).scalars()
        assert sorted(r["id"] for r in responders) == sorted(APPROVERS)
    engine.dispose()
    assert count == len(runs)

"""End to end on Airflow as deployed: separate processes, PostgreSQL for everything.

``scripts/airflow-topology.sh`` starts the api-server, the scheduler (LocalExecutor)
and the dag-processor as separate processes. PostgreSQL (the test server) holds
two fresh databases: Airflow's metadata (``airflow_e2e``) and cursorops'
(``cursorops_e2e``). alice triggers a skip over REST, bob approves it over REST
once the gate has waited a few seconds; then consumers never receive the skipped
messages and receive every other message exactly once. Stopping leaves no process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from cursorops.core.config import Config
from cursorops.core.reading.dispatch import Message
from tests.airflow_harness import start_airflow
from tests.conftest import postgres_databases
from tests.dags.conftest import (
    GRANTED,
    NAMESPACE,
    SUBSCRIPTION,
    TENANT,
    label,
    request_skip,
    seed_topic,
)
from tests.dags.test_skip_messages_airflow import DAG, GATE, pick

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]

DATABASES = ("airflow_e2e", "cursorops_e2e")


@pytest.fixture
def databases() -> Iterator[dict[str, str]]:
    with postgres_databases(*DATABASES) as urls:
        yield urls


def drain(config: Config, topic: str, clock_ahead_ms: int) -> list[Message]:
    """Everything a consumer receives (and acknowledges), with a clock this far ahead."""
    from cursorops.core.broker import Broker, wall_clock_ms

    received: list[Message] = []
    with Broker(config, clock=lambda: wall_clock_ms() + clock_ahead_ms) as broker:
        while got := broker.consume("admin", topic, SUBSCRIPTION, 1000, ack=True):
            received.extend(got)
    return received


def test_skip_on_separate_processes_with_postgresql(tmp_path: Path, databases: dict[str, str]):
    from cursorops.core.broker import Broker

    config = Config.from_home(tmp_path / "cursorops", metadata_url=databases["cursorops_e2e"])
    with Broker(config) as broker:
        broker.create_tenant("admin", TENANT)
        broker.create_namespace("admin", NAMESPACE)
        for role in GRANTED:
            broker.grant_permission("admin", NAMESPACE, role, ["consume"])
    seeded = seed_topic(config, partitions=4)
    ids = pick(seeded)
    before = seeded.unacknowledged()

    airflow = start_airflow(
        tmp_path / "stack",
        {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": databases["airflow_e2e"],
            "CURSOROPS_HOME": str(config.home),
            "CURSOROPS_METADATA_URL": config.metadata_url,
            "CURSOROPS_LEDGER_ROOT": config.ledger_root,
        },
        topology=True,
    )
    try:
        engine = create_engine(databases["airflow_e2e"], poolclass=NullPool)
        with engine.connect() as connection:
            # Airflow's own tables are on PostgreSQL, not in a SQLite file beside it.
            assert (
                connection.execute(
                    text("SELECT count(*) FROM dag WHERE dag_id = :d"), {"d": DAG}
                ).scalar()
                == 1
            )
        engine.dispose()
        assert not (airflow.home / "airflow.db").exists()

        run = request_skip(airflow, seeded, ids)
        detail = airflow.wait_awaiting_input(DAG, run, GATE)  # then waits 3 s more
        assert "bob" in {u["id"] for u in detail["assigned_users"]}
        assert seeded.unacknowledged() == before
        approved = airflow.answer(DAG, run, GATE, "Approve", user="bob")
        assert approved.status_code == 200, approved.text
        assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
        assert airflow.dag_run(DAG, run)["triggering_user_name"] == "alice"
        [request] = seeded.audit("skip-request")
        assert request["outcome"] == "applied"
        assert request["answer"]["by"] == "bob"  # type: ignore[index]
    finally:
        airflow.stop()

    # Now and two hours later (the delayed messages come due): each message once, the
    # skipped ones never.
    delivered = [
        label(m.message_id)
        for m in [*drain(config, seeded.topic, 0), *drain(config, seeded.topic, 7_200_000)]
    ]
    skipped = {label(m) for m in ids}
    assert len(delivered) == len(set(delivered))
    assert not skipped & set(delivered)
    assert set(delivered) == before - skipped

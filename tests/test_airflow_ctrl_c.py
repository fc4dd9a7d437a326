"""Ctrl-C on ``scripts/airflow-up.sh`` while a Spark task runs: nothing is left behind.

A real launcher (standalone with the LocalExecutor, and its Spark Connect
server) runs ``cursorops_backlog_audit`` on a busy server: another client's job
holds every executor slot, so the audit's job waits on the server for as long as
the test needs, however fast the machine (a warm server audits the topic in about
2 s, less than the stop takes to reach the task). Once ``analyze_backlog`` runs
its job on the server (its task runner is alive and its log says so), SIGINT goes
to the launcher's whole process group, as a terminal's Ctrl-C does. Every process
the launcher started, in whatever process group it put itself (Airflow puts each
task runner in its own), must be gone before the bounded stop's deadline, the Spark Connect port
closed, and the task's end recorded by Airflow itself, not left "running". Whether
Airflow records it up for retry or failed is Airflow's: when its supervisor is stopped
first, or the task's own report races the shutdown, the task runner fails closed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from cursorops.airflow.local_airflow import CONNECT_TOKEN
from cursorops.core.domain.config import Config
from tests import leftovers
from tests.airflow_harness import start_airflow

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG = "cursorops_backlog_audit"
TASK = "analyze_backlog"
MESSAGES = 2_000
"""The topic's size does not make the audit wait (the busy server does): a few thousand
messages, seeded in a second, give its job partitions to read."""
BUSY_S = 600
"""How long the other client's job holds the server's slots: longer than the test runs."""
STOP_DEADLINE_S = 60 + 20 + 60
"""The launcher's bound (standalone 60 s after its SIGINT, the Spark Connect server 20 s
after its SIGTERM, then their process groups are killed) and a generous margin: a bound for
correctness, not a speed target."""


def _worker_alive(session: int, ti_id: str) -> bool:
    """The task runner of ``ti_id`` is running (Airflow titles it ``airflow worker -- ID``)."""
    return any(ti_id in left.command for left in leftovers.in_session(session))


def _seed(config: Config, namespace: str) -> None:
    """One 4-partition topic of :data:`MESSAGES` messages and a Shared subscription."""
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.producer import OutgoingMessage

    topic = f"persistent://{namespace}/large"
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", namespace.split("/")[0])
        broker.admin.create_namespace("admin", namespace)
        broker.admin.create_topic("admin", topic, 4)
        broker.admin.create_subscription(
            "admin", topic, "audited", SubscriptionType.SHARED, initial_position="earliest"
        )
        messages = [OutgoingMessage(payload=b"x" * 100, key=f"k{i % 97}") for i in range(MESSAGES)]
        broker.producing.produce("admin", topic, messages, batch_size=10)


def _occupy_every_slot(port: int, token: str, started: Path) -> threading.Thread:
    """Another client's job on the server at ``port``, one sleeping task per core (the
    server runs ``local[*]``), each touching a file under ``started`` once it runs; in a
    thread, which ends when the server stops."""
    from pyspark.sql.connect.session import SparkSession

    from cursorops.spark.connect_channel import TokenChannelBuilder

    slots = os.cpu_count() or 1
    channel = TokenChannelBuilder(f"sc://127.0.0.1:{port}/;token={token}")
    spark = SparkSession.builder.channelBuilder(channel).create()
    # No retries: once the launcher stops the server, this job fails at once, and neither
    # the thread nor the client's clean-up at exit waits minutes for a server that is gone.
    spark.client.set_retry_policies([])
    marker = str(started)

    def hold(batches):  # type: ignore[no-untyped-def]
        import os as worker_os
        import time as worker_time

        for batch in batches:
            Path(marker, f"slot-{worker_os.getpid()}").touch()
            worker_time.sleep(BUSY_S)
            yield batch

    def run() -> None:
        try:
            spark.range(slots, numPartitions=slots).mapInArrow(hold, "id long").collect()
        except Exception:  # the server stopped under it: what the test wants
            pass
        finally:
            # Closed here, the client makes no clean-up call to the stopped server at exit.
            spark.client.close()

    busy = threading.Thread(target=run, name="busy-server", daemon=True)
    busy.start()
    deadline = time.monotonic() + 120
    while len(list(started.glob("slot-*"))) < slots:
        assert busy.is_alive() and time.monotonic() < deadline, "the busy job never ran"
        time.sleep(0.2)
    return busy


def _task_state(home: Path, environ: Mapping[str, str], run_id: str) -> str | None:
    """The task's state in Airflow's metadata database, read once Airflow is down: the
    database the launcher was given, or standalone's default file in its home."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    url = environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN") or f"sqlite:///{home / 'airflow.db'}"
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            row = connection.execute(
                text(
                    "SELECT state FROM task_instance WHERE dag_id = :dag AND run_id = :run "
                    "AND task_id = :task"
                ),
                {"dag": DAG, "run": run_id, "task": TASK},
            ).first()
    finally:
        engine.dispose()
    return None if row is None else str(row[0])


def test_ctrl_c_during_a_spark_task_stops_everything(tmp_path: Path) -> None:
    config = Config.from_home(tmp_path / "cursorops")
    namespace = "acme/ctrl-c"
    _seed(config, namespace)

    airflow = start_airflow(
        tmp_path,
        {
            "CURSOROPS_HOME": str(config.home),
            "CURSOROPS_METADATA_URL": "",
            "CURSOROPS_AUDIT_SCHEDULE": "none",
        },
        wait_for_dag=DAG,
        only_dag=True,
    )
    launcher = airflow.process
    session = launcher.pid  # started with start_new_session: its pid is the session's id
    connect_port = int(airflow.launcher_env["SPARK_CONNECT_PORT"])
    busy: threading.Thread | None = None
    try:
        ready = airflow.home / "spark-connect.ready"  # the launcher's warm-up is over
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert time.monotonic() < deadline, f"Spark Connect never got ready: {airflow.log}"
            time.sleep(0.2)
        started = tmp_path / "busy"
        started.mkdir()
        token = (config.home / CONNECT_TOKEN).read_text().strip()
        busy = _occupy_every_slot(connect_port, token, started)
        run = airflow.trigger(DAG, {"namespaces": [namespace]}, user="admin")
        deadline = time.monotonic() + 600
        while True:
            ti = airflow.task_instance(DAG, run, TASK)
            if (
                ti["state"] == "running"
                and "on Spark Connect" in airflow.task_log(DAG, run, TASK)
                and _worker_alive(session, ti["id"])
            ):
                break
            assert ti["state"] in (None, "scheduled", "queued", "running"), ti["state"]
            assert time.monotonic() < deadline, f"{TASK} never ran: {airflow.log}"
            time.sleep(0.2)
        assert any("java" in left.command for left in leftovers.in_session(session))

        interrupted = time.monotonic()
        os.killpg(launcher.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        try:
            launcher.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the launcher still ran {STOP_DEADLINE_S} s after Ctrl-C: {airflow.log}")
        left = leftovers.in_session(session)
        while left and time.monotonic() - interrupted < STOP_DEADLINE_S:
            time.sleep(0.5)
            left = leftovers.in_session(session)
        assert not left, "still running after Ctrl-C:\n" + "\n".join(map(str, left))
        with socket.socket() as probe, pytest.raises(OSError):
            probe.connect(("127.0.0.1", connect_port))
        # Interrupted, and its end recorded while the api-server still ran (not left
        # "running"; up for retry, or failed when Airflow's shutdown wins the race).
        assert _task_state(airflow.home, airflow.launcher_env, run) in ("up_for_retry", "failed")
    finally:
        leftovers.stop(leftovers.in_session(session))
        if busy is not None:
            busy.join(timeout=60)

"""cursorops_backlog_audit on a real Airflow (standalone, LocalExecutor, SQLite, and the
Spark Connect server the launcher starts with it).

A fresh namespace with one seeded topic is audited: the history row equals the
Broker's exact analysis, a threshold breach fails check_thresholds naming it,
the chart is a non-empty PNG under the cursorops home, and the poison-pill radar
lists the redelivered messages with their skip request.
"""

from __future__ import annotations

import json
import secrets

import pytest

from tests.airflow_harness import Airflow
from tests.dags.conftest import SUBSCRIPTION, seed_topic

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG = "cursorops_backlog_audit"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_audit_records_exact_history_and_fails_on_a_breach(airflow: Airflow, cursorops_home):
    from cursorops.airflow.runs import safe_name
    from cursorops.core.services.broker import Broker

    airflow.wait_dag(DAG)
    namespace = f"acme/audit-{secrets.token_hex(3)}"
    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", namespace)
    seeded = seed_topic(cursorops_home, namespace=namespace)
    with Broker(cursorops_home) as broker:
        # A consumer receives one message and negatively acknowledges it: redelivered once.
        consumer = broker.reading.dispatcher("admin", seeded.topic, SUBSCRIPTION).subscribe("c")
        [held] = consumer.receive_many(1, prefetch=False)
        consumer.negative_acknowledge(held)
        consumer.close()
        exact = broker.analysis.analyze_backlog("admin", seeded.topic)
    messages = sum(a.result.messages for a in exact)
    entries = sum(a.result.entries for a in exact)
    assert messages == 56

    thresholds = {
        "namespaces": {namespace: {"maxMessages": 50, "maxAgeSeconds": 86_400}},
        # The message the consumer negatively acknowledged: redelivered once.
        "radar": {"minRedeliveries": 1, "minAgeSeconds": None},
    }
    run = airflow.trigger(DAG, {"namespaces": [namespace], "thresholds": thresholds}, user="admin")
    assert airflow.wait_run(DAG, run, timeout=1200) == "failed"
    states = airflow.task_states(DAG, run)
    assert states["analyze_backlog"] == ["success"]
    # One job for all the topics, on the Spark Connect server the launcher started.
    job_log = airflow.task_log(DAG, run, "analyze_backlog")
    assert "on Spark Connect sc://127.0.0.1:" in job_log
    assert "of 1 topic(s) in one job" in job_log
    assert states["record_history"] == ["success"]
    assert states["check_thresholds"] == ["failed"]
    assert airflow.task_instance(DAG, run, "check_thresholds")["try_number"] == 1

    with Broker(cursorops_home) as broker:
        [row] = broker.analysis.backlog_history("admin", seeded.topic)
    assert (row.subscription, row.run_id) == (SUBSCRIPTION, run)
    assert (row.messages, row.entries) == (messages, entries)
    assert row.oldest_publish_ms is not None

    log = airflow.task_log(DAG, run, "check_thresholds")
    assert f"{seeded.topic} / {SUBSCRIPTION}: 56 messages > 50" in log
    assert "1 backlog threshold breach(es)" in log  # the age limit holds
    assert "s oldest unacknowledged" not in log
    chart = cursorops_home.home / "airflow-runs" / DAG / safe_name(run) / "backlog.png"
    assert f"Backlog chart: {chart}" in log
    data = chart.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5_000

    # The radar runs beside the threshold check, which failing does not stop it.
    assert states["scan_radar"] == ["success"]
    radar = json.loads((chart.parent / "radar.json").read_text())
    [finding] = radar["findings"]
    assert finding["subscription"] == SUBSCRIPTION and finding["stuck"] == 1
    [listed] = finding["listed"]
    assert (listed["messageId"], listed["redeliveryCount"]) == (held.message_id.triplet(), 1)
    radar_log = airflow.task_log(DAG, run, "scan_radar")
    assert f"{seeded.topic} / {SUBSCRIPTION}: {finding['stuck']} stuck" in radar_log
    assert "skip them: cursorops topics skip-messages persistent://" in radar_log

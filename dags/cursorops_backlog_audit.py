"""Measure every subscription's exact backlog on a schedule, keep the history, raise alerts.

Hourly by default, no catchup (``CURSOROPS_AUDIT_SCHEDULE`` in the scheduler's
environment sets another cron or preset, or ``none``). list_topics → analyze_backlog (one
Spark job for all the topics: one scan over their segments with the cursors of every
subscription) → record_history (one row per subscription per run in the
metadata store; ``cursorops audit history TOPIC`` reads them) →
check_thresholds (max messages, max age of the oldest unacknowledged message,
growth per hour; per namespace or subscription). The check draws a PNG chart of
the breached and largest subscriptions under the cursorops home and logs its
path; breaches call the notifier and fail the task, naming them. Beside it,
scan_radar (the poison-pill radar, limits from the thresholds' ``radar`` object)
lists each subscription's messages stuck at the head, redelivered again and again
or left behind acknowledged ones, with a prefilled skip-messages request
for them; it reports, and fails only when it cannot look.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param, dag, get_current_context, task

from cursorops.airflow.backlog_audit import audit_role
from cursorops.airflow.operators.spark import spark_job

# The schedule is a deployment setting (a cron expression, a preset, or "none" for
# triggered runs only); read from the environment, never from a Variable at parse time.
SCHEDULE = os.environ.get("CURSOROPS_AUDIT_SCHEDULE", "@hourly").strip() or "@hourly"


@dag(
    schedule=None if SCHEDULE.lower() == "none" else SCHEDULE,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["cursorops", "backlog", "audit", "spark"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    doc_md=__doc__,
    params={
        "namespaces": Param(
            [],
            type="array",
            items={"type": "string"},
            description="tenant/namespace to audit; empty: every namespace",
        ),
        "thresholds": Param(
            {},
            type="object",
            description='Limits, e.g. {"defaults": {"maxMessages": 100000, "maxAgeSeconds": '
            '3600, "maxGrowthPerHour": 5000}, "namespaces": {"acme/orders": {...}}, '
            '"subscriptions": {"persistent://acme/orders/t": {"sub": {...}}}}; '
            "empty: <cursorops home>/backlog-thresholds.json if present",
        ),
        "chart_largest": Param(
            5, type="integer", minimum=0, description="Largest subscriptions charted"
        ),
        "webhook_connection": Param(
            "cursorops_backlog_webhook",
            type="string",
            description="Airflow connection the breaches are posted to, if it exists",
        ),
    },
)
def cursorops_backlog_audit() -> None:
    @task(retries=0)
    def list_topics() -> dict[str, Any]:
        """The topics of the chosen namespaces, in the run's scratch folder for the Spark job
        (which takes nothing from an XCom)."""
        import json

        from cursorops.airflow.backlog_audit import audit_role, audit_topics
        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.spark.run_scratch import TOPICS, checked_scratch, scratch_file

        context = get_current_context()
        dag_run = context["dag_run"]
        hook = CursorOpsHook()
        with hook.broker() as broker:
            topics = audit_topics(broker, audit_role(), context["params"]["namespaces"])
            checked_scratch(hook.config, dag_run.dag_id, dag_run.run_id, create=True)
            listed = scratch_file(hook.config, dag_run.dag_id, dag_run.run_id, TOPICS)
        listed.write_text(json.dumps(topics), encoding="utf-8")
        return {"topics": len(topics)}

    @task
    def record_history() -> dict[str, Any]:
        """One history row per subscription: the Spark job's exact counts, the oldest age."""
        from cursorops.airflow.backlog_audit import audit_role, run_audit, samples_from
        from cursorops.airflow.hooks import CursorOpsHook

        context = get_current_context()
        run_id = context["dag_run"].run_id
        role = audit_role()
        hook = CursorOpsHook()
        with hook.broker() as broker:
            documents = run_audit(hook.config, context["dag_run"])
            at_ms = broker.clock()
            samples = [s for d in documents for s in samples_from(d, None, at_ms, run_id)]
            broker.analysis.record_backlog_audit(role, run_id, samples)
        return {"topics": [d["topic"] for d in documents], "rows": len(samples)}

    @task(retries=0)
    def check_thresholds() -> dict[str, Any]:
        """Check the limits; chart the breached and largest; breaches notify and fail."""
        from airflow.sdk.exceptions import AirflowFailException

        from cursorops.airflow.backlog_audit import (
            audit_role,
            chart_selection,
            load_thresholds,
            run_audit,
        )
        from cursorops.airflow.chart import draw_history
        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.airflow.notify import BacklogBreachNotifier
        from cursorops.airflow.runs import run_folder
        from cursorops.core.domain.analysis.backlog_audit import check, latest_before

        context = get_current_context()
        run_id, params = context["dag_run"].run_id, context["params"]
        hook = CursorOpsHook()
        cfg = hook.config
        topics = [d["topic"] for d in run_audit(cfg, context["dag_run"])]
        with hook.broker() as broker:
            thresholds = load_thresholds(params["thresholds"], cfg.home)
            history = [s for t in topics for s in broker.analysis.backlog_history(audit_role(), t)]
        now = [s for s in history if s.run_id == run_id]
        breaches = check(now, latest_before(history, run_id), thresholds)
        chosen = chart_selection(now, breaches, params["chart_largest"])
        series = {
            key: [(s.at_ms, s.messages) for s in history if (s.topic, s.subscription) == key]
            for key in chosen
        }
        chart = draw_history(
            series,
            {(b.topic, b.subscription) for b in breaches},
            run_folder(cfg, context["dag_run"]) / "backlog.png",
            f"Backlog history, run {run_id}: " + _breaches(len(breaches)),
        )
        print(f"Backlog chart: {chart}")
        if breaches:
            named = "\n".join(b.describe() for b in breaches)
            BacklogBreachNotifier(named, params["webhook_connection"]).notify(context)
            raise AirflowFailException(f"{len(breaches)} backlog threshold breach(es):\n{named}")
        return {"subscriptions": len(now), "breaches": 0, "chart": str(chart)}

    @task
    def scan_radar() -> dict[str, Any]:
        """The poison-pill radar: messages stuck at each subscription's head, each with a
        prefilled skip-messages request (logged, and in the run's radar.json)."""
        import json

        from cursorops.airflow.backlog_audit import (
            audit_role,
            load_thresholds,
            radar_lines,
            radar_report,
            radar_summary,
            run_audit,
        )
        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.airflow.runs import run_folder

        context = get_current_context()
        hook = CursorOpsHook()
        cfg = hook.config
        topics = [d["topic"] for d in run_audit(cfg, context["dag_run"])]
        with hook.broker() as broker:
            limits = load_thresholds(context["params"]["thresholds"], cfg.home).radar
            report = radar_report(broker, audit_role(), topics, limits)
        path = run_folder(cfg, context["dag_run"]) / "radar.json"
        path.write_text(json.dumps(report, indent=1), encoding="utf-8")
        print("\n".join(radar_lines(report)))
        return radar_summary(report, path)

    # The Spark job gets the run's identity, rendered by Airflow from the run itself: it
    # reads the listed topics from the run's scratch folder and writes its answer there.
    analyzed = spark_job(
        "analyze_backlog",
        "audit_backlog",
        [
            "--dag-id={{ dag_run.dag_id }}",
            "--run-id={{ dag_run.run_id }}",
            # A deployment setting, read from the environment as the schedule is.
            f"--role={audit_role()}",
        ],
    )
    recorded = record_history()
    list_topics() >> analyzed >> recorded
    recorded >> [check_thresholds(), scan_radar()]


def _breaches(count: int) -> str:
    if count == 0:
        return "no threshold breached"
    return f"{count} breach" + ("es" if count > 1 else "")


cursorops_backlog_audit()

"""``cursorops demo --protocol``: a real pulsar-client app's poison pill, skipped only after
a second person's approval in a real Airflow.

The story runs on the session's Airflow and its cursorops home (``tests/airflow_fixtures.py``),
as the demo does on the one it starts itself: no Airflow start of its own. Beyond the demo's
own checks, the test reads the evidence itself: the run and its gate's answer from Airflow,
the applied skip from the store, and the app's deliveries of the pill from its output.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cursorops.cli import protocol_demo
from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from tests import leftovers
from tests.airflow_harness import Airflow

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.mark.airflow
def test_the_pill_is_skipped_after_bobs_approval_and_never_delivered_again(
    airflow: Airflow, cursorops_home: Config
) -> None:
    said = io.StringIO()
    summary = protocol_demo.run(cursorops_home, "admin", say=said, airflow=airflow)
    text = said.getvalue()
    checks = summary["checks"]
    assert isinstance(checks, dict)
    assert summary["ok"] and checks and all(checks.values()), text
    json.dumps(summary)  # what -o json prints
    for shown in (
        "exact backlog: 1 message: the pill",
        "cursorops --admin-url",
        "the preview, what the approver reads at the gate",
        "alice approves her own request: HTTP 403",
        "bob approves: HTTP 200",
        "run: success",
        "never after the skip",
        "exact backlog 0",
    ):
        assert shown in text, text

    topic, run_id, pill = str(summary["topic"]), str(summary["runId"]), str(summary["pill"])
    # Airflow's own record: alice started the run (through the REST skip route), bob's
    # answer is the gate's.
    run = airflow.dag_run(protocol_demo.SKIP_DAG, run_id)
    assert run["triggering_user_name"] == "alice" and run["state"] == "success"
    gate = airflow.hitl_detail(protocol_demo.SKIP_DAG, run_id, protocol_demo.GATE)
    assert gate["responded_by_user"]["id"] == "bob"
    assert gate["chosen_options"] == ["Approve"]

    # The store: one skip, applied by the workflow after bob's approval, of the pill alone.
    approved_at, refused_at = summary["approvedAtMs"], summary["refusedAtMs"]
    assert isinstance(approved_at, int) and isinstance(refused_at, int)
    with Broker(cursorops_home) as broker:
        (skip,) = broker.workflow.audit_log("admin", topic, kind="skip")
        left = broker.reading.peek_messages("admin", topic, protocol_demo.SUBSCRIPTION, 10)
    assert skip.detail["via"] == "airflow"
    assert skip.at_ms >= approved_at > refused_at
    assert skip.at_ms == summary["appliedAtMs"]
    assert skip.detail["skipped"] == [pill]
    assert left == []

    # The app's own output: the pill still came after alice's refused approval (nothing
    # applied then), and never once the skip was applied (one delivery may be in flight).
    delivered = summary["pillDeliveredAtMs"]
    assert isinstance(delivered, list)
    assert any(refused_at < t < approved_at for t in delivered), delivered
    assert not [t for t in delivered if t > skip.at_ms + protocol_demo.IN_FLIGHT_S * 1000]


def test_a_failed_step_stops_the_app_and_the_standalone(tmp_path: Path) -> None:
    """Airflow cannot start (no Airflow where the launcher looks): the demo ends with one
    clear error line, after stopping the app and the standalone it had started."""
    token = f"protocol-demo-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    env.update(
        {leftovers.RUN_MARKER: token, "VENV": str(tmp_path / "no-venv"), "CURSOROPS_DAEMON": "off"}
    )
    # Files, not pipes: a process left behind would hold a pipe open, and the test would
    # wait for it instead of finding it.
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with stdout.open("w") as out_file, stderr.open("w") as err_file:
        demo = subprocess.Popen(
            [sys.executable, "-m", "cursorops.cli.main", "--home", str(tmp_path / "home"), "demo"]
            + ["--protocol"],
            stdout=out_file,
            stderr=err_file,
            env=env,
        )
    try:
        demo.wait(timeout=300)
    finally:
        demo.kill()
        # Only what carries this test's marker (or descends from the demo) is looked at.
        left = leftovers.wait_for_servers(token, demo.pid, grace_s=15)
        leftovers.stop(left)
    out, err = stdout.read_text(), stderr.read_text()
    assert demo.returncode == 1, out + err
    # It got as far as the app's pill: the standalone and the app were running.
    assert "exact backlog: 1 message: the pill" in out, out
    assert "the Airflow launcher exited 1: no " in err, err
    assert "run make install first" in err, err
    assert left == [], left

"""Every DAG file imports cleanly and cheaply: the guard test of dags/.

Parsing runs in a fresh interpreter, so what the DAG files import at parse time
is all that is in ``sys.modules`` afterwards (the test process has imported far more).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"

PARSE = r"""
import json, os, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({
    "errors": {k: str(v) for k, v in bag.import_errors.items()},
    "dags": {
        d.dag_id: {
            "tags": sorted(d.tags),
            "fileloc": d.fileloc,
            "retries": {t.task_id: t.retries for t in d.tasks},
            "schedule": str(d.schedule),
        }
        for d in bag.dags.values()
    },
    "modules": sorted(m for m in sys.modules if m.split(".")[0] == "pyspark"
                      or m.startswith(("cursorops.core", "cursorops.cli", "cursorops.airflow"))),
    "cursorops_home_created": os.path.exists(os.environ["CURSOROPS_HOME"]),
}))
"""


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    home = tmp_path_factory.mktemp("airflow-home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "PYTHONPATH": str(REPO),
        # A home that does not exist: touching it at parse time would show.
        "CURSOROPS_HOME": str(home / "no-cursorops-here"),
    }
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PARSE, str(DAGS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_no_import_errors(parsed):
    assert parsed["errors"] == {}
    assert "cursorops_skip_messages" in parsed["dags"]


def test_one_dag_per_file_named_for_it(parsed):
    for dag_id, dag in parsed["dags"].items():
        assert Path(dag["fileloc"]).stem == dag_id


def test_tags_and_retries(parsed):
    for dag_id, dag in parsed["dags"].items():
        assert "cursorops" in dag["tags"], dag_id
        retried = [t for t, n in dag["retries"].items() if n > 0]
        assert retried, f"{dag_id}: no task retries"


def test_validation_never_retries_and_a_gate_retries_only_to_resume_its_answer(parsed):
    from cursorops.airflow.operators.gate import RESUME_RETRIES

    retries = parsed["dags"]["cursorops_skip_messages"]["retries"]
    assert retries["approve_skip"] == RESUME_RETRIES
    assert retries["apply_skip"] == 2
    matching = parsed["dags"]["cursorops_skip_matching"]["retries"]
    assert matching["validate_request"] == 0 and matching["approve_skip"] == RESUME_RETRIES


def test_a_request_workflow_is_its_gates_apply_and_record(parsed):
    """The DAGs whose runs the doors start: no planning or validating task (the door did
    both), no verify (apply's transaction checks it), and the plan's digest as the param."""
    for dag_id in (
        "cursorops_skip_messages",
        "cursorops_skip_head",
        "cursorops_reset_cursor",
        "cursorops_undo_skip",
        "cursorops_unsubscribe",
        "cursorops_redrive",
    ):
        tasks = set(parsed["dags"][dag_id]["retries"])
        gates = {t for t in tasks if t.startswith("approve_")}
        applies = {t for t in tasks if t.startswith("apply_")}
        assert len(gates) == 3 and len(applies) == 1, dag_id
        assert tasks == gates | applies | {"close_request"}, dag_id


def test_nothing_heavy_at_parse_time(parsed):
    modules = parsed["modules"]
    assert not [m for m in modules if m.startswith("pyspark")]
    assert "cursorops.core.services.broker" not in modules
    # The gated operations' slices name the store's value types (a ticket, an audit entry,
    # the replay of a cursor's state), but nothing that opens a store is loaded.
    values = {"", ".arrow_columns", ".cursor_state", ".cursor_ticket", ".values"}
    store = "cursorops.core.store"
    assert not [m for m in modules if m.startswith(store) and m[len(store) :] not in values]
    # No store opened: a metadata store would have created the (missing) home.
    assert parsed["cursorops_home_created"] is False

"""The jobs unchanged on a Spark standalone cluster started from the pyspark package.

A master and one worker run on 127.0.0.1 (port 7077, or a free one when 7077 is
taken); the jobs go through ``spark-submit`` with ``core`` and ``spark_apps``
shipped as ``--py-files``, and must give the answers ``core`` gives.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cursorops.core.domain.analysis.backlog import analysis_document
from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.local import spark as local_spark
from cursorops.local.spark import StandaloneCluster
from cursorops.spark.match_list import read_match_list
from tests.spark_apps.topics import TOPIC, core_analyses, core_matches, make_topic

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STARTUP_S = 90


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _environment() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A running master with one alive worker."""
    logs = tmp_path_factory.mktemp("spark-cluster")
    port = 7077 if _port_free(7077) else None
    with local_spark.standalone_cluster(logs, port=port, timeout_s=STARTUP_S) as running:
        yield running


@pytest.fixture(scope="module")
def py_files(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``cursorops.core`` and ``cursorops.spark`` zipped, as a deployment ships them to
    executors."""
    target = tmp_path_factory.mktemp("py-files") / "cursorops.zip"
    with zipfile.ZipFile(target, "w") as archive:
        archive.write(REPO / "cursorops" / "__init__.py", "cursorops/__init__.py")
        for package, folder in (("core", "core"), ("spark", "spark_apps")):
            for path in sorted((REPO / folder).rglob("*.py")):
                inside = path.relative_to(REPO / folder).as_posix()
                archive.write(path, f"cursorops/{package}/{inside}")
    return str(target)


def _submit(master: str, py_files: str, job: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(BIN / "spark-submit"),
        "--master", master,
        "--py-files", py_files,
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", "spark.executor.memory=1g",
        "--conf", "spark.ui.enabled=false",
        str(REPO / "spark_apps" / f"{job}.py"),
        *args,
    ]  # fmt: skip
    # Outside the checkout, so the executors import core from the shipped zip or the install.
    return subprocess.run(
        command, capture_output=True, text=True, env=_environment(), cwd="/", timeout=600
    )


def test_jobs_on_a_standalone_cluster_give_core_answers(
    cluster: StandaloneCluster, py_files: str, tmp_path: Path
) -> None:
    master = cluster.master_url
    topic = make_topic(tmp_path / "home", 91, partitions=3, messages=240)
    home = ["--home", str(topic.config.home)]

    analysis = tmp_path / "analysis.json"
    done = _submit(master, py_files, "analyze_backlog", *home, TOPIC, "--output", str(analysis))
    assert done.returncode == 0, done.stderr[-3000:]
    expected = analysis_document(TOPIC, None, core_analyses(topic.config, TOPIC))
    assert json.loads(analysis.read_text()) == expected
    # spark-submit's PythonRunner merges the driver's stderr (the job's log) into stdout.
    assert "cursorops.analyze_backlog INFO" in done.stdout

    plan, summary_path = tmp_path / "plan", tmp_path / "summary.json"
    predicate = {"properties": {"color": "green"}}
    done = _submit(master, py_files, "find_messages", *home, TOPIC, "-s", "plain",
                   "--predicate", json.dumps(predicate), "--output", str(plan),
                   "--summary", str(summary_path))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    wanted = core_matches(topic.config, TOPIC, "plain", parse_predicate(predicate))
    assert sorted(read_match_list(str(plan)).column("message_id").to_pylist()) == wanted
    assert summary["matches"] == len(wanted) > 0

    outcome_path = tmp_path / "outcome.json"
    done = _submit(master, py_files, "apply_skip_plan", *home, TOPIC, "-s", "plain",
                   "--match-list", str(plan), "--output", str(outcome_path))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(outcome_path.read_text())
    assert sorted(outcome["skipped"] + outcome["alreadyAcknowledged"]) == wanted
    assert core_matches(topic.config, TOPIC, "plain", parse_predicate(predicate)) == []

    done = _submit(master, py_files, "analyze_backlog", *home, TOPIC, "-s", "nobody")
    assert done.returncode == 3 and "error: " in done.stdout

    state = cluster.state()
    assert state is not None
    names = [app["name"] for app in state["completedapps"]]
    assert {"cursorops-analyze-backlog", "cursorops-find-messages",
            "cursorops-apply-skip-plan"} <= set(names)  # fmt: skip


def test_spark_class_and_submit_come_from_the_pyspark_package() -> None:
    assert shutil.which("spark-class", path=str(BIN)) is not None
    assert shutil.which("spark-submit", path=str(BIN)) is not None

"""A real Airflow 3.3.2 for tests: ``scripts/airflow-up.sh`` in the background.

The same start-up a person gets (standalone: api-server, scheduler,
dag-processor and triggerer with the LocalExecutor on SQLite), on free ports,
with a throwaway AIRFLOW_HOME and cursorops home. Helpers act over the public
REST API as a given user, as a person in the UI would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
USERS = {"admin": "admin", "alice": "op", "bob": "op", "carol": "viewer", "dave": "op"}
"""Airflow user → SimpleAuthManager role; the password of each is ``<user>-pw``."""
START_TIMEOUT_S = 300.0
HITL_SETTLE_S = 3.0
"""Airflow 3.3.2 with the LocalExecutor can fail a run whose approval lands within about
1 s of the task parking in ``awaiting_input``: answer only after this long."""
FINISHED = {"success", "failed"}


def free_port(span: int = 1) -> int:
    """A port ``p`` such that ``p .. p+span-1`` are free on 127.0.0.1 right now."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + span > 65535:
            continue
        try:
            for offset in range(1, span):
                with socket.socket() as more:
                    more.bind(("0.0.0.0", port + offset))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port range found")


@dataclass
class Airflow:
    base_url: str
    home: Path
    log: Path
    process: subprocess.Popen[bytes]
    _tokens: dict[str, str] = field(default_factory=dict)

    # -- users -----------------------------------------------------------------

    def token(self, user: str) -> str:
        if user not in self._tokens:
            response = httpx.post(
                f"{self.base_url}/auth/token",
                json={"username": user, "password": f"{user}-pw"},
                timeout=60,
            )
            response.raise_for_status()
            self._tokens[user] = response.json()["access_token"]
        return self._tokens[user]

    def request(self, user: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token(user)}", **kwargs.pop("headers", {})}
        return httpx.request(
            method, f"{self.base_url}{path}", headers=headers, timeout=60, **kwargs
        )

    def get(self, user: str, path: str) -> Any:
        response = self.request(user, "GET", path)
        response.raise_for_status()
        return response.json()

    # -- runs ------------------------------------------------------------------

    def trigger(self, dag_id: str, conf: Mapping[str, Any], user: str) -> str:
        response = self.request(
            user,
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            json={"logical_date": None, "conf": conf},
        )
        assert response.status_code == 200, response.text
        return str(response.json()["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.get("admin", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"])

    def task_states(self, dag_id: str, run_id: str) -> dict[str, list[str]]:
        """Task id → states of its instances (one per map index)."""
        found = self.get("admin", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        states: dict[str, list[str]] = {}
        for ti in found["task_instances"]:
            states.setdefault(ti["task_id"], []).append(str(ti["state"]))
        return states

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(
            self.get("admin", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        )

    def task_log(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
        """The text of the task's first try's log."""
        response = self.request(
            "admin",
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/1",
            params={"map_index": map_index},
            headers={"Accept": "application/json"},
        )
        response.raise_for_status()
        return response.text

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run_state(dag_id, run_id)
            if state in FINISHED:
                return state
            time.sleep(2)
        raise TimeoutError(f"run {run_id} not finished after {timeout} s: {self.log}")

    def wait_awaiting_input(
        self, dag_id: str, run_id: str, task_id: str, timeout: float = 300
    ) -> dict[str, Any]:
        """Wait until the gate parks in ``awaiting_input``, then :data:`HITL_SETTLE_S` more."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ti = self.task_instance(dag_id, run_id, task_id)
            if ti["state"] == "awaiting_input":
                time.sleep(HITL_SETTLE_S)
                return dict(self.get("admin", path))
            if ti["state"] in ("failed", "upstream_failed", "skipped", "success"):
                raise AssertionError(f"{task_id} ended {ti['state']} before waiting for input")
            if self.run_state(dag_id, run_id) in FINISHED:
                raise AssertionError(f"run {run_id} finished before {task_id} waited for input")
            time.sleep(1)
        raise TimeoutError(f"{task_id} of {run_id} never awaited input: {self.log}")

    def answer(
        self, dag_id: str, run_id: str, task_id: str, option: str, user: str
    ) -> httpx.Response:
        """Answer the approval over REST as ``user`` (Approve or Reject)."""
        return self.request(
            user,
            "PATCH",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails",
            json={"chosen_options": [option], "params_input": {}},
        )

    # -- life ------------------------------------------------------------------

    def stop(self, timeout: float = 120) -> None:
        """SIGINT, standalone's clean stop (SIGTERM would orphan its children)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                raise
        # Standalone's children share its process group: none may outlive it.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(1)
        os.killpg(self.process.pid, signal.SIGKILL)
        raise RuntimeError(f"Airflow processes outlived standalone's SIGINT: {self.log}")


def start_airflow(root: Path, environ: Mapping[str, str]) -> Airflow:
    """Start ``scripts/airflow-up.sh`` under ``root`` with ``environ`` added; wait for health
    and for the DAGs to be parsed. ``environ`` carries the cursorops settings the tasks read."""
    home = root / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    (home / "simple_auth_manager_passwords.json.generated").write_text(
        json.dumps({user: f"{user}-pw" for user in USERS})
    )
    port = free_port()
    log_port = free_port(span=2)
    env = {
        **os.environ,
        **environ,
        "AIRFLOW_PORT": str(port),
        "AIRFLOW_LOG_PORT": str(log_port),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
        # Tests wait on the dag-processor: look for new files often.
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    }
    log = root / "airflow.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", str(REPO / "scripts" / "airflow-up.sh"), str(home)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    airflow = Airflow(f"http://127.0.0.1:{port}", home, log, process)
    try:
        _wait_ready(airflow)
    except BaseException:
        airflow.stop()
        raise
    return airflow


def _wait_ready(airflow: Airflow) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if airflow.process.poll() is not None:
            raise RuntimeError(f"airflow-up.sh exited {airflow.process.returncode}: {airflow.log}")
        try:
            health = httpx.get(f"{airflow.base_url}/api/v2/monitor/health", timeout=10)
            if health.status_code == 200:
                dags = airflow.get("admin", "/api/v2/dags")
                if any(d["dag_id"] == "cursorops_skip_messages" for d in dags["dags"]):
                    return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise TimeoutError(f"Airflow not ready after {START_TIMEOUT_S} s: {airflow.log}")

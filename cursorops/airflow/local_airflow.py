"""A local Airflow 3.3.2 started from Python, driven over its public REST API.

Used by ``cursorops demo --protocol``, the Airflow tests and the benchmarks, so
all three start Airflow the way a person does:

- :func:`start_airflow` runs ``scripts/airflow-up.sh`` (``airflow standalone``:
  api-server, scheduler, dag-processor and triggerer with the LocalExecutor on
  SQLite, the embedded default; on PostgreSQL with ``CURSOROPS_AIRFLOW_DB=postgres``
  in its environment, as ``make up`` runs it), with a Spark Connect server on a free port
  named by ``spark_connect_default``, so no Spark task starts a JVM. It reads its
  settings from ``scripts/airflow-env.sh`` and stops every process it started,
  the Spark Connect server included, on SIGINT (:meth:`Airflow.stop`). The scripts
  and the DAGs are the checkout's or the installed wheel's (:mod:`~.bundle`), and
  Airflow runs from this interpreter's environment (VENV).

:func:`start_api_server` runs Airflow's api-server alone, on SQLite, for what needs only
the REST app (the REST load benchmark).

``tests/test_topology.py`` drives the same :class:`Airflow` over
``scripts/topology-up.sh`` (Airflow as separate processes on PostgreSQL). The
SimpleAuthManager users get known passwords, ``<user>-pw``. The helpers act as
a given user, as that person would in the UI.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import cursorops.airflow.bundle as bundle
from cursorops.local.ports import free_port

DEMO_USERS = {"admin": "admin", "alice": "op", "bob": "op", "carol": "viewer"}
"""Airflow user → SimpleAuthManager role (carol, a viewer, reads and answers nothing)."""
START_TIMEOUT_S = 300.0
POLL_S = 0.5
"""How often the helpers ask Airflow whether what they wait for has happened: each wait
ends at most this long after it did."""
HITL_SETTLE_S = 3.0
"""Airflow 3.3.2 with the LocalExecutor fails a run whose approval lands before the scheduler
has processed the executor's event for the workload that parked the gate in
``awaiting_input`` (it then sees a "success" for a re-queued task). That is about 1 s on an
idle machine and was over 5 s on a loaded one: :meth:`Airflow.wait_awaiting_input` waits for
the scheduler's own log line saying it processed that event, then this long."""
PARKED_EVENT_TIMEOUT_S = 120.0
CONNECT_READY = "spark-connect.ready"
"""Touched in AIRFLOW_HOME once the launcher's Spark Connect server listens and is warm."""
CONNECT_TOKEN = "spark-connect.token"
"""In CURSOROPS_HOME: the token the launcher's Spark Connect server requires (mode 0600)."""
POSTGRES_DIR = "postgres.dir"
"""In AIRFLOW_HOME while the launcher runs a PostgreSQL of its own: the cluster's folder."""
AIRFLOW_READY = "airflow.ready"
"""Touched in AIRFLOW_HOME once the launcher has warmed up the api-server's execution API."""
FINISHED = {"success", "failed"}
SKIP_DAG = "cursorops_skip_messages"
CLIENT_REQUEST_ID = "local-airflow-client"
"""The ``X-Request-ID`` of every request these helpers make: Airflow's access log names it
(``request_id=``), so a request the helpers did not make stands out."""
ANSWER_ATTEMPTS = 5
"""How often :meth:`Airflow.answer` gives an answer Airflow refused for a busy database."""

Progress = Callable[[str], None]


def password(user: str) -> str:
    """The known password :func:`start_airflow` gives ``user``."""
    return f"{user}-pw"


@dataclass
class Airflow:
    base_url: str
    home: Path
    log: Path
    process: subprocess.Popen[bytes]
    launcher_env: dict[str, str] = field(default_factory=dict, repr=False)
    """The environment the launcher was started with (before ``airflow-env.sh``)."""
    _tokens: dict[str, str] = field(default_factory=dict)

    # -- users -----------------------------------------------------------------

    def token(self, user: str) -> str:
        """A JWT of ``user`` (``POST /auth/token``), also the UI's ``_token`` cookie."""
        if user not in self._tokens:
            response = httpx.post(
                f"{self.base_url}/auth/token",
                json={"username": user, "password": password(user)},
                headers={"X-Request-ID": CLIENT_REQUEST_ID},
                timeout=60,
            )
            response.raise_for_status()
            self._tokens[user] = response.json()["access_token"]
        return self._tokens[user]

    def request(self, user: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {
            "Authorization": f"Bearer {self.token(user)}",
            "X-Request-ID": CLIENT_REQUEST_ID,
            **kwargs.pop("headers", {}),
        }
        return httpx.request(
            method, f"{self.base_url}{path}", headers=headers, timeout=60, **kwargs
        )

    def get(self, user: str, path: str, **kwargs: Any) -> Any:
        """GET and decode; a read that times out is asked again (an api-server on a busy
        machine can stall for a minute), up to three times."""
        for attempt in range(3):
            try:
                response = self.request(user, "GET", path, **kwargs)
                break
            except httpx.TimeoutException:
                if attempt == 2:
                    raise
        response.raise_for_status()
        return response.json()

    # -- runs ------------------------------------------------------------------

    def trigger(
        self, dag_id: str, conf: Mapping[str, Any], user: str, run_id: str | None = None
    ) -> str:
        body: dict[str, Any] = {"logical_date": None, "conf": conf}
        if run_id is not None:
            body["dag_run_id"] = run_id
        response = self.request(user, "POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)
        if response.status_code != 200:
            raise RuntimeError(
                f"trigger {dag_id} as {user}: {response.status_code} {response.text}"
            )
        return str(response.json()["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.get("admin", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}"))

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.dag_run(dag_id, run_id)["state"])

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        found = self.get(
            "admin",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
            params={"limit": 1000},
        )
        return list(found["task_instances"])

    def task_states(self, dag_id: str, run_id: str) -> dict[str, list[str]]:
        """Task id → states of its instances (one per map index)."""
        states: dict[str, list[str]] = {}
        for ti in self.task_instances(dag_id, run_id):
            states.setdefault(ti["task_id"], []).append(str(ti["state"]))
        return states

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(
            self.get("admin", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        )

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1, try_number: int = 1
    ) -> str:
        """The text of one try's log (the first by default)."""
        response = self.request(
            "admin",
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"map_index": map_index},
            headers={"Accept": "application/json"},
        )
        response.raise_for_status()
        return response.text

    def wait_dag(self, dag_id: str, timeout: float = 120) -> None:
        """Return once the dag-processor has parsed ``dag_id`` (the REST API knows it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.request("admin", "GET", f"/api/v2/dags/{dag_id}").status_code == 200:
                return
            time.sleep(POLL_S)
        raise TimeoutError(f"{dag_id} not parsed after {timeout} s: {self.log}")

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run_state(dag_id, run_id)
            if state in FINISHED:
                return state
            time.sleep(POLL_S)
        raise TimeoutError(f"run {run_id} not finished after {timeout} s: {self.log}")

    def wait_parked(
        self, dag_id: str, run_id: str, task_id: str, timeout: float = 300, poll: float = POLL_S
    ) -> None:
        """Return as soon as the gate parks in ``awaiting_input`` (no settling)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ti = self.task_instance(dag_id, run_id, task_id)
            if ti["state"] == "awaiting_input":
                return
            if ti["state"] in ("failed", "upstream_failed", "skipped", "success"):
                raise AssertionError(f"{task_id} ended {ti['state']} before waiting for input")
            if self.run_state(dag_id, run_id) in FINISHED:
                raise AssertionError(f"run {run_id} finished before {task_id} waited for input")
            time.sleep(poll)
        raise TimeoutError(f"{task_id} of {run_id} never awaited input: {self.log}")

    def hitl_detail(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        return dict(self.get("admin", path))

    def wait_answerable(self, dag_id: str, run_id: str, task_id: str) -> None:
        """After the gate parked: wait until the scheduler has processed the executor's event
        for the parking workload (its log says so), then :data:`HITL_SETTLE_S` more."""
        wanted = (
            "TaskInstance Finished: ",
            f"dag_id={dag_id}, task_id={task_id}, run_id={run_id}, map_index=-1,",
            "state=awaiting_input,",
        )
        deadline = time.monotonic() + PARKED_EVENT_TIMEOUT_S
        while time.monotonic() < deadline:
            with self.log.open("r", encoding="utf-8", errors="replace") as lines:
                if any(all(part in line for part in wanted) for line in lines):
                    break
            time.sleep(0.5)
        else:
            raise TimeoutError(
                f"the scheduler never processed {task_id}'s parking in {run_id}: {self.log}"
            )
        time.sleep(HITL_SETTLE_S)

    def wait_awaiting_input(
        self, dag_id: str, run_id: str, task_id: str, timeout: float = 300
    ) -> dict[str, Any]:
        """Wait until the gate parks in ``awaiting_input`` and may be answered safely
        (:meth:`wait_answerable`); return its HITL record (subject, body, assigned users)."""
        self.wait_parked(dag_id, run_id, task_id, timeout)
        self.wait_answerable(dag_id, run_id, task_id)
        return self.hitl_detail(dag_id, run_id, task_id)

    def answer(
        self, dag_id: str, run_id: str, task_id: str, option: str, user: str
    ) -> httpx.Response:
        """Answer the approval over REST as ``user`` (Approve or Reject).

        Airflow on SQLite refuses a write with a 500 "Database error" while another process
        holds the database (its transaction rolled back: nothing was recorded); the answer is
        given again, as the person would click again, up to :data:`ANSWER_ATTEMPTS` times.
        Any other answer, a 409 (already answered) included, is returned as it came."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        body = {"chosen_options": [option], "params_input": {}}
        for attempt in range(1, ANSWER_ATTEMPTS + 1):
            response = self.request(user, "PATCH", path, json=body)
            if attempt == ANSWER_ATTEMPTS or not _database_busy(response):
                break
            time.sleep(1)
        return response

    # -- environment -----------------------------------------------------------

    def environment(self) -> dict[str, str]:
        """The environment every process of this Airflow and each of its tasks has: the
        launcher's, with ``scripts/airflow-env.sh`` sourced for this AIRFLOW_HOME. A process
        started with it (``dag.test()``, the ``airflow`` CLI) shares the metadata database,
        the DAGs folder and the connections, the launcher's Spark Connect server included."""
        sourced = subprocess.run(
            [
                "bash",
                "-c",
                'source "$0" "$1" >/dev/null && env -0',
                str(bundle.scripts_folder() / "airflow-env.sh"),
                str(self.home),
            ],
            env=self.launcher_env,
            capture_output=True,
            check=True,
        )
        pairs = (item.partition("=") for item in sourced.stdout.decode().split("\0") if item)
        env = {name: value for name, _, value in pairs}
        connect = spark_connect_port(self.launcher_env)
        if connect is not None:
            # The token the launcher made for its home (scripts/airflow-env.sh).
            token = Path(env["CURSOROPS_HOME"], CONNECT_TOKEN).read_text().strip()
            env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = json.dumps(
                {
                    "conn_type": "spark_connect",
                    "host": "127.0.0.1",
                    "port": connect,
                    "password": token,
                }
            )
        return env

    # -- life ------------------------------------------------------------------

    def __enter__(self) -> Airflow:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self, timeout: float = 120) -> None:
        """SIGINT to the launcher, which stops every Airflow process it started (SIGTERM to
        standalone would orphan its children), the Spark Connect server and the PostgreSQL it
        started for Airflow's metadata; then check that none is left. A PostgreSQL left
        running is stopped, its data kept, and the stop fails."""
        groups = [self.process.pid, *self._standalone_group()]
        cluster = self._postgres_cluster()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_groups(groups)
                raise
        # The launcher's children share its process group, standalone's its own: none
        # may outlive the launcher.
        deadline = time.monotonic() + 30
        while any(_group_alive(group) for group in groups):
            if time.monotonic() >= deadline:
                _kill_groups(groups)
                raise RuntimeError(f"Airflow processes outlived the launcher's stop: {self.log}")
            time.sleep(1)
        # The PostgreSQL it started (a session of its own, run by pg_ctl) is stopped by the
        # launcher, which then forgets it: its postmaster.pid goes when the server has ended.
        cluster = self._postgres_cluster() or cluster
        if cluster is not None and (cluster / "data" / "postmaster.pid").exists():
            subprocess.run(
                ["bash", str(bundle.scripts_folder() / "stop-postgres.sh"), "--keep", str(cluster)],
                capture_output=True,
                check=False,
            )
            (self.home / POSTGRES_DIR).unlink(missing_ok=True)
            raise RuntimeError(f"the launcher left its PostgreSQL in {cluster} running: {self.log}")
        if (self.home / POSTGRES_DIR).exists():
            raise RuntimeError(f"the launcher did not forget its PostgreSQL: {self.log}")

    def _postgres_cluster(self) -> Path | None:
        """The folder of the PostgreSQL the launcher started for Airflow's metadata, if any."""
        try:
            return Path((self.home / POSTGRES_DIR).read_text().strip())
        except OSError:
            return None

    def _standalone_group(self) -> list[int]:
        """The process group ``airflow-up.sh`` gives standalone (its own), if it wrote it."""
        try:
            return [int((self.home / "standalone.group").read_text().strip())]
        except (OSError, ValueError):
            return []


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_groups(groups: list[int]) -> None:
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


def default_sigint() -> None:
    """In a launcher's process before it runs: SIGINT back to its default. The launchers
    stop on SIGINT through a trap, and a shell cannot trap a signal it started with
    ignored, as everything started from a background job of a shell does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_airflow(
    root: Path,
    environ: Mapping[str, str],
    *,
    users: Mapping[str, str] = DEMO_USERS,
    wait_for_dag: str = SKIP_DAG,
    only_dag: bool = False,
    progress: Progress | None = None,
    timeout: float = START_TIMEOUT_S,
) -> Airflow:
    """Start Airflow with AIRFLOW_HOME ``root/airflow`` and ``environ`` added (the cursorops
    settings the tasks read, Airflow settings); wait for health and for ``wait_for_dag`` to be
    parsed. With ``only_dag`` every other DAG stays paused (no scheduled backlog audit
    competing for the CPU, as a demo or a benchmark needs). ``progress`` is told what is
    happening while Airflow starts."""
    home = root / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    (home / "simple_auth_manager_passwords.json.generated").write_text(
        json.dumps({user: password(user) for user in users})
    )
    port = free_port()
    log_port = free_port(span=2)
    script = bundle.scripts_folder() / "airflow-up.sh"
    env = {
        **os.environ,
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        **bundle.launcher_environment(),
        **environ,
        "AIRFLOW_PORT": str(port),
        "AIRFLOW_LOG_PORT": str(log_port),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in users.items()),
    }
    if not env.get("SPARK_CONNECT_PORT"):
        # Its own server on a free port: one listening on the default port may be another
        # checkout's (its Python workers import that checkout's code).
        env["SPARK_CONNECT_PORT"] = str(free_port())
    if only_dag:
        env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] = "True"
    log = root / "airflow.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", str(script), str(home)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=default_sigint,
        )
    airflow = Airflow(f"http://127.0.0.1:{port}", home, log, process, env)
    try:
        _wait_ready(airflow, wait_for_dag, progress or (lambda _text: None), timeout)
        if only_dag:
            airflow.request(
                "admin", "PATCH", f"/api/v2/dags/{wait_for_dag}", json={"is_paused": False}
            ).raise_for_status()
    except BaseException:
        airflow.stop()
        raise
    return airflow


@dataclass
class ApiServer:
    """Airflow's api-server alone (no scheduler, no DAG run): what serves the REST app."""

    base_url: str
    process: subprocess.Popen[bytes]
    """In a session of its own: its workers are that session's processes."""
    log: Path

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after a minute."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                _kill_groups([self.process.pid])
                self.process.wait(timeout=30)


def start_api_server(
    home: Path,
    environ: Mapping[str, str],
    *,
    users: Mapping[str, str] = DEMO_USERS,
    workers: int = 1,
    timeout: float = START_TIMEOUT_S,
) -> ApiServer:
    """``airflow api-server --apps core`` with AIRFLOW_HOME ``home`` (its metadata a SQLite
    file there, migrated first), ``users`` and ``environ`` added, on a free port; once its
    health check answers. Its output goes to ``home/api-server.log``."""
    home.mkdir(parents=True, exist_ok=True)
    passwords = home / "simple_auth_manager_passwords.json.generated"
    passwords.write_text(json.dumps({user: password(user) for user in users}))
    port = free_port()
    airflow = str(Path(sys.executable).parent / "airflow")
    env = {
        **os.environ,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in users.items()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
    }
    log = home / "api-server.log"
    with log.open("wb") as out:
        subprocess.run(
            [airflow, "db", "migrate"], env=env, check=True, stdout=out, stderr=subprocess.STDOUT
        )
        process = subprocess.Popen(
            [airflow, "api-server", "--apps", "core", "--host", "127.0.0.1"]
            + ["--port", str(port), "--workers", str(workers)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ApiServer(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the api-server exited {process.returncode}: see {log}")
        try:
            if httpx.get(f"{server.base_url}/api/v2/monitor/health", timeout=5).is_success:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(POLL_S)
    server.stop()
    raise TimeoutError(f"the api-server did not answer within {timeout:.0f} s: see {log}")


def spark_connect_port(env: Mapping[str, str]) -> int | None:
    """The port of the Spark Connect server the launcher starts with ``env``; None when it
    starts none (``CURSOROPS_SPARK_CONNECT=0``, or a server named by the environment)."""
    if env.get("CURSOROPS_SPARK_CONNECT") == "0" or env.get("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"):
        return None
    return int(env.get("SPARK_CONNECT_PORT") or 15002)


def _wait_ready(airflow: Airflow, dag_id: str, progress: Progress, timeout: float) -> None:
    """Wait for the api-server, ``dag_id`` parsed, and the launcher's warm-ups (the Spark
    Connect server, the execution API)."""
    start = time.monotonic()
    connect = spark_connect_port(airflow.launcher_env)
    deadline = start + timeout
    phase = "starting the api-server, scheduler and dag-processor"
    progress(phase)
    last_said = start
    while time.monotonic() < deadline:
        if airflow.process.poll() is not None:
            raise RuntimeError(
                f"the Airflow launcher exited {airflow.process.returncode}: "
                f"{_last_line(airflow.log)} (log: {airflow.log})"
            )
        try:
            health = httpx.get(f"{airflow.base_url}/api/v2/monitor/health", timeout=10)
            if health.status_code == 200:
                if phase.startswith("starting"):
                    phase = f"api-server up; waiting for the dag-processor to parse {dag_id}"
                    progress(f"{phase} ({time.monotonic() - start:.0f} s)")
                dags = airflow.get("admin", "/api/v2/dags", params={"dag_id_pattern": dag_id})
                if any(d["dag_id"] == dag_id for d in dags["dags"]):
                    if connect is not None and not (airflow.home / CONNECT_READY).exists():
                        phase = f"waiting for the Spark Connect server on port {connect}"
                    elif not (airflow.home / AIRFLOW_READY).exists():
                        phase = "waiting for the api-server's execution API to warm up"
                    else:
                        progress(f"Airflow ready ({time.monotonic() - start:.0f} s)")
                        return
        except httpx.HTTPError:
            pass
        if time.monotonic() - last_said >= 10:
            last_said = time.monotonic()
            progress(f"... still {phase} ({last_said - start:.0f} s)")
        time.sleep(POLL_S)
    raise TimeoutError(f"Airflow not ready after {timeout:.0f} s: {airflow.log}")


def _last_line(log: Path) -> str:
    """The log's last line that says something: usually why the launcher gave up."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return next((text.strip() for text in reversed(lines) if text.strip()), "(empty log)")


def _database_busy(response: httpx.Response) -> bool:
    """Airflow's 500 for a database error (``SQLAlchemyErrorHandler``): on SQLite, another
    writer held the database and the request's transaction was rolled back."""
    if response.status_code != 500:
        return False
    try:
        detail = response.json().get("detail")
    except ValueError:
        return False
    return isinstance(detail, dict) and detail.get("reason") == "Database error"

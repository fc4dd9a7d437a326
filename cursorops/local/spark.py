"""Spark servers as local processes: a Connect server, and a standalone cluster.

**The Connect server** is started by ``spark-connect-up.sh``.

The script is the one a local Airflow starts its server with (``airflow-up.sh``); here
it runs on a free port with a fresh token, in a session of its own, its output in
``log``. :func:`connect_server` waits until the port listens (a JVM start: tens of
seconds), yields the :class:`ConnectServer`, then stops it with SIGTERM, which runs the
JVM's shutdown hooks (the Python workers go with it), and kills what is left of its
process group. A server that exits or does not listen within ``timeout_s`` raises
:class:`SparkStartError`, naming its log; one that ignores SIGTERM for ``stop_timeout_s``
is killed and raises :class:`SparkStopError`.

**A standalone cluster** (:func:`standalone_cluster`): a master and one worker from the
pyspark package's ``spark-class``, on 127.0.0.1, ready once the master counts the worker
alive; stopped with SIGTERM, each in a session of its own.
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
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cursorops.airflow.bundle as bundle
from cursorops.local.ports import free_port, listening

START_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 90.0
CLUSTER_START_TIMEOUT_S = 90.0
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
"""The variable the server reads its token from (not its command line: ``ps`` shows that)."""


class SparkStartError(RuntimeError):
    """The Connect server exited, or did not listen in time."""


class SparkStopError(RuntimeError):
    """The Connect server ignored SIGTERM and was killed."""


@dataclass(frozen=True)
class ConnectServer:
    port: int
    token: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def address(self) -> str:
        """``sc://127.0.0.1:PORT``, without the token."""
        return f"sc://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """With the token: what a job is given."""
        return f"{self.address}/;token={self.token}"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def connect_server(
    log: Path,
    *,
    master: str = "local[2]",
    driver_memory: str = "1g",
    conf: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
    stop_timeout_s: float = STOP_TIMEOUT_S,
) -> Iterator[ConnectServer]:
    """A Connect server on ``master`` with ``conf`` set, listening on a free port."""
    port = free_port()
    token = secrets.token_urlsafe(32)
    command = [str(bundle.scripts_folder() / "spark-connect-up.sh"), "--port", str(port)]
    command += ["--master", master, "--driver-memory", driver_memory]
    for key, value in (conf or {}).items():
        command += ["--conf", f"{key}={value}"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {}), TOKEN_ENV: token},
        )
    deadline = time.monotonic() + timeout_s
    while not listening(port):
        if process.poll() is not None or time.monotonic() > deadline:
            why = (
                f"exited {process.returncode}"
                if process.poll() is not None
                else f"did not listen within {timeout_s:.0f} s"
            )
            _kill_group(process)
            raise SparkStartError(f"the Spark Connect server {why}: see {log}")
        time.sleep(0.5)
    try:
        yield ConnectServer(port, token, process, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=stop_timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                raise SparkStopError(
                    f"the Spark Connect server ignored SIGTERM for {stop_timeout_s:.0f} s: "
                    f"see {log}"
                ) from None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


@dataclass(frozen=True)
class StandaloneCluster:
    master_url: str
    """``spark://127.0.0.1:PORT``: what ``spark-submit --master`` takes."""
    ui_port: int
    """The master's web UI (``/json/``: its workers and applications)."""
    logs: Path

    def state(self) -> dict[str, Any] | None:
        """The master's ``/json/`` document, or None when it does not answer."""
        try:
            url = f"http://127.0.0.1:{self.ui_port}/json/"
            with urllib.request.urlopen(url, timeout=5) as answer:
                found: dict[str, Any] = json.loads(answer.read())
                return found
        except OSError:
            return None


def _stop_terminated(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    _kill_group(process)


@contextlib.contextmanager
def standalone_cluster(
    logs: Path,
    *,
    port: int | None = None,
    cores: int = 2,
    memory: str = "3g",
    timeout_s: float = CLUSTER_START_TIMEOUT_S,
) -> Iterator[StandaloneCluster]:
    """A master on ``port`` (default a free one) and one worker of ``cores`` and ``memory``,
    their logs ``master.log`` and ``worker.log`` in ``logs``."""
    spark_class = str(Path(sys.executable).parent / "spark-class")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    port = port if port is not None else free_port()
    ui_port, worker_ui_port = free_port(), free_port()
    logs.mkdir(parents=True, exist_ok=True)
    master = f"spark://127.0.0.1:{port}"
    commands = {
        "master": ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        + ["--port", str(port), "--webui-port", str(ui_port)],
        "worker": ["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1"]
        + ["--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui_port)]
        + ["--work-dir", str(logs / "work")],
    }
    started: list[subprocess.Popen[bytes]] = []
    try:
        for name, arguments in commands.items():
            with open(logs / f"{name}.log", "wb") as log:
                started.append(
                    subprocess.Popen(
                        [spark_class, *arguments],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
        cluster = StandaloneCluster(master, ui_port, logs)
        deadline = time.monotonic() + timeout_s
        while True:
            state = cluster.state()
            if state is not None and int(state.get("aliveworkers", 0)) >= 1:
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in started):
                raise SparkStartError(
                    f"the Spark standalone cluster did not come up: see {logs / 'master.log'} "
                    f"and {logs / 'worker.log'}"
                )
            time.sleep(1)
        yield cluster
    finally:
        for process in reversed(started):
            _stop_terminated(process, 30)

"""``scripts/airflow-up.sh``'s lifecycle with a Spark Connect server, on stand-ins.

A fake virtualenv stands in for Airflow and Spark: its ``airflow`` counts the
SIGINTs it gets and stops on the first, its ``spark-submit`` listens on the
Connect port until SIGTERM, and its ``python`` runs the real interpreter except
for the warm-up (a no-op here). So the launcher's own logic is what is tested,
in a second: the server is started and named by ``spark_connect_default``,
Ctrl-C (SIGINT to the launcher's process group) or ``airflow-down.sh`` gives
standalone exactly one SIGINT, and nothing outlives the launcher. Last,
``scripts/airflow-topology.sh`` kills a component that does not end on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cursorops.airflow.local_airflow import default_sigint, spark_connect_port
from cursorops.local.ports import free_port

REPO = Path(__file__).resolve().parents[1]

FAKE_AIRFLOW = """#!/usr/bin/env python3
import os, signal, sys, time
home = os.environ["AIRFLOW_HOME"]
def stop(signum, frame):
    with open(os.path.join(home, "sigints"), "a") as out:
        out.write("INT\\n")
    time.sleep(0.5)  # a second SIGINT now would land in the shutdown
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
with open(os.path.join(home, "connection"), "w") as out:
    out.write(os.environ.get("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", ""))
while True:
    time.sleep(0.1)
"""

FAKE_SPARK_SUBMIT = """#!/usr/bin/env python3
import json, os, signal, socket, sys
flag = "spark.connect.grpc.binding.port="
port = next(int(a.removeprefix(flag)) for a in sys.argv if a.startswith(flag))
seen = {"argv": sys.argv, "token": os.environ.get("SPARK_CONNECT_AUTHENTICATE_TOKEN")}
with open(os.path.join(os.environ["CURSOROPS_HOME"], "server.json"), "w") as out:
    json.dump(seen, out)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen()
while True:
    server.accept()[0].close()
"""

FAKE_PYTHON = f"""#!/usr/bin/env bash
[[ "$1 $2" == "-m cursorops.spark.warm_up" ]] && exit 0
exec {sys.executable} "$@"
"""


def _venv(root: Path) -> Path:
    bin_dir = root / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (
        ("airflow", FAKE_AIRFLOW),
        ("spark-submit", FAKE_SPARK_SUBMIT),
        ("python", FAKE_PYTHON),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir.parent


STUCK = """
import signal, time
signal.signal(signal.SIGINT, lambda *_: None)
print("ready", flush=True)
time.sleep(600)
"""


def _group_running(group: int) -> bool:
    """Whether a process of ``group`` runs: an orphan's zombie waits for init to reap it."""
    states = subprocess.run(
        ["ps", "-e", "-o", "pgid=", "-o", "stat="], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return any(
        fields[0] == str(group) and not fields[1].startswith("Z")
        for fields in (line.split() for line in states)
        if len(fields) == 2
    )


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(
    tmp_path: Path, preexec_fn: Callable[[], None] = default_sigint, **extra: str
) -> tuple[subprocess.Popen[bytes], Path, int]:
    venv = _venv(tmp_path)
    home = tmp_path / "airflow"
    port = free_port()
    env = {
        **os.environ,
        "VENV": str(venv),
        "CURSOROPS_HOME": str(tmp_path / "cursorops"),
        "AIRFLOW_PORT": str(free_port()),
        "AIRFLOW_LOG_PORT": str(free_port(span=2)),
        "SPARK_CONNECT_PORT": str(port),
        **extra,
    }
    env.pop("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", None)
    launcher = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "airflow-up.sh"), str(home)],
        env=env,
        stdout=(tmp_path / "launcher.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )
    deadline = time.monotonic() + 60
    while not (home / "spark-connect.ready").exists() or not (home / "connection").exists():
        assert launcher.poll() is None, (tmp_path / "launcher.log").read_text()
        assert time.monotonic() < deadline, (tmp_path / "launcher.log").read_text()
        time.sleep(0.1)
    return launcher, home, port


def _stopped(launcher: subprocess.Popen[bytes], home: Path, group: int, port: int) -> None:
    assert launcher.wait(timeout=60) == 0
    deadline = time.monotonic() + 10
    while _group_alive(launcher.pid) or _group_alive(group):
        assert time.monotonic() < deadline, "a process outlived the launcher"
        time.sleep(0.1)
    assert (home / "sigints").read_text() == "INT\n"  # exactly one
    with socket.socket() as probe, pytest.raises(OSError):
        probe.connect(("127.0.0.1", port))
    assert not (home / "spark-connect.ready").exists()


def test_ctrl_c_stops_standalone_with_one_sigint_then_the_server(tmp_path: Path) -> None:
    launcher, home, port = _start(tmp_path)
    connection = (home / "connection").read_text()
    assert f'"port":{port}' in connection and '"conn_type":"spark_connect"' in connection
    group = int((home / "standalone.group").read_text())
    os.killpg(launcher.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    _stopped(launcher, home, group, port)


def test_the_server_requires_the_home_s_token_and_the_connection_carries_it(
    tmp_path: Path,
) -> None:
    import json
    import stat

    launcher, home, _port = _start(tmp_path)
    try:
        token_file = tmp_path / "cursorops" / "spark-connect.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 40
        server = json.loads((tmp_path / "cursorops" / "server.json").read_text())
        # From the environment, where Spark reads it; no command line shows it.
        assert server["token"] == token
        assert not [arg for arg in server["argv"] if token in arg]
        connection = json.loads((home / "connection").read_text())
        assert connection["password"] == token
    finally:
        os.killpg(launcher.pid, signal.SIGINT)
        launcher.wait(timeout=60)
    # A second start on the same home keeps its token.
    again, _home, _port = _start(tmp_path / "again", CURSOROPS_HOME=str(tmp_path / "cursorops"))
    try:
        assert json.loads((_home / "connection").read_text())["password"] == token
    finally:
        os.killpg(again.pid, signal.SIGINT)
        again.wait(timeout=60)


def test_a_token_file_that_is_not_a_token_stops_the_launcher(tmp_path: Path) -> None:
    home = tmp_path / "cursorops"
    home.mkdir()
    (home / "spark-connect.token").write_text('x", "host": "elsewhere\n')
    done = subprocess.run(
        ["bash", "-c", 'set -euo pipefail; source "$0" "$1"; spark_connect_start']
        + [str(REPO / "scripts" / "airflow-env.sh"), str(tmp_path / "airflow")],
        env={
            **os.environ,
            "VENV": str(_venv(tmp_path)),
            "CURSOROPS_HOME": str(home),
            "SPARK_CONNECT_PORT": str(free_port()),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "a token is letters, digits, - and _ only" in done.stderr
    assert "Spark Connect: starting" not in done.stdout


def test_airflow_down_stops_everything(tmp_path: Path) -> None:
    launcher, home, port = _start(tmp_path)
    group = int((home / "standalone.group").read_text())
    down = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "airflow-down.sh"), str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # Reap the launcher as its parent shell would: a zombie still answers kill -0.
    _stopped(launcher, home, group, port)
    said, _ = down.communicate(timeout=60)
    assert down.returncode == 0 and "stopped" in said, said


def test_airflow_down_ends_what_a_killed_launcher_left(tmp_path: Path) -> None:
    """A launcher killed with SIGKILL stops nothing: airflow-down.sh ends standalone's group
    and the Spark Connect server from the pid files the launcher wrote."""
    launcher, home, port = _start(tmp_path)
    group = int((home / "standalone.group").read_text())
    launcher.kill()
    launcher.wait(timeout=10)
    assert _group_alive(group)
    down = subprocess.run(
        ["bash", str(REPO / "scripts" / "airflow-down.sh"), str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 0 and "stopped (forced)" in down.stdout, down
    assert "is gone but left processes behind" in down.stderr
    assert not _group_running(group)
    with socket.socket() as probe, pytest.raises(OSError):
        probe.connect(("127.0.0.1", port))
    assert not (home / "standalone.pid").exists() and not (home / "spark-connect.pid").exists()
    again = subprocess.run(
        ["bash", str(REPO / "scripts" / "airflow-down.sh"), str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 1 and "not started by airflow-up.sh" in again.stderr


def test_airflow_down_stops_a_launcher_started_with_sigint_ignored(tmp_path: Path) -> None:
    """`make up &` from a script starts the launcher with SIGINT ignored, which a shell
    cannot trap: airflow-down.sh sees it and sends SIGTERM, on which the launcher stops
    standalone (one SIGINT) and the server as Ctrl-C would."""
    launcher, home, port = _start(tmp_path, preexec_fn=ignore_sigint)
    group = int((home / "standalone.group").read_text())
    down = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "airflow-down.sh"), str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _stopped(launcher, home, group, port)
    said, complaint = down.communicate(timeout=60)
    assert down.returncode == 0 and said == "stopped\n", (said, complaint)
    assert "ignores SIGINT" in complaint


def test_a_launcher_that_does_not_stop_on_sigint_gets_sigterm(tmp_path: Path) -> None:
    """A launcher still up AIRFLOW_DOWN_SECONDS after its SIGINT gets SIGTERM."""
    launcher, home, port = _start(tmp_path)
    group = int((home / "standalone.group").read_text())
    stuck = subprocess.Popen(  # stands in for the launcher: takes SIGINT, does nothing
        [sys.executable, "-c", STUCK], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stuck.stdout is not None and stuck.stdout.readline() == "ready\n"
        (home / "standalone.pid").write_text(str(stuck.pid))
        down = subprocess.run(
            ["bash", str(REPO / "scripts" / "airflow-down.sh"), str(home)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "AIRFLOW_DOWN_SECONDS": "1"},
        )
        assert down.returncode == 0 and "stopped (forced)" in down.stdout, down
        assert "still running after 1 s: SIGTERM" in down.stderr
        assert stuck.wait(timeout=10) == -signal.SIGTERM
        assert not _group_running(group)
    finally:
        stuck.kill()
        stuck.wait()
        os.killpg(launcher.pid, signal.SIGINT)
        launcher.wait(timeout=60)


def test_a_running_server_is_reused_and_left_running(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        launcher, home, _ = _start(tmp_path / "a", SPARK_CONNECT_PORT=str(port))
        assert f'"port":{port}' in (home / "connection").read_text()
        assert "reusing the server" in (tmp_path / "a" / "launcher.log").read_text()
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=60) == 0
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_which_server_start_airflow_waits_for() -> None:
    assert spark_connect_port({}) == 15002
    assert spark_connect_port({"SPARK_CONNECT_PORT": "4242"}) == 4242
    assert spark_connect_port({"CURSOROPS_SPARK_CONNECT": "0"}) is None
    assert spark_connect_port({"AIRFLOW_CONN_SPARK_CONNECT_DEFAULT": "{}"}) is None


# ``scripts/airflow-topology.sh``'s components: each writes its pid and ends on SIGTERM,
# except the one named by FAKE_STUCK, whose exit on SIGTERM is lost.
FAKE_COMPONENT = """#!/usr/bin/env python3
import os, signal, sys, time
role = sys.argv[1]
if role == "db":
    sys.exit(0)
home = os.environ["AIRFLOW_HOME"]
stuck = role == os.environ.get("FAKE_STUCK")
signal.signal(signal.SIGTERM, signal.SIG_IGN if stuck else (lambda *_: sys.exit(0)))
with open(os.path.join(home, role + ".pid"), "w") as out:
    out.write(str(os.getpid()))
while True:
    time.sleep(0.1)
"""


@pytest.mark.slow
def test_a_topology_component_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    (venv / "bin" / "airflow").write_text(FAKE_COMPONENT)
    home = tmp_path / "airflow"
    env = {
        **os.environ,
        "VENV": str(venv),
        "CURSOROPS_HOME": str(tmp_path / "cursorops"),
        "AIRFLOW_PORT": str(free_port()),
        "AIRFLOW_LOG_PORT": str(free_port(span=2)),
        "SPARK_CONNECT_PORT": str(free_port()),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'airflow.db'}",
        "FAKE_STUCK": "dag-processor",
    }
    env.pop("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", None)
    log = tmp_path / "topology.log"
    topology = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "airflow-topology.sh"), str(home)],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        pids = [home / f"{role}.pid" for role in ("api-server", "scheduler", "dag-processor")]
        while not (home / "spark-connect.ready").exists() or not all(p.exists() for p in pids):
            assert topology.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        stuck = int((home / "dag-processor.pid").read_text())
        topology.send_signal(signal.SIGTERM)
        assert topology.wait(timeout=90) == 0, log.read_text()
        assert f"stopping {stuck}: still up after 30 s, killed" in log.read_text()
        with pytest.raises(ProcessLookupError):
            os.kill(stuck, 0)
    finally:
        if topology.poll() is None:
            os.killpg(topology.pid, signal.SIGKILL)
            topology.wait()
    deadline = time.monotonic() + 10
    while _group_alive(topology.pid):
        assert time.monotonic() < deadline, "a process outlived the topology script"
        time.sleep(0.1)

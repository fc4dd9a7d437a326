"""``pip install cursorops`` without extras: the broker, the store, the CLI and the REST
app, with neither Airflow nor pyspark, and a standalone that prints only its own lines.

The wheel of this checkout goes into a fresh virtual environment (``python -m venv``;
its dependencies come from the configured package indexes). There ``import airflow`` and
``import pyspark`` fail, and ``cursorops standalone`` starts on free ports, serves
Pulsar's admin v2 paths, and stops on Ctrl-C (SIGINT) with nothing left running.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.packaging.conftest import clean_environment, install, user_home

pytestmark = pytest.mark.slow

READY = re.compile(r"cursorops standalone ready: (pulsar://\S+) admin (http://\S+)")
OWN_LINE = re.compile(r"cursorops standalone (ready|stopping|stopped)\b")
"""Every line the standalone prints: its readiness, and its stop."""
START_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def venv(wheel_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed, no extras."""
    return install(wheel_file, tmp_path_factory.mktemp("no-extras"))


def _imports(venv: Path, module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env=clean_environment(venv.parent),
        cwd=user_home(venv.parent),
        timeout=120,
    )


@pytest.mark.parametrize("module", ["airflow", "pyspark", "matplotlib"])
def test_neither_airflow_nor_pyspark_is_installed(venv: Path, module: str) -> None:
    done = _imports(venv, module)
    assert done.returncode != 0
    assert f"No module named '{module}'" in done.stderr


def test_the_broker_the_rest_app_and_the_cli_import(venv: Path) -> None:
    done = _imports(venv, "cursorops.core.services.broker, cursorops.rest, cursorops.wire.web")
    assert done.returncode == 0, done.stderr
    assert done.stdout == done.stderr == ""


def test_the_standalone_serves_the_admin_rest_and_prints_only_its_own_lines(
    venv: Path, tmp_path: Path
) -> None:
    env = clean_environment(venv.parent)
    home = tmp_path / "home"
    argv = [
        str(venv / "bin" / "cursorops"),
        "--home",
        str(home),
        "standalone",
        "--broker-port",
        "0",
        "--web-port",
        "0",
    ]
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=user_home(venv.parent),
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(process.stdout or ()),  # until the process closes it
        daemon=True,
    )
    reader.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(READY.search(line) for line in lines):
            assert process.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "no ready line:\n" + "".join(lines)
            time.sleep(0.1)
        [ready] = [m for line in lines if (m := READY.search(line))]
        admin = ready.group(2)
        topic = "/admin/v2/persistent/public/default/orders"
        with httpx.Client(base_url=admin, timeout=30) as web:
            assert web.get("/admin/v2/brokers/health").text == "ok"
            assert "public" in web.get("/admin/v2/tenants").json()
            assert web.put(f"{topic}/partitions", json=2).status_code == 204
            assert web.put(f"{topic}-single").status_code == 204
            assert web.put(f"{topic}/subscription/billing").status_code == 204
            listed = web.get("/admin/v2/persistent/public/default")
            assert listed.status_code == 200, listed.text
            assert "persistent://public/default/orders-single" in listed.json()
            partitioned = web.get("/admin/v2/persistent/public/default/partitioned").json()
            assert partitioned == ["persistent://public/default/orders"]
            stats = web.get(f"{topic}/partitioned-stats")
            assert stats.status_code == 200, stats.text
            assert "billing" in stats.json()["subscriptions"]
            missing = web.get("/admin/v2/persistent/public/default/absent/stats")
            assert missing.status_code == 404 and missing.json()["reason"]
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        reader.join(10)
    assert process.returncode == 0, "".join(lines)
    printed = [line.rstrip("\n") for line in lines if line.strip()]
    assert printed and all(OWN_LINE.match(line) for line in printed), "\n".join(printed)
    assert printed[-1] == "cursorops standalone stopped"


def test_the_protocol_demo_names_what_it_needs_and_how_to_install_it(
    venv: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(venv / "bin" / "cursorops"), "--home", str(tmp_path / "home"), "demo", "--protocol"],
        capture_output=True,
        text=True,
        env=clean_environment(venv.parent),
        cwd=user_home(venv.parent),
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (
        "error: the protocol demo needs the Pulsar client and Airflow: "
        "pip install 'cursorops[airflow]'\n"
    )
    assert not (tmp_path / "home").exists()

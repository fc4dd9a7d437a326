"""``pip install 'cursorops[airflow]'`` and nothing else: both demos run.

The wheel of this checkout goes into a fresh virtual environment with the ``airflow`` extra
(its dependencies from the configured package indexes), and is used from a user's shell: no
PYTHONPATH, no checkout. There the DAGs and the launcher of a local Airflow resolve inside
the installed package, Airflow started by that launcher loads the cursorops plugin once (from
the entry point, not a plugins folder as well), ``cursorops demo`` passes, and
``cursorops demo --protocol`` starts Airflow from the installed launcher, serves the installed
DAGs, and passes its checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.conftest import REPO, clean_environment, install, user_home

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.airflow]

PROTOCOL_DEMO_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def venv(wheel_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with ``cursorops[airflow]`` installed from the wheel."""
    return install(wheel_file, tmp_path_factory.mktemp("airflow-extra"), extras="airflow")


def _site_packages(venv: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return (venv / "lib" / version / "site-packages").resolve()


def test_the_dags_and_the_launcher_resolve_inside_the_installed_package(venv: Path) -> None:
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from cursorops.airflow import bundle; "
            "print(bundle.dags_folder()); print(bundle.scripts_folder())",
        ],
        capture_output=True,
        text=True,
        env=clean_environment(venv.parent),
        cwd=user_home(venv.parent),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    dags, scripts = (Path(line) for line in done.stdout.split())
    package = _site_packages(venv) / "cursorops" / "airflow"
    assert (dags, scripts) == (package / "dags", package / "scripts")
    assert {p.name for p in dags.glob("*.py")} == {p.name for p in (REPO / "dags").glob("*.py")}
    assert (scripts / "airflow-up.sh").is_file() and (scripts / "airflow-env.sh").is_file()


def test_the_launcher_serves_the_installed_dags_and_the_plugin_once(
    venv: Path, tmp_path: Path
) -> None:
    """The settings the installed ``airflow-env.sh`` gives every Airflow process: the
    package's DAGs, neither the checkout nor the package's folder on PYTHONPATH, and a
    plugins folder that does not register the plugin a second time."""
    scripts = _site_packages(venv) / "cursorops" / "airflow" / "scripts"
    env = {
        **clean_environment(venv.parent),
        "VENV": str(venv),
        "CURSOROPS_HOME": str(tmp_path / "home"),
    }
    show = (
        'source "$0" "$1" >/dev/null && '
        'printf "%s\\n" "$AIRFLOW__CORE__DAGS_FOLDER" "${PYTHONPATH:-}" && '
        "exec airflow plugins --output json"
    )
    done = subprocess.run(
        ["bash", "-c", show, str(scripts / "airflow-env.sh"), str(tmp_path / "airflow")],
        capture_output=True,
        text=True,
        env=env,
        cwd=user_home(venv.parent),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    dags, pythonpath, *listing = done.stdout.splitlines()
    assert Path(dags) == scripts.parent / "dags"
    assert pythonpath == ""
    assert "already registered" not in done.stdout + done.stderr
    plugins = json.loads("\n".join(listing))
    assert [p["name"] for p in plugins].count("cursorops") == 1, plugins


def test_the_demo_runs(venv: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(venv / "bin" / "cursorops"), "--home", str(tmp_path / "home"), "demo"],
        capture_output=True,
        text=True,
        env=clean_environment(venv.parent),
        cwd=user_home(venv.parent),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_protocol_demo_runs_airflow_from_the_installed_launcher(
    venv: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(venv / "bin" / "cursorops"), "--home", str(tmp_path / "home"), "demo", "--protocol"],
        capture_output=True,
        text=True,
        env=clean_environment(venv.parent),
        cwd=user_home(venv.parent),
        stdin=subprocess.DEVNULL,
        timeout=PROTOCOL_DEMO_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout, done.stdout
    assert "ok    the app moved on: it took the later orders" in done.stdout, done.stdout

"""The wheel installs one import root, ``cursorops``, and holds every part of it.

Any other distribution with a ``core``, ``cli``, ``dags`` or ``scripts`` module would
collide with a wheel that put those at the top of site-packages; this one puts nothing
there but ``cursorops`` (``core/`` and ``spark_apps/`` of the checkout are mapped under
it, and the DAGs and the local Airflow's launcher ride in ``cursorops/airflow``).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(wheel_file: Path) -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel_file)


def test_the_only_top_level_package_is_cursorops(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"cursorops"}
    [top_level] = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert wheel.read(top_level).decode().split() == ["cursorops"]


def test_every_layer_and_its_files_are_inside(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for layer in ("core", "wire", "rest", "cli", "airflow", "spark"):
        assert f"cursorops/{layer}/__init__.py" in names, layer
    checkout = {
        f"cursorops/core/{p.relative_to(REPO / 'core').as_posix()}"
        for p in (REPO / "core").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert checkout <= names, sorted(checkout - names)[:5]
    assert "cursorops/rest/ui_static/app.js" in names
    [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    declared = wheel.read(entry_points).decode()
    assert "cursorops = cursorops.cli.main:main" in declared
    # The Airflow provider and its plugin come with the wheel.
    assert "[apache_airflow_provider]" in declared
    assert "provider_info = cursorops.airflow.provider:get_provider_info" in declared
    assert "cursorops = cursorops.airflow.plugins.cursorops:CursorOpsPlugin" in declared


LAUNCHER = (
    "airflow-up.sh",
    "airflow-env.sh",
    "airflow-down.sh",
    "spark-connect-up.sh",
    "start-postgres.sh",
    "stop-postgres.sh",
)
"""The launcher of a local Airflow and every file it runs or sources."""


def test_the_dags_and_the_airflow_launcher_are_inside(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    dags = {f"cursorops/airflow/dags/{p.name}" for p in (REPO / "dags").glob("*.py")}
    assert dags and {n for n in names if n.startswith("cursorops/airflow/dags/")} == dags
    scripts = {n for n in names if n.startswith("cursorops/airflow/scripts/")}
    assert scripts == {f"cursorops/airflow/scripts/{name}" for name in LAUNCHER}
    for name in scripts:
        # The files themselves, as in the checkout (a wheel holds no links).
        script = (REPO / "scripts" / name.rsplit("/", 1)[1]).read_bytes()
        assert wheel.read(name) == script, name
    # Whatever a launcher file runs or sources from its folder ships with it (the checkout's
    # airflow-topology.sh, which also sources airflow-env.sh, is only named in a comment).
    named = {
        found
        for name in LAUNCHER
        for found in re.findall(r"([\w-]+\.sh)\b", (REPO / "scripts" / name).read_text())
    }
    assert named <= {*LAUNCHER, "airflow-topology.sh"}, named


def test_a_build_leaves_no_egg_info_in_the_tree(source_tree: Path, wheel_file: Path) -> None:
    """One in a checkout is a second cursorops distribution wherever the checkout is on
    sys.path (an editable install): Airflow would load its airflow.plugins entry point
    again and report "Plugin 'cursorops' already registered"."""
    assert wheel_file.is_file()
    assert [p.name for p in source_tree.glob("*.egg-info")] == []
    assert (source_tree / "build" / "cursorops.egg-info").is_dir()

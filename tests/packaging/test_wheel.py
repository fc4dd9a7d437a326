"""The wheel installs one import root, ``cursorops``, and holds every part of it.

Any other distribution with a ``core`` or ``cli`` module would collide with a wheel
that put those at the top of site-packages; this one puts nothing there but
``cursorops`` (``core/`` and ``spark_apps/`` of the checkout are mapped under it).
"""

from __future__ import annotations

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

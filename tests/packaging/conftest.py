"""The wheel, built once per test session from this checkout (``pip wheel --no-deps``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def wheel_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes cursorops.egg-info into the tree it builds, and
    # one in the checkout is a second cursorops distribution wherever the checkout is on
    # sys.path (an editable install), whose airflow.plugins entry point Airflow would load
    # again and report as a duplicate plugin.
    source = tmp_path_factory.mktemp("source") / "cursorops"
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "*.egg-info", "__pycache__", "build", "test-artifacts", ".*cache"
        ),
    )
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    [built] = out.glob("cursorops-*.whl")
    return built

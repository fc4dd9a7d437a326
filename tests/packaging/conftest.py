"""The wheel, built once per test session from this checkout (``pip wheel --no-deps``), and
the environment of a user's shell the wheel's tests install and run it in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The copy of the checkout the wheel is built from: a build writes into the tree it
    builds (build/), and the checkout is left as it is."""
    source = tmp_path_factory.mktemp("source") / "cursorops"
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "*.egg-info", "__pycache__", "build", "test-artifacts", ".*cache"
        ),
    )
    return source


@pytest.fixture(scope="session")
def wheel_file(source_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source_tree)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    [built] = out.glob("cursorops-*.whl")
    return built


def clean_environment(root: Path) -> dict[str, str]:
    """A user's shell: no PYTHONPATH (the checkout must not shadow the installed wheel),
    no Airflow or cursorops settings, a home of its own under ``root`` (:func:`user_home`,
    also the folder to run in: ``python -c`` and ``-m`` put the current folder first on
    sys.path, and the checkout's ``cursorops`` must not be found there)."""
    home = user_home(root)
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "PIP_CONFIG_FILE", "SSL_CERT_FILE")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    return {**env, "HOME": str(home)}


def user_home(root: Path) -> Path:
    home = root / "user"
    home.mkdir(exist_ok=True)
    return home


def install(wheel_file: Path, root: Path, extras: str = "") -> Path:
    """A fresh virtual environment under ``root`` with the wheel installed (its dependencies
    from the configured package indexes), as a user installs it: ``cursorops[extras]``.

    Without pip's byte-compilation of every module installed (``--no-compile``), a minute
    of the Airflow extra's install on a busy machine: Python compiles the modules the
    tests import when they import them. Every file is installed all the same."""
    env = clean_environment(root)
    subprocess.run(
        [sys.executable, "-m", "venv", str(root / "venv")], check=True, env=env, timeout=300
    )
    python = root / "venv" / "bin" / "python"
    wanted = f"{wheel_file}[{extras}]" if extras else str(wheel_file)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-input", "--no-compile", wanted],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "venv"

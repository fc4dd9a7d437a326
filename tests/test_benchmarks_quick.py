"""The gated operations' benchmarks still run: each at its smoke size, writing nothing.

Their own checks (every undone id unacknowledged again, every redriven message on
the topic once, the radar's counts, the exact backlog after ``skip -n``) run at
this size too, so a benchmark that would publish a figure of a broken operation
fails here first. The failover benchmark needs the test PostgreSQL (its brokers share
it): it runs when ``CURSOROPS_TEST_PG_URL`` names one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PG_URL_ENV, _postgres_base_url

REPO = Path(__file__).resolve().parent.parent


def _smoke(name: str, tmp_path: Path, **env: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--quick", "--no-write", "--runs", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path), **env},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.parametrize("name", ["skip_head", "undo_skip", "redrive", "radar"])
def test_benchmark_runs_at_its_smoke_size(name: str, tmp_path: Path) -> None:
    _smoke(name, tmp_path)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("name", ["failover"])
def test_postgres_benchmark_runs_at_its_smoke_size(name: str, tmp_path: Path) -> None:
    _smoke(name, tmp_path, **{PG_URL_ENV: _postgres_base_url()})

"""``cursorops demo --protocol``: the poison-pill story with a real pulsar-client app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_the_protocol_demo_tells_its_story(tmp_path: Path) -> None:
    env = dict(os.environ, CURSOROPS_DAEMON="off")
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "--home", str(tmp_path), "demo", "--protocol"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exact backlog: 1 message" in done.stdout
    assert "backlog 1 -> 0" in done.stdout
    assert "the app moved on" in done.stdout
    as_json = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "--home",
            str(tmp_path),
            "-o",
            "json",
            "demo",
            "--protocol",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert as_json.returncode == 0, as_json.stderr
    summary = json.loads(as_json.stdout)
    assert summary["ok"] and all(summary["checks"].values())

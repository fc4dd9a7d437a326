"""``cursorops.cli.home`` is on every command's path: it imports the standard library only,
besides the constants the standalone's socket shares with it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROGRAM = """
import json, sys
before = set(sys.modules)
import cursorops.cli.home
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_home_imports_only_the_standard_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    loaded = json.loads(done.stdout)
    ours = {
        "cursorops",
        "cursorops.cli",
        "cursorops.cli.home",
        "cursorops.core",
        "cursorops.core.domain",
        "cursorops.core.domain.admin_socket",
    }
    assert ours <= set(loaded)
    foreign = [
        name
        for name in loaded
        if name not in ours and name.split(".")[0] not in sys.stdlib_module_names
    ]
    assert foreign == []

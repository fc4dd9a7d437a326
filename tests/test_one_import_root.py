"""``core/`` and ``spark_apps/`` load as ``cursorops.core`` and ``cursorops.spark`` only.

In a checkout ``cursorops/core`` and ``cursorops/spark`` are links to those folders, and the
checkout's root is on ``sys.path`` (an editable install's ``.pth`` entry, or a run from the
checkout). ``import core`` would then load a second copy of every module, with second
classes and second tables: an error raised by one copy is not an instance of the other's
class. Each folder's ``__init__`` refuses a top-level import, and no module spells one.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUARDED = {"core": "cursorops.core", "spark_apps": "cursorops.spark"}
MAYBE = re.compile(
    r"^[ \t]*(?:from[ \t]+|import[ \t][^#\n]*?(?<![\w.]))(?:core|spark_apps)\b", re.M
)
"""A line that may import a guarded folder by its own name; ``ast`` decides."""

PROBE = """
import importlib, json, sys
import cursorops.core.domain.errors, cursorops.spark
outcome = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        outcome[name] = str(exc)
    else:
        outcome[name] = None
top = sorted(m for m in sys.modules if m.split(".")[0] in ("core", "spark_apps"))
print(json.dumps({"refused": outcome, "loaded": top}))
"""


def probe(*names: str) -> dict[str, object]:
    """Import ``names`` in a fresh interpreter with the checkout's root first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_links_are_links() -> None:
    assert os.readlink(ROOT / "cursorops" / "core") == "../core"
    assert os.readlink(ROOT / "cursorops" / "spark") == "../spark_apps"


@pytest.mark.parametrize(
    "name",
    [
        "core",
        "core.domain.errors",
        "core.store.tables",
        "core.services.broker",
        "spark_apps",
        "spark_apps.common",
    ],
)
def test_a_top_level_import_is_refused_and_leaves_nothing(name: str) -> None:
    outcome = probe(name)
    refused = outcome["refused"]
    assert isinstance(refused, dict)
    message = refused[name]
    root = name.split(".")[0]
    assert message is not None, f"import {name} loaded a second copy of {GUARDED[root]}"
    assert f"import {GUARDED[root]}" in message
    assert outcome["loaded"] == []


def test_this_process_holds_one_copy() -> None:
    import cursorops.core.domain.errors

    assert [m for m in sys.modules if m.split(".")[0] in GUARDED] == []
    assert sys.modules["cursorops.core.domain.errors"] is cursorops.core.domain.errors


def python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "*.py"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode("utf-8")
    return [ROOT / name for name in listed.split("\0") if name]


def test_no_module_imports_a_guarded_folder_by_its_own_name() -> None:
    offenders = []
    for path in python_files():
        if path.is_symlink() or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if not MAYBE.search(text):
            continue
        tree = ast.parse(text, filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = [node.module.split(".")[0]]
            else:
                continue
            if any(root in GUARDED for root in roots):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []

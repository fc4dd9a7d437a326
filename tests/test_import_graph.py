"""The Broker and ``core``'s public API are the only way in for every front door.

Every module outside ``core/`` that ships (``cli``, ``protocol``, ``spark_apps``, ``dags``,
``airflow_glue``, ``plugins``, ``cursorops_api``) is parsed with ``ast``; the
test fails when one of them

- imports a private ``core`` name (a leading underscore, module or name);
- imports a store module: ``core.store`` (any), ``core.managed_cursor``,
  ``core.cursor_codec``;
- reaches a Broker's stores or cursors: ``<x>.metadata``, ``<x>.ledgers`` on a
  name spelled ``broker`` (or ending in ``broker``), or any ``._cursor``.

``tests/`` and ``benchmarks/`` are left out on purpose: tests check core's
internals, and the benchmarks measure them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EDGES = ("cli", "protocol", "spark_apps", "dags", "airflow_glue", "plugins", "cursorops_api")
STORE_MODULES = ("core.store", "core.managed_cursor", "core.cursor_codec")
BROKER_STORES = ("metadata", "ledgers")


def edge_modules() -> list[Path]:
    return sorted(
        path
        for edge in EDGES
        if (ROOT / edge).is_dir()
        for path in (ROOT / edge).rglob("*.py")
        if ".venv" not in path.parts
    )


def _is_store(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in STORE_MODULES)


def _is_private(module: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in module.split("."))


def _broker_name(node: ast.expr) -> bool:
    """``broker``, ``self.broker``, ``ctx.broker``, ``later_broker``: a name bound to a Broker."""
    if isinstance(node, ast.Name):
        return node.id.lower().endswith("broker")
    if isinstance(node, ast.Attribute):
        return node.attr.lower().endswith("broker")
    return False


def violations(source: str, filename: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "core":
                    continue
                if _is_store(alias.name):
                    found.append(f"{where}: imports store module {alias.name}")
                elif _is_private(alias.name):
                    found.append(f"{where}: imports private module {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "core":
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _is_store(node.module) or _is_store(full):
                    found.append(f"{where}: imports store module {full}")
                elif _is_private(node.module) or alias.name.startswith("_"):
                    found.append(f"{where}: imports private name {full}")
        elif isinstance(node, ast.Attribute):
            if node.attr == "_cursor":
                found.append(f"{where}: reaches a cursor (._cursor)")
            elif node.attr in BROKER_STORES and _broker_name(node.value):
                found.append(f"{where}: reaches the Broker's store (.{node.attr})")
    return found


def test_the_checker_catches_each_kind() -> None:
    bad = (
        "import core.store.metadata\n"
        "from core.store import ledger\n"
        "from core.managed_cursor import ManagedCursor\n"
        "from core import cursor_codec\n"
        "from core.broker import _helper\n"
        "x = broker.metadata.ledgers('t')\n"
        "y = self.broker.ledgers\n"
        "z = broker._cursor('t', 's')\n"
    )
    assert len(violations(bad, "bad.py")) == 8
    good = (
        "from core import Broker, TopicStats\n"
        "from core.topic_scan import TopicScan\n"
        "import core.errors\n"
        "stats = broker.topic_stats('admin', 't')\n"
        "meta = document.metadata\n"
    )
    assert violations(good, "good.py") == []


def test_some_edge_modules_are_checked() -> None:
    names = {path.relative_to(ROOT).parts[0] for path in edge_modules()}
    assert {"cli", "spark_apps"} <= names


@pytest.mark.parametrize("path", edge_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_edges_use_only_the_public_core(path: Path) -> None:
    found = violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)

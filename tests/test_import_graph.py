"""The Broker and ``cursorops.core``'s public API are the only way in for every front door.

Every module outside ``cursorops.core`` that ships (``cursorops.cli``, ``cursorops.wire``,
``cursorops.spark``, ``cursorops.rest``, ``cursorops.airflow``, ``dags``, ``plugins``) is parsed
with ``ast``; the
test fails when one of them

- imports a private ``core`` name (a leading underscore, module or name);
- imports a store module: ``cursorops.core.store`` (any),
  ``cursorops.core.domain.acks.cursor_codec``;
- imports one of the Broker's collaborators (``cursorops.core.services.broker.admin``, ...): the
  façade ``cursorops.core.services.broker`` is the way in;
- reaches a Broker's stores or cursors: ``<x>.metadata``, ``<x>.ledgers`` or
  ``<x>.context`` on a name spelled ``broker`` (or ending in ``broker``),
  ``<x>.metadata`` or ``<x>.ledgers`` on any ``.context``, or any ``._cursor``.

Inside ``core/services/broker/`` the layering is the other way round: the collaborators
may use the stores (``cursorops.core.store``), but none imports the façade or an edge,
and the shared context imports no collaborator but the authorization.

``tests/`` and ``benchmarks/`` are left out on purpose: tests check core's
internals, and the benchmarks measure them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EDGES = {
    "cursorops/cli": "cursorops.cli",
    "cursorops/wire": "cursorops.wire",
    "cursorops/rest": "cursorops.rest",
    "cursorops/airflow": "cursorops.airflow",
    "cursorops/operations": "cursorops.operations",
    "cursorops/local": "cursorops.local",
    "spark_apps": "cursorops.spark",
    "dags": "dags",
    "plugins": "plugins",
}
"""Each edge's folder in the checkout, and its module path."""
CORE = "cursorops.core"
STORE_MODULES = ("cursorops.core.store", "cursorops.core.domain.acks.cursor_codec")
BROKER_STORES = ("metadata", "ledgers")
BROKER_INTERNALS = (*BROKER_STORES, "context")
FACADE = "cursorops.core.services.broker"
COLLABORATORS = sorted(
    p for p in (ROOT / "core" / "services" / "broker").glob("*.py") if p.name != "__init__.py"
)


def edge_modules() -> list[Path]:
    return sorted(
        path
        for edge in EDGES
        if (ROOT / edge).is_dir()
        for path in (ROOT / edge).rglob("*.py")
        if ".venv" not in path.parts
    )


def _in_core(module: str) -> bool:
    return module == CORE or module.startswith(CORE + ".")


def _is_store(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in STORE_MODULES)


def _is_collaborator(module: str) -> bool:
    return module.startswith(FACADE + ".")


def _is_private(module: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in module.split("."))


def _broker_name(node: ast.expr) -> bool:
    """``broker``, ``self.broker``, ``ctx.broker``, ``later_broker``: a name bound to a Broker."""
    if isinstance(node, ast.Name):
        return node.id.lower().endswith("broker")
    if isinstance(node, ast.Attribute):
        return node.attr.lower().endswith("broker")
    return False


def _collaborator_modules() -> set[str]:
    return {f"{FACADE}.{path.stem}" for path in COLLABORATORS}


def violations(source: str, filename: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _in_core(alias.name):
                    continue
                if _is_store(alias.name):
                    found.append(f"{where}: imports store module {alias.name}")
                elif _is_collaborator(alias.name):
                    found.append(f"{where}: imports a Broker collaborator {alias.name}")
                elif _is_private(alias.name):
                    found.append(f"{where}: imports private module {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not _in_core(node.module):
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _is_store(node.module) or _is_store(full):
                    found.append(f"{where}: imports store module {full}")
                elif _is_collaborator(node.module) or (
                    node.module == FACADE and full in _collaborator_modules()
                ):
                    found.append(f"{where}: imports a Broker collaborator {full}")
                elif _is_private(node.module) or alias.name.startswith("_"):
                    found.append(f"{where}: imports private name {full}")
        elif isinstance(node, ast.Attribute):
            if node.attr == "_cursor":
                found.append(f"{where}: reaches a cursor (._cursor)")
            elif node.attr in BROKER_INTERNALS and _broker_name(node.value):
                found.append(f"{where}: reaches the Broker's store (.{node.attr})")
            elif (
                node.attr in BROKER_STORES
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "context"
            ):
                found.append(f"{where}: reaches the Broker's store (.context.{node.attr})")
    return found


def test_the_checker_catches_each_kind() -> None:
    bad = (
        "import cursorops.core.store.metadata\n"
        "from cursorops.core.store import ledger\n"
        "from cursorops.core.store.cursor_state import replay\n"
        "from cursorops.core.domain.acks import cursor_codec\n"
        "from cursorops.core.services.broker import _helper\n"
        "x = broker.metadata.ledgers('t')\n"
        "y = self.broker.ledgers\n"
        "z = broker._cursor('t', 's')\n"
        "from cursorops.core.services.broker.workflow import Workflow\n"
        "import cursorops.core.services.broker.admin\n"
        "from cursorops.core.services.broker import analysis\n"
        "c = broker.context\n"
        "m = self.broker.workflow.context.metadata\n"
    )
    assert len(violations(bad, "bad.py")) == 13
    good = (
        "from cursorops.core import Broker, TopicStats\n"
        "from cursorops.core.domain.analysis.topic_scan import TopicScan\n"
        "import cursorops.core.domain.errors\n"
        "from cursorops.core.services.broker import Broker, wall_clock_ms\n"
        "stats = broker.analysis.topic_stats('admin', 't')\n"
        "meta = document.metadata\n"
    )
    assert violations(good, "good.py") == []


def test_some_edge_modules_are_checked() -> None:
    names = {edge for path in edge_modules() for edge in EDGES if path.is_relative_to(ROOT / edge)}
    assert set(EDGES) == names


@pytest.mark.parametrize("path", edge_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_edges_use_only_the_public_core(path: Path) -> None:
    found = violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports absolutely, with ``from m import n`` also as ``m.n``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_broker_is_made_of_collaborators() -> None:
    assert {p.stem for p in COLLABORATORS} >= {
        "access",
        "admin",
        "analysis",
        "context",
        "produce",
        "read",
        "workflow",
    }


@pytest.mark.parametrize("path", COLLABORATORS, ids=lambda p: p.stem)
def test_a_collaborator_imports_neither_the_facade_nor_an_edge(path: Path) -> None:
    imported = _imported(path)
    assert FACADE not in imported, f"{path.name} imports the façade"
    edges = sorted(
        m for m in imported for edge in EDGES.values() if m == edge or m.startswith(edge + ".")
    )
    assert not edges, f"{path.name} imports an edge: {edges}"


def test_the_shared_context_imports_no_collaborator_but_the_authorization() -> None:
    for name in ("context", "access"):
        imported = _imported(ROOT / "core" / "services" / "broker" / f"{name}.py")
        others = _collaborator_modules() - {f"{FACADE}.access"}
        assert not imported & others, f"{name}.py imports {sorted(imported & others)}"


@pytest.mark.parametrize("path", COLLABORATORS, ids=lambda p: p.stem)
def test_no_collaborator_is_over_500_lines(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= 500, f"{path.name} has {lines} lines"


@pytest.mark.parametrize(
    "path", sorted((ROOT / "core" / "domain" / "acks").glob("*.py")), ids=lambda p: p.stem
)
def test_the_acks_folder_imports_no_store(path: Path) -> None:
    """Ack sets, range sets, the cursor and its encoding are pure: cursor state is stored
    and changed by the transactions of ``cursorops.core.store``, never from here."""
    stores = sorted(
        m
        for m in _imported(path)
        if m == "cursorops.core.store" or m.startswith("cursorops.core.store.")
    )
    assert not stores, f"{path.name} imports {stores}"


INSTALL_WITHOUT_EXTRAS = {
    "core": "cursorops.core",
    "cursorops/wire": "cursorops.wire",
    "cursorops/rest": "cursorops.rest",
    "cursorops/cli": "cursorops.cli",
    "cursorops/operations": "cursorops.operations",
    "cursorops/local": "cursorops.local",
}
"""What ``pip install cursorops`` runs with no extras: the broker, the store, the CLI and
the REST app. None of it imports Airflow, cursorops's Airflow integration or pyspark."""
EXTRAS_ONLY = ("airflow", "cursorops.airflow", "pyspark")
AIRFLOW_LAUNCHER = ("cursorops.airflow.local_airflow", "cursorops.airflow.bundle")
"""The modules of the Airflow integration the CLI (``cursorops demo --protocol``) and
``cursorops.local`` (the Spark Connect server's script) reach: the launcher starts Airflow
as another process and drives it over HTTP, and the bundle says where its scripts and the
DAGs are; neither imports anything of Airflow itself (checked below)."""


def _launcher(module: str) -> bool:
    return module in AIRFLOW_LAUNCHER or module.rpartition(".")[0] in AIRFLOW_LAUNCHER


def _extras_only(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in EXTRAS_ONLY)


def _without_extras() -> list[Path]:
    return sorted(
        path
        for folder in INSTALL_WITHOUT_EXTRAS
        for path in (ROOT / folder).rglob("*.py")
        if ".venv" not in path.parts
    )


@pytest.mark.parametrize("path", _without_extras(), ids=lambda p: str(p.relative_to(ROOT)))
def test_what_installs_without_extras_imports_no_airflow_and_no_pyspark(path: Path) -> None:
    imported = _imported(path)
    if path.is_relative_to(ROOT / "cursorops" / "cli") or path.is_relative_to(
        ROOT / "cursorops" / "local"
    ):
        imported = {m for m in imported if not _launcher(m)}
    found = sorted(m for m in imported if _extras_only(m))
    assert not found, f"{path.relative_to(ROOT)} imports {found}"


@pytest.mark.parametrize("name", ["local_airflow.py", "bundle.py"])
def test_the_airflow_launcher_imports_nothing_of_airflow(name: str) -> None:
    path = ROOT / "cursorops" / "airflow" / name
    found = sorted(
        m
        for m in _imported(path)
        if (m == "airflow" or m.startswith("airflow.") or m.startswith("cursorops.airflow."))
        and not _launcher(m)
    )
    assert not found, f"{path.name} imports {found}"


def test_the_extras_rule_catches_each_kind(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import airflow\n"
        "from airflow.configuration import conf\n"
        "def f():\n"
        "    from cursorops.airflow.environment import pulsar_role\n"
        "    import pyspark.sql\n"
        "from cursorops import airflow\n"
    )
    found = sorted(m for m in _imported(bad) if _extras_only(m))
    assert found == [
        "airflow",
        "airflow.configuration",
        "airflow.configuration.conf",
        "cursorops.airflow",
        "cursorops.airflow.environment",
        "cursorops.airflow.environment.pulsar_role",
        "pyspark.sql",
    ]

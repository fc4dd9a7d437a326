"""``core/`` is three layers, and every import goes down, never up.

- ``cursorops.core.domain``: pure values and rules; imports no store and no service;
- ``cursorops.core.store``: the stores; may import the domain, never a service;
- ``cursorops.core.services``: the Broker and its collaborators, the gated operations,
  dispatch, the producer; may import the domain and the store.

``cursorops.core`` itself (its ``__init__``, the lazy public API) is above the three: no
layer imports it, and no module of ``core`` imports an edge (``cursorops.cli``,
``cursorops.wire``, ...) or sits outside a layer. Every module of ``core/`` is parsed with
``ast``, and every import counts: those inside functions and under ``TYPE_CHECKING`` too,
since a layer that needs an upper one's types is tied to its design all the same.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.test_architecture import ROOT, shipped_modules

CORE = "cursorops.core"
LAYERS = ("domain", "store", "services")
"""From the bottom up: a layer may import those before it."""


def layer(module: str) -> str | None:
    """The layer ``module`` of ``cursorops`` is in: one of :data:`LAYERS`; ``"api"`` for
    ``cursorops.core`` itself; ``"edge"`` for a module outside ``cursorops.core``; None
    for a module of ``cursorops.core`` in no layer."""
    if module == CORE:
        return "api"
    if not module.startswith(CORE + "."):
        return "edge"
    top = module.split(".")[2]
    return top if top in LAYERS else None


def may_import(importer: str, imported: str) -> bool:
    """Whether a module of layer ``importer`` may import one of layer ``imported``."""
    return imported in LAYERS and LAYERS.index(imported) <= LAYERS.index(importer)


def imports(path: Path, package: str) -> Iterator[tuple[int, str]]:
    """Each import of ``path`` (line, what it may name, most precise first, as
    ``p.m`` for ``from p import m``): every statement, in functions and under
    ``TYPE_CHECKING`` too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                module = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [module])])
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module ``name`` names (``p.m`` is the module ``p.m`` when there is one, else
    ``p``), or None for a module that does not ship (the standard library, a package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def forbidden(modules: Mapping[str, Path], root: Path) -> list[str]:
    """Every import of a module of ``cursorops.core`` that the layers forbid, as
    ``<file>:<line>: <layer> module <module> imports <imported> (<layer>)``."""
    found = []
    for name, path in sorted(modules.items()):
        if name != CORE and not name.startswith(CORE + "."):
            continue
        where = path.relative_to(root).as_posix()
        own = layer(name)
        if own is None:
            found.append(f"{where}: {name} is in no layer ({', '.join(LAYERS)})")
            continue
        if own == "api":
            continue  # the public API may name any module below it
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for line, candidate in imports(path, package):
            imported = resolve(candidate, modules)
            if imported is None or imported == name:
                continue
            other = layer(imported)
            if other is None or not may_import(own, other):
                kind = other or "no layer"
                found.append(f"{where}:{line}: {own} module {name} imports {imported} ({kind})")
    return found


def test_every_import_of_core_goes_down_the_layers() -> None:
    modules = shipped_modules()
    assert any(layer(name) == "services" for name in modules)
    found = forbidden(modules, ROOT)
    assert found == [], "\n".join(found)


def test_every_layer_is_a_folder_of_core() -> None:
    assert sorted(p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").is_file()) == [
        "domain",
        "services",
        "store",
    ]


def test_the_measure_catches_each_forbidden_arrow(tmp_path: Path) -> None:
    files = {
        "core/__init__.py": "from cursorops.core.services.broker import Broker\n",
        "core/domain/__init__.py": "",
        "core/domain/values.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from cursorops.core.store.ledger import LedgerStore\n"
            "def f():\n"
            "    from cursorops.core.services import broker\n"
        ),
        "core/domain/rules.py": "from cursorops.core.domain import values\nimport cursorops.core\n",
        "core/store/__init__.py": "",
        "core/store/ledger.py": (
            "from cursorops.core.domain.values import f\nfrom ..services.broker import Broker\n"
        ),
        "core/services/__init__.py": "",
        "core/services/broker.py": (
            "from cursorops.core.store.ledger import LedgerStore\n"
            "from cursorops.core.domain.rules import x\n"
            "from cursorops.cli import main\n"
        ),
        "core/loose.py": "",
        "cursorops/__init__.py": "",
        "cursorops/cli.py": "",
    }
    modules = {}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        parts = path.relative_to(tmp_path).with_suffix("").parts
        dotted = ["cursorops", *parts] if parts[0] == "core" else list(parts)
        if dotted[-1] == "__init__":
            dotted.pop()
        modules[".".join(dotted)] = path
    found = forbidden(modules, tmp_path)
    assert found == [
        "core/domain/rules.py:2: domain module cursorops.core.domain.rules imports "
        "cursorops.core (api)",
        "core/domain/values.py:3: domain module cursorops.core.domain.values imports "
        "cursorops.core.store.ledger (store)",
        "core/domain/values.py:5: domain module cursorops.core.domain.values imports "
        "cursorops.core.services.broker (services)",
        "core/loose.py: cursorops.core.loose is in no layer (domain, store, services)",
        "core/services/broker.py:3: services module cursorops.core.services.broker imports "
        "cursorops.cli (edge)",
        "core/store/ledger.py:2: store module cursorops.core.store.ledger imports "
        "cursorops.core.services.broker (services)",
    ]

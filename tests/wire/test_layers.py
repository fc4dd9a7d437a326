"""The binary protocol's layers, held by reading its source with ``ast``.

``cursorops/wire/`` is a codec (``frames``, ``proto``, ``commands``, ``entries``), a
per-connection state machine (``session``) over what connections share
(``service``), command handlers by concern (``handlers/``) and the asyncio server
(``server``). The test fails when

- a class grows over :data:`MAX_CLASS_LINES` lines, or a function over
  :data:`MAX_FUNCTION_LINES` (the codec's few long decoders are listed in
  :data:`LONG_FUNCTIONS`, with their sizes, so none grows unnoticed);
- an import circle appears among the package's modules, ``TYPE_CHECKING`` imports
  included (a circle there still ties the modules together);
- a layer imports one above it: the session or the service a handler or the server,
  ``membership`` or ``schemas`` anything above the service.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
WIRE = ROOT / "cursorops" / "wire"
PACKAGE = "cursorops.wire"
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 80
LONG_FUNCTIONS = {
    # The codec is kept as it is: one decoder of a send, read top to bottom.
    ("entries", "entry_of_send"): 97,
}
"""(module, function) -> its length now: the codec's, left whole on purpose."""
ABOVE = {
    "service": ("session", "handlers", "server", "standalone"),
    "session": ("handlers", "server", "standalone"),
    "handlers": ("server", "standalone"),
    "membership": ("session", "handlers", "server", "standalone"),
    "schemas": ("service", "session", "handlers", "server", "standalone"),
}
"""Each module (or subpackage) and the layers it must not import."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(WIRE.rglob("*.py")):
        parts = path.relative_to(WIRE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((PACKAGE, *parts))] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """The package's modules ``module`` imports (its parent packages too, which Python
    runs first), wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    found = set()
    for name in names:
        parts = name.split(".")
        for end in range(3, len(parts) + 1):
            candidate = ".".join(parts[:end])
            if candidate in MODULES and candidate != module:
                found.add(candidate)
    # A package's own modules import it first: that is not an edge back.
    return {name for name in found if not module.startswith(name + ".")}


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _circle() -> list[str] | None:
    """One import circle among the package's modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for other in sorted(GRAPH[module]):
            if state.get(other) == 1:
                return [*stack[stack.index(other) :], other]
            if other not in state and (found := visit(other)) is not None:
                return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(GRAPH):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _definitions() -> list[tuple[str, Definition, int]]:
    found: list[tuple[str, Definition, int]] = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                assert node.end_lineno is not None
                found.append((module, node, node.end_lineno - node.lineno + 1))
    return found


def test_the_layers_are_there() -> None:
    for name in ("session", "service", "server", "handlers", "frames", "failures"):
        assert f"{PACKAGE}.{name}" in MODULES
    for concern in ("producers", "consumers", "lookups", "admin"):
        assert f"{PACKAGE}.handlers.{concern}" in MODULES


def test_no_class_is_over_400_lines() -> None:
    long = [
        f"{module}.{node.name}: {lines} lines"
        for module, node, lines in _definitions()
        if isinstance(node, ast.ClassDef) and lines > MAX_CLASS_LINES
    ]
    assert not long


def test_no_function_is_over_80_lines() -> None:
    long = []
    for module, node, lines in _definitions():
        if isinstance(node, ast.ClassDef):
            continue
        allowed = LONG_FUNCTIONS.get((module.rpartition(".")[2], node.name), MAX_FUNCTION_LINES)
        if lines > allowed:
            long.append(f"{module}.{node.name}: {lines} lines")
    assert not long


def test_no_import_circle() -> None:
    assert _circle() is None


@pytest.mark.parametrize("lower", sorted(ABOVE))
def test_a_layer_imports_none_above_it(lower: str) -> None:
    importers = [
        m for m in MODULES if m == f"{PACKAGE}.{lower}" or m.startswith(f"{PACKAGE}.{lower}.")
    ]
    assert importers
    forbidden = {f"{PACKAGE}.{name}" for name in ABOVE[lower]}
    wrong = {
        f"{importer} imports {imported}"
        for importer in importers
        for imported in GRAPH[importer]
        if any(imported == f or imported.startswith(f + ".") for f in forbidden)
    }
    assert not wrong


def test_the_circle_finder_finds_one() -> None:
    """The check above can fail: a circle made up here is found."""
    GRAPH["cursorops.wire.frames"] = GRAPH["cursorops.wire.frames"] | {"cursorops.wire.server"}
    try:
        circle = _circle()
    finally:
        GRAPH["cursorops.wire.frames"] -= {"cursorops.wire.server"}
    assert circle is not None and circle[0] == circle[-1]

"""The architecture's numbers, measured from the code: what a gated operation costs in
shipped files, how wide the Broker's façade is, and the largest import cycle.

Each test asserts the number reached, so a change that makes one worse fails here and
says which; lower a bound when the code gets better. The measures are coarse on purpose:
a collaborator that holds an operation's logic without importing its slice is not
counted against it.

- **Files per gated operation**: its declaration (the module of ``cursorops/operations``
  that names it), its slice (the module of ``core/services/gating`` that defines its
  ``GatedOperation`` and its arguments), the collaborators of ``core/services/broker`` that import
  that slice (the façade, whose doors every operation shares, and ``gated.py``, the
  services every operation plans and applies through, do not count)
  and its DAG (``dags/<workflow>.py``).
- **The façade**: the Broker's public methods, and of those the pure pass-throughs (one
  statement that hands its arguments to a collaborator or to a slice).
- **The largest import cycle**: the largest set of ``cursorops`` modules each of which
  imports every other one, directly or not (a strongly connected component of the import
  graph). Every import statement counts, those inside functions and under
  ``TYPE_CHECKING`` too: a cycle there still ties the modules' designs together. The
  largest cycle of the imports that run (``TYPE_CHECKING`` left out) is measured too: one
  there makes the import order matter.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

from cursorops.core.services.broker import Broker
from cursorops.core.services.gating.registry import GATED_OPERATIONS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    ("cursorops", "cursorops"),
    ("core", "cursorops.core"),
    ("spark_apps", "cursorops.spark"),
)
"""Each shipped folder of the checkout and its module path (``cursorops/core`` and
``cursorops/spark`` are links to the last two)."""
SHARED_DOORS = {"core/services/broker/__init__.py", "core/services/broker/gated.py"}

FILES_PER_OPERATION = 3
"""The target, reached: declaration, slice, DAG (skip-matching has no CLI or REST
declaration: only its DAG asks for it)."""
PUBLIC_METHODS = 6
"""The target was 40: the doors ``request``, ``preview_request``, ``plan_request`` and
``apply_approved_plan``, and the lifecycle ``close`` and ``migrate_metadata``; everything
else is asked of the named collaborator (``broker.admin``, ``broker.reading``, ...). 93
before the façade became its doors."""
PASS_THROUGHS = 0
"""None hands a call to a collaborator or a slice: the doors plan and apply through the
gated operations' registry themselves, and ``close`` ends the broker's life in the cluster
before it closes the store. 92 before the façade became its doors."""
LARGEST_IMPORT_CYCLE = 4
"""Four modules of ``cursorops.airflow`` (the gate, its steps, the approval and the closing
record); 33 before the operations became slices, 27 before core's three layers and the
façade's doors."""
LARGEST_RUNTIME_IMPORT_CYCLE = 4
"""Four modules of ``cursorops.airflow``, as before the operations became slices."""


def operation_files() -> dict[str, set[str]]:
    """Each gated operation's shipped files (see the module docstring)."""
    declarations = sorted((ROOT / "cursorops" / "operations").glob("*.py"))
    modules = shipped_modules()
    graph = import_graph()

    def file_of(module: str) -> str:
        return modules[module].relative_to(ROOT).as_posix()

    found: dict[str, set[str]] = {}
    for operation in GATED_OPERATIONS:
        slice_module = type(operation).__module__
        files = {file_of(slice_module), file_of(operation.arguments.__module__)}
        files |= {
            path.relative_to(ROOT).as_posix()
            for path in declarations
            if f'"{operation.name}"' in path.read_text(encoding="utf-8")
        }
        files |= {
            file_of(module)
            for module, imported in graph.items()
            if module.startswith("cursorops.core.services.broker") and slice_module in imported
        } - SHARED_DOORS
        files.add(f"dags/{operation.workflow}.py")
        found[operation.name] = files
    return found


def test_a_gated_operation_is_its_declaration_its_slice_and_its_dag() -> None:
    for name, files in operation_files().items():
        assert all((ROOT / f).is_file() for f in files), files
        assert len(files) <= FILES_PER_OPERATION, f"{name}: {sorted(files)}"


def _is_pass_through(name: str) -> bool:
    """One statement that calls ``self.<part>.<name>(...)`` or ``<slice>.<name>(self.gated,
    ...)``, every argument one of the method's own parameters."""
    function = ast.parse(textwrap.dedent(inspect.getsource(getattr(Broker, name)))).body[0]
    assert isinstance(function, ast.FunctionDef)
    if len(function.body) != 1 or not isinstance(function.body[0], (ast.Return, ast.Expr)):
        return False
    call = function.body[0].value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr != name:
        return False
    own = {a.arg for a in (*function.args.args, *function.args.kwonlyargs)}
    arguments = [*call.args, *(k.value for k in call.keywords)]
    return all(
        (isinstance(a, ast.Name) and a.id in own) or ast.unparse(a) == "self.gated"
        for a in arguments
    )


def public_methods() -> list[str]:
    return sorted(n for n, v in vars(Broker).items() if not n.startswith("_") and callable(v))


def test_the_facade_is_no_wider_than_reached() -> None:
    methods = public_methods()
    passing = [n for n in methods if _is_pass_through(n)]
    assert len(methods) <= PUBLIC_METHODS, len(methods)
    assert len(passing) <= PASS_THROUGHS, len(passing)


def shipped_modules() -> dict[str, Path]:
    found = {}
    for folder, prefix in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[:2] == ("airflow", "dags") or "migrations" in parts:
                continue  # the DAGs are a link to dags/; migrations are Alembic's scripts
            name = [*prefix.split("."), *parts]
            if name[-1] == "__init__":
                name.pop()
            found[".".join(name)] = path
    return found


def _statements(node: ast.AST, type_checking: bool) -> Iterator[ast.AST]:
    """``node`` and every node in it; with ``type_checking`` False, none of an
    ``if TYPE_CHECKING:`` block."""
    if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
        for other in node.orelse:
            yield from _statements(other, type_checking)
        return
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _statements(child, type_checking)


def _imports(path: Path, package: str, type_checking: bool) -> Iterator[tuple[str, ...]]:
    """Each import of ``path``: what it may name, most precise first."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in _statements(tree, type_checking):
        if isinstance(node, ast.Import):
            yield from ((alias.name,) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                module = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [module])])
            yield from ((f"{module}.{alias.name}", module) for alias in node.names)


def import_graph(*, type_checking: bool = True) -> dict[str, set[str]]:
    """Each shipped module and the shipped modules it imports (``from p import m`` imports
    the module ``p.m`` when there is one, else ``p``); ``type_checking``: with the imports
    of ``if TYPE_CHECKING:`` blocks."""
    modules = shipped_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported = set()
        for candidates in _imports(path, package, type_checking):
            for candidate in candidates:
                while candidate and candidate not in modules:
                    candidate = candidate.rpartition(".")[0]
                if candidate:
                    imported.add(candidate)
                    break
        imported.discard(name)
        graph[name] = imported
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``graph`` (Tarjan's), largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.add(other)
                if other == node:
                    break
            found.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for node in graph:
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found, key=len, reverse=True)


def test_the_measure_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph)[0] == {"a", "b", "c"}


def test_the_largest_import_cycle_is_no_larger_than_reached() -> None:
    largest = cycles(import_graph())[0]
    assert len(largest) <= LARGEST_IMPORT_CYCLE, sorted(largest)


def test_the_largest_cycle_of_imports_that_run_is_no_larger_than_reached() -> None:
    largest = cycles(import_graph(type_checking=False))[0]
    assert len(largest) <= LARGEST_RUNTIME_IMPORT_CYCLE, sorted(largest)

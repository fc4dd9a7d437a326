"""Servers are started in one way: by ``cursorops.local`` or the Airflow launcher.

A ``subprocess.Popen`` in ``tests/``, ``benchmarks/`` or the CLI that starts a
``cursorops standalone``, a PostgreSQL (``initdb``, ``pg_ctl``, ``postgres``), Airflow or a
Spark server fails here: it would be one more copy of the start-up, the readiness wait
and the clean-up (process groups, the run's marker) that :mod:`cursorops.local` and
:mod:`cursorops.airflow.local_airflow` already do, and a copy is where a leftover
process or a silent start-up failure comes from. Such a command is recognised by the
strings of the function that calls ``Popen`` (and of the module-level names it reads).

The files listed in :data:`ALLOWED` start one of these on purpose: the command itself is
what they test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("tests", "benchmarks", "cursorops/cli")
HARNESS = ("cursorops/local", "cursorops/airflow/local_airflow.py")
ALLOWED = {
    "cursorops/cli/home.py": "the CLI's background standalone, a feature of the CLI",
    "tests/cli/test_standalone_home.py": "the standalone command's own flags, home and lock",
    "tests/packaging/test_no_extras.py": "the standalone of an install without the extras",
    "tests/test_airflow_launcher.py": "scripts/airflow-up.sh's own signals and clean-up",
    "tests/test_airflow_up_postgres.py": "scripts/airflow-up.sh on a PostgreSQL of its own",
    "tests/test_topology.py": "scripts/topology-up.sh itself",
    "tests/test_one_harness.py": "this rule's own examples",
}
"""File → why it starts one of these servers itself."""

PROGRAMS = {
    "initdb": "PostgreSQL",
    "pg_ctl": "PostgreSQL",
    "postgres": "PostgreSQL",
    "airflow": "Airflow",
    "spark-submit": "Spark",
    "spark-class": "Spark",
    "start-connect-server.sh": "Spark",
    "spark-connect-up.sh": "Spark",
}
"""A string naming one of these programs (alone, or as a path's last part) starts that."""


def _strings(node: ast.AST) -> set[str]:
    return {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _module_names(tree: ast.Module) -> dict[str, set[str]]:
    """Each module-level name → the strings of the value assigned to it."""
    found: dict[str, set[str]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = _strings(statement.value)
    return found


def _is_popen(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "Popen") or (
        isinstance(func, ast.Name) and func.id == "Popen"
    )


def _servers(strings: set[str]) -> set[str]:
    found = set()
    for text in strings:
        program = text.rsplit("/", 1)[-1]
        if program in PROGRAMS:
            found.add(PROGRAMS[program])
        if text.startswith("org.apache.spark.deploy."):
            found.add("Spark")
    if "standalone" in strings and any("cursorops" in text for text in strings):
        found.add("cursorops standalone")
    return found


def started_servers(source: str) -> list[tuple[int, str]]:
    """(line, server) of each ``Popen`` in ``source`` that starts one of the servers."""
    tree = ast.parse(source)
    names = _module_names(tree)
    found = []
    scopes: list[ast.AST] = [
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    seen: set[int] = set()
    for scope in scopes:
        calls = [node for node in ast.walk(scope) if _is_popen(node) and id(node) not in seen]
        if not calls:
            continue
        seen.update(id(call) for call in calls)
        strings = _strings(scope)
        for node in ast.walk(scope):
            if isinstance(node, ast.Name) and node.id in names:
                strings |= names[node.id]
        for server in sorted(_servers(strings)):
            found.extend((call.lineno, server) for call in calls)
    return found


def _scanned() -> list[Path]:
    files = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if ".venv" in path.parts or relative.startswith(HARNESS):
                continue
            files.append(path)
    return files


@pytest.mark.parametrize("path", _scanned(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_server_is_started_outside_the_harness(path: Path) -> None:
    relative = path.relative_to(ROOT).as_posix()
    found = started_servers(path.read_text())
    if relative in ALLOWED:
        return
    assert not found, (
        f"{relative} starts {sorted({server for _, server in found})} itself "
        f"(lines {sorted({line for line, _ in found})}): use cursorops.local "
        "or cursorops.airflow.local_airflow"
    )


def test_every_allowed_file_still_starts_one() -> None:
    """An exception that no longer starts anything goes from :data:`ALLOWED`."""
    for relative in ALLOWED:
        if relative == "tests/test_one_harness.py":
            continue
        assert started_servers((ROOT / relative).read_text()), relative


@pytest.mark.parametrize(
    "source, server",
    [
        (
            "import subprocess, sys\n"
            "def f(home):\n"
            "    argv = [sys.executable, '-m', 'cursorops.cli.main', '--home', home]\n"
            "    return subprocess.Popen(argv + ['standalone'])\n",
            "cursorops standalone",
        ),
        (
            "from subprocess import Popen\n"
            "def f(bindir):\n"
            "    return Popen([bindir / 'pg_ctl', '-D', 'data', 'start'])\n",
            "PostgreSQL",
        ),
        (
            "import subprocess\n"
            "BIN = '/venv/bin/airflow'\n"
            "def f():\n"
            "    return subprocess.Popen([BIN, 'api-server'])\n",
            "Airflow",
        ),
        (
            "import subprocess\n"
            "def f(spark_home):\n"
            "    return subprocess.Popen([spark_home + '/sbin/start-connect-server.sh'])\n",
            "Spark",
        ),
        (
            "import subprocess\n"
            "def f(cls):\n"
            "    return subprocess.Popen([cls, 'org.apache.spark.deploy.master.Master'])\n",
            "Spark",
        ),
    ],
)
def test_the_rule_catches_each_server(source: str, server: str) -> None:
    assert [found for _, found in started_servers(source)] == [server]


def test_the_rule_lets_other_processes_and_one_shot_commands_pass() -> None:
    source = (
        "import subprocess, sys\n"
        "def client(url):\n"
        "    return subprocess.Popen([sys.executable, '-c', 'import pulsar', url])\n"
        "def migrate():\n"
        "    subprocess.run(['airflow', 'db', 'migrate'], check=True)\n"
    )
    assert started_servers(source) == []

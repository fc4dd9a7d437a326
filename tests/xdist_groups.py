"""How ``make test`` shares the suite between its xdist workers (``-n 2 --dist loadgroup``).

A unit of work goes to one worker whole. Every test on the session's ``airflow
standalone`` (the ``airflow`` fixture) is one unit, queued first: one worker runs them
all on one Airflow while the other takes the rest, and no second Airflow starts. Every
other test module is a unit of its own, so its module-scoped servers start once.

pytest-xdist's own ``loadgroup`` finds groups in a suffix it writes into each nodeid,
which pytest 9 no longer lets a plugin change; here the workers write each test's unit
into a file named by the controller, and the controller's scheduler reads it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

AIRFLOW_UNIT = "airflow"
LONG_UNITS = (
    "tests/dags/test_xcom_walk_airflow.py",
    "tests/packaging/test_airflow_extra.py",
    "tests/spark_apps/test_cluster.py",
    "tests/test_airflow_ctrl_c.py",
    "tests/test_topology.py",
    "tests/packaging/test_no_extras.py",
    "tests/test_airflow_launcher.py",
    "tests/test_topology_load.py",
    "tests/spark_apps/test_session_sharing.py",
    "tests/protocol/test_entries_property.py",
    "tests/test_benchmarks_quick.py",
)
"""The other units that take a minute or more, longest first (``make test``'s slowest
durations): queued right after the Airflow unit, so the other worker runs them while the
Airflow unit runs, and the run never ends on one of them with the other worker idle."""
_UNITS_KEY = "cursorops_units_file"
_UNITS_FILE = pytest.StashKey[Path]()
_BUSY = pytest.StashKey[dict[str, float]]()
"""Controller: seconds of setup, call and teardown each worker spent, by worker id."""


def pytest_configure(config: pytest.Config) -> None:
    """Controller under ``--dist loadgroup``: a folder for the file the workers write."""
    if getattr(config, "workerinput", None) is None and config.getoption("dist", None) == (
        "loadgroup"
    ):
        folder = Path(tempfile.mkdtemp(prefix="cursorops-xdist-"))
        config.stash[_UNITS_FILE] = folder / "units.tsv"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Controller: add each phase's time to the worker that ran it."""
    node = getattr(report, "node", None)
    if node is None:
        return
    busy = node.config.stash.setdefault(_BUSY, {})
    worker = node.gateway.id
    busy[worker] = busy.get(worker, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Controller: how long each worker was busy, so a run shows which worker bounds it
    (the one with the Airflow unit, or the rest)."""
    busy = config.stash.get(_BUSY, None)
    if not busy:
        return
    terminalreporter.section("time per worker")
    for worker, seconds in sorted(busy.items()):
        terminalreporter.write_line(f"{worker}: {seconds / 60:.1f} min in tests ({seconds:.0f} s)")


def pytest_unconfigure(config: pytest.Config) -> None:
    units = config.stash.get(_UNITS_FILE, None)
    if units is not None:
        shutil.rmtree(units.parent, ignore_errors=True)


def _unit(item: pytest.Item) -> str:
    if AIRFLOW_UNIT in getattr(item, "fixturenames", ()):
        return AIRFLOW_UNIT
    return item.nodeid.split("::", 1)[0]


def _queue_position(item: pytest.Item) -> int:
    """0 for the Airflow unit, then each long unit's place in :data:`LONG_UNITS`, then the
    rest (a stable sort keeps their collected order)."""
    unit = _unit(item)
    if unit == AIRFLOW_UNIT:
        return 0
    if unit in LONG_UNITS:
        return 1 + LONG_UNITS.index(unit)
    return 1 + len(LONG_UNITS)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: tell each worker where to write the units of the tests it collected."""
    units = node.config.stash.get(_UNITS_FILE, None)
    if units is not None:
        node.workerinput[_UNITS_KEY] = str(units)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Worker: the Airflow tests first (the longest unit), then the other long units
    (:data:`LONG_UNITS`), then the rest as collected; and ``nodeid<TAB>unit`` of each test
    into the controller's file."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or _UNITS_KEY not in workerinput:
        return
    items.sort(key=_queue_position)
    target = Path(workerinput[_UNITS_KEY])
    partial = target.with_name(f"{target.name}.{workerinput['workerid']}")
    partial.write_text("".join(f"{item.nodeid}\t{_unit(item)}\n" for item in items))
    os.replace(partial, target)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Controller, under ``--dist loadgroup``: units as above, in the workers' order."""
    units = config.stash.get(_UNITS_FILE, None)
    if units is None:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):  # type: ignore[misc]
        unit_of: dict[str, str] | None = None

        def schedule(self) -> None:
            self.config.option.loadscopereorder = False
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            if self.unit_of is None:
                lines = units.read_text().splitlines()
                self.unit_of = dict(line.split("\t", 1) for line in lines if line)
            return self.unit_of.get(nodeid, nodeid.split("::", 1)[0])

    return UnitScheduling(config, log)

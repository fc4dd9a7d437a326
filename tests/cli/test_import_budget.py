"""The hot commands load only the client: the broker's work happens in the home's standalone.

``topics stats``, ``topics analyze-backlog`` and ``topics skip-messages`` each run
in a new process on a 1,000-message topic, through the home's background standalone
(the first command starts it); the process reports its answer and every module it
imported. The answers are checked too, so a command that failed early (and so imported
little) cannot pass. The command process needs the operation table and the standard
library's sockets; no store, no numpy, no pyarrow, no web framework, not even
``http.client`` (which ``--admin-url`` loads). Correctness
only: how long the commands take is measured by ``benchmarks/cli_latency.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cursorops.cli.home import stop
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

pytestmark = pytest.mark.e2e

TOPIC = "persistent://budget/ns/orders"
MESSAGES = 1_000

HEAVY = (
    "pandas",
    "pyarrow.dataset",
    "pyarrow.compute",
    "pydantic",
    "pyspark",
    "py4j",
    "duckdb",
    "airflow",
    "fastapi",
    "starlette",
    "matplotlib",
    "psycopg",
    "sqlalchemy.dialects.postgresql",
    "alembic",
    "httpx",
    "http.client",
    "ssl",
    "sqlalchemy",
    "numpy",
    "pyarrow",
    "uvicorn",
    "cursorops.core.services.broker",
    "cursorops.core.store",
    "cursorops.core.services.reading",
    "cursorops.core.domain.analysis",
    "cursorops.spark",
    "cursorops.rest",
    "cursorops.wire",
)
"""Modules (and their submodules) none of the three commands may import in its process."""

NEEDED = ("cursorops.cli.transport", "cursorops.operations.declaration", "cursorops.cli.home")
"""What they do need: seeing these proves the report came from a command that ran."""

RUNNER = """
import contextlib, io, json, sys
from cursorops.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "stdout": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def run(home: Path, *args: str) -> tuple[Any, set[str]]:
    """Run one command in a new process: its JSON answer and the modules it imported."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, "--home", str(home), "-o", "json", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["code"] == 0, (args, done.stderr)
    return json.loads(report["stdout"]), set(report["modules"])


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A SQLite home with a 1,000-message topic and two Shared subscriptions from the earliest.

    ``sub`` is only read; ``skipper`` is the one the skip test changes.
    """
    root = tmp_path_factory.mktemp("budget")
    with Broker(Config.from_home(root)) as broker:
        broker.admin.create_tenant("admin", "budget")
        broker.admin.create_namespace("admin", "budget/ns")
        broker.admin.create_topic("admin", TOPIC)
        for name in ("sub", "skipper"):
            broker.admin.create_subscription(
                "admin", TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
            )
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(MESSAGES)]
        )
    yield root
    stop(str(root), None)  # the background standalone the first command started


def test_the_checker_sees_heavy_modules() -> None:
    assert heavy_in({"pandas.core.frame", "pydantic", "airflow.models", "numpyx"}) == [
        "airflow.models",
        "pandas.core.frame",
        "pydantic",
    ]
    assert heavy_in({"pandasx", "sqlalchemyx", "core.dispatcher_names"}) == []
    assert heavy_in({"sqlalchemy.orm", "numpy"}) == ["numpy", "sqlalchemy.orm"]


def test_topics_stats_imports_nothing_heavy(home: Path) -> None:
    stats, modules = run(home, "topics", "stats", TOPIC)
    assert stats["subscriptions"]["sub"]["msgBacklog"] == MESSAGES
    assert set(NEEDED) <= modules
    assert heavy_in(modules) == []


def test_analyze_backlog_imports_nothing_heavy(home: Path) -> None:
    analysis, modules = run(home, "topics", "analyze-backlog", TOPIC, "-s", "sub")
    assert analysis["subscriptions"]["sub"]["messages"] == MESSAGES
    assert set(NEEDED) <= modules
    assert heavy_in(modules) == []


def test_skip_messages_imports_nothing_heavy(home: Path) -> None:
    outcome, modules = run(
        home, "topics", "skip-messages", TOPIC, "-s", "skipper", "--messageId-triplet", "1:3", "1:4"
    )
    assert [m["triplet"] for m in outcome["skipped"]] == ["1:3", "1:4"]
    assert set(NEEDED) <= modules
    assert heavy_in(modules) == []
    stats, _ = run(home, "topics", "stats", TOPIC)
    assert stats["subscriptions"]["skipper"]["msgBacklog"] == MESSAGES - 2

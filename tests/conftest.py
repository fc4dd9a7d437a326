from __future__ import annotations

import gc
import os
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.store.metadata import MetadataStore
from cursorops.local import postgres
from tests import leftovers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cursorops.core.domain.acks.cursor import AckTarget, CursorState
    from cursorops.core.domain.acks.ledger_layout import LedgerLayout
    from cursorops.core.domain.ids.position import Position
    from cursorops.core.services.broker import Broker

PG_URL_ENV = postgres.URL_ENV

pytest_plugins = ["tests.airflow_fixtures", "tests.xdist_groups"]
"""One real Airflow per test session, whichever folders need it; under ``make test``'s
workers, one worker runs every test on it (``tests/xdist_groups.py``)."""

LEFTOVER_GRACE_S = 15.0
"""How long processes of the run that are already stopping get to end before they count."""
_RUN_TOKEN = pytest.StashKey[str]()
_WORKERS_LEFT = pytest.StashKey[list[tuple[list[str], list[str]]]]()
"""Under xdist, in the controller: what each worker found left (servers, others)."""
_LEFT_KEY = "cursorops_left_behind"


def pytest_configure(config: pytest.Config) -> None:
    """Mark this run: every process it starts inherits the marker (``tests/leftovers.py``).
    Each xdist worker is a run of its own, with a marker of its own."""
    token = f"{os.getpid()}-{uuid.uuid4().hex}"
    os.environ[leftovers.RUN_MARKER] = token
    config.stash[_RUN_TOKEN] = token
    config.stash[_WORKERS_LEFT] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Controller: keep what a finished worker found left behind, for the report below."""
    left = getattr(node, "workeroutput", {}).get(_LEFT_KEY)
    if left:
        node.config.stash[_WORKERS_LEFT].append(left)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a server it started is still running once everything is torn down.

    A cursorops standalone, a PostgreSQL, a Spark JVM or an Airflow process
    the run started (``tests/leftovers.py``) is reported as an error of its own and
    stopped. Any other process of the run still there is named, and left alone.
    Last of the hooks: after an interrupt, pytest tears fixtures down in its own
    ``pytest_sessionfinish``. An xdist worker looks for its own, stops them and hands
    their names to the controller, which reports them with its own.
    """
    config = session.config
    token = config.stash.get(_RUN_TOKEN, None)
    if token is None:
        return
    left = leftovers.wait_for_servers(token, os.getpid(), LEFTOVER_GRACE_S)
    servers = [str(leftover) for leftover in left if leftover.is_server]
    others = [str(leftover) for leftover in left if not leftover.is_server]
    leftovers.stop([leftover for leftover in left if leftover.is_server])
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_LEFT_KEY] = (servers, others)
        return
    for worker_servers, worker_others in config.stash.get(_WORKERS_LEFT, []):
        servers += worker_servers
        others += worker_others
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if others and reporter is not None:
        reporter.write_sep("-", "still running after the tests (not servers: left alone)")
        for other in others:
            reporter.write_line(f"  {other}")
    if not servers:
        return
    report = pytest.TestReport(
        nodeid="tests/conftest.py::no_server_left_behind",
        location=("tests/conftest.py", 0, "no_server_left_behind"),
        keywords={},
        outcome="failed",
        longrepr="the test run left these running (now stopped):\n"
        + "\n".join(f"  {server}" for server in servers),
        when="teardown",
    )
    config.hook.pytest_runtest_logreport(report=report)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="module", autouse=True)
def _background_standalones_stopped(request: pytest.FixtureRequest) -> Iterator[None]:
    """A command run as a process starts its home's background standalone, as an operator's
    would: each module's are stopped once the module is done (``cursorops standalone stop``
    does the same by hand), so a run never holds more than one module's."""
    yield
    token = request.config.stash.get(_RUN_TOKEN, None)
    if token is not None:
        background = [
            leftover
            for leftover in leftovers.find(token, os.getpid())
            if leftover.command.startswith("cursorops standalone ")
        ]
        leftovers.stop(background)


@pytest.fixture(autouse=True)
def _homes_in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A command a test runs with ``main([...])`` reaches its home's admin REST in this
    process (:mod:`tests.home_in_process`); commands run as processes take the socket."""
    from tests.home_in_process import serve_homes_in_process

    yield from serve_homes_in_process(monkeypatch)


@pytest.fixture(scope="session", autouse=True)
def _spark_gateway_stopped() -> Iterator[None]:
    """At the end of the run, stop the JVM that pyspark started in this process."""
    yield
    stop_spark_gateway()


def stop_spark_gateway() -> None:
    """Stop this process's Spark context, its py4j gateway and the JVM behind it.

    ``SparkSession.stop()`` keeps the gateway and its JVM for the next session.
    Left to the interpreter's exit, the JVM outlives the run until then, and py4j
    closes its connections from ``__del__``, logging it at INFO through the root
    logger's handler, which Airflow's import bound to pytest's capture stream,
    closed by then: a ``--- Logging error ---`` traceback after the summary.
    Here the connections close while that stream is still open.
    """
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        context.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    SparkContext._gateway = None
    SparkContext._jvm = None
    process = getattr(gateway, "proc", None)
    gateway.shutdown()
    if process is not None:
        # pyspark's JVM exits when its standard input closes.
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    del gateway
    gc.collect()


@pytest.fixture
def tmp_config(tmp_path: Path) -> Config:
    return Config.from_home(tmp_path)


def _layout(broker: Broker, topic: str) -> LedgerLayout:
    from cursorops.core.domain.acks.ledger_layout import LedgerLayout

    ledgers = broker.metadata.ledgers(topic)
    return LedgerLayout.of((ledger.ledger_id, ledger.entries) for ledger in ledgers)


def stored_cursor(broker: Broker, topic: str, subscription: str) -> CursorState:
    """The subscription's cursor on one partition as stored, over its current ledgers."""
    from cursorops.core.store.cursor_state import replay

    return replay(broker.metadata.load_cursor(topic, subscription), _layout(broker, topic))


def acknowledge(
    broker: Broker, topic: str, subscription: str, targets: Iterable[AckTarget]
) -> None:
    """Individual acknowledgements of any messages of one partition, whatever the
    subscription's type, as one journal delta in a cursor transaction of its own."""
    from cursorops.core.domain.acks import cursor_codec
    from cursorops.core.domain.acks.cursor import CursorState

    delta = CursorState.ack_delta(targets)
    broker.metadata.append_cursor_delta(topic, subscription, cursor_codec.encode(delta))


def acknowledge_cumulative(
    broker: Broker, topic: str, subscription: str, position: Position
) -> None:
    """Everything up to ``position`` (inclusive) acknowledged, as :func:`acknowledge` writes."""
    from cursorops.core.domain.acks import cursor_codec
    from cursorops.core.domain.acks.cursor import CursorState

    delta = CursorState().acknowledge_cumulative(position, _layout(broker, topic))
    broker.metadata.append_cursor_delta(topic, subscription, cursor_codec.encode(delta))


def _postgres_base_url() -> str:
    url = os.environ.get(PG_URL_ENV)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(
            f"{PG_URL_ENV} is not set: CI must test PostgreSQL "
            "(bash scripts/start-postgres.sh -- pytest ...)",
            pytrace=False,
        )
    pytest.skip(
        f"PostgreSQL not configured: set {PG_URL_ENV} "
        "(bash scripts/start-postgres.sh -- pytest ...)"
    )


@contextmanager
def postgres_databases(*names: str) -> Iterator[dict[str, str]]:
    """Fresh databases on the test server, dropped afterwards: name → SQLAlchemy URL."""
    with postgres.databases(_postgres_base_url(), *names) as made:
        yield made


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def metadata_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty metadata database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'metadata.db'}"
        return
    with postgres.schema(_postgres_base_url()) as (url, _schema):
        yield url


@pytest.fixture
def metadata_store(metadata_url: str) -> Iterator[MetadataStore]:
    store = MetadataStore(metadata_url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one Spark session of the test run: ``local[2]``, 2 shuffle partitions, no UI."""
    pytest.importorskip("pyspark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from cursorops.spark.session import build_session

    session = build_session(
        "local[2]",
        "cursorops-tests",
        shuffle_partitions=2,
        extra={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"},
    )
    try:
        yield session
    finally:
        session.stop()

"""The session's real Airflow and its cursorops home, shared by every test folder.

Registered once in ``tests/conftest.py`` (``pytest_plugins``), so ``tests/dags``,
``tests/plugins`` and the topology test share one ``airflow standalone`` per test
session instead of starting one per folder that imports the fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cursorops.airflow.operators.gate import MINUTE_ENV
from cursorops.core.domain.config import Config
from tests.airflow_harness import Airflow, start_airflow
from tests.dags.conftest import GRANTED, NAMESPACE, SECRET_NAMESPACE, TENANT

COUNTING = Path(__file__).resolve().parent / "counting"
APPROVAL_MINUTE_S = 10
"""A minute of the gates' timeout and validity params on the session's Airflow
(``CURSOROPS_APPROVAL_MINUTE_S``): tests see a gate time out or an approval expire in
seconds. Every other Airflow the tests start keeps the 60 s a deployment has."""
TIMEOUT_SWEEP_S = 2
"""How often the session's scheduler looks for gates past their timeout (Airflow's
``scheduler.trigger_timeout_check_interval``, 15 s by default): a gate that times out
after a test's minute fails within seconds, not up to 15 s later."""
COUNTS_FILE = "counts.txt"
"""Under the Airflow root: one line per Broker made and per validation of ids, by any of
Airflow's processes."""


@pytest.fixture(scope="session")
def cursorops_home(tmp_path_factory: pytest.TempPathFactory) -> Config:
    from cursorops.core.services.broker import Broker

    config = Config.from_home(tmp_path_factory.mktemp("cursorops"))
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", TENANT)
        broker.admin.create_namespace("admin", NAMESPACE)
        broker.admin.create_namespace("admin", SECRET_NAMESPACE)
        for role in GRANTED:
            broker.admin.grant_permission("admin", NAMESPACE, role, ["consume"])
    return config


def session_environ(root: Path, cursorops_home: Config) -> dict[str, str]:
    """What the session's Airflow adds to a deployment's environment (and so does any
    Airflow a test module starts to stand in for it)."""
    return {
        # What a request costs across Airflow's processes (tests/counting/sitecustomize.py).
        "PYTHONPATH": str(COUNTING),
        "CURSOROPS_TEST_COUNTS": str(root / COUNTS_FILE),
        "CURSOROPS_HOME": str(cursorops_home.home),
        "CURSOROPS_METADATA_URL": "",
        # Tests trigger the audit themselves; an hourly run would compete for the CPU.
        "CURSOROPS_AUDIT_SCHEDULE": "none",
        MINUTE_ENV: str(APPROVAL_MINUTE_S),
        "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": str(TIMEOUT_SWEEP_S),
    }


@pytest.fixture(scope="session")
def airflow(tmp_path_factory: pytest.TempPathFactory, cursorops_home: Config) -> Iterator[Airflow]:
    root = tmp_path_factory.mktemp("airflow")
    stack = start_airflow(root, session_environ(root, cursorops_home))
    try:
        yield stack
    finally:
        stack.stop()

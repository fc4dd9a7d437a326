"""A real Airflow 3.3.2 for tests: :mod:`cursorops.airflow.local_airflow` with the test users.

The same start-up a person gets (``scripts/airflow-up.sh``: standalone with the
LocalExecutor on SQLite), on free ports, with a throwaway AIRFLOW_HOME and
cursorops home. Helpers act over the public REST API as a given user, as a
person in the UI would.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cursorops.airflow.local_airflow import (
    DEMO_USERS,
    FINISHED,
    HITL_SETTLE_S,
    Airflow,
    password,
)
from cursorops.airflow.local_airflow import start_airflow as _start_airflow
from cursorops.local.ports import free_port

__all__ = [
    "DAG_TEST_USER",
    "FINISHED",
    "HITL_SETTLE_S",
    "USERS",
    "Airflow",
    "free_port",
    "password",
    "start_airflow",
]

DAG_TEST_USER = "dag_test"
"""The triggering user ``dag.test()`` gives every run it creates (hard-coded in Airflow 3.3.2):
the requester of the dag.test tier, a login of its own so it can try to approve itself."""
USERS = {**DEMO_USERS, "dave": "op", DAG_TEST_USER: "op"}
"""Airflow user → SimpleAuthManager role; the password of each is ``<user>-pw``. dave is
an Airflow op whose Pulsar role holds no permission; dag_test's Pulsar role holds one only
on the namespace of ``tests/dags/test_dag_test.py``."""


def start_airflow(root: Path, environ: Mapping[str, str], **options: Any) -> Airflow:
    """Start Airflow under ``root`` with the test users and ``environ`` added; wait for health
    and for the DAGs to be parsed. ``options`` go to :func:`local_airflow.start_airflow`."""
    return _start_airflow(root, environ, users=USERS, **options)

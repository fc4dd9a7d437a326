"""No approval answer is lost: a real Airflow, answered at any moment after the gate parks.

Airflow 3.3.2 with the LocalExecutor can fail a gate answered while the scheduler has not
yet processed the executor's event for the workload that parked it: the resumed workload
runs under the same key, and the late "success" of the parking workload reads as a task
killed outside Airflow. Whatever Airflow does with the task, an answer it accepted (2xx)
must be recorded and acted on: applied, or reported in the request's closing record.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from cursorops.core.domain.config import Config
from tests.airflow_harness import Airflow
from tests.dags.conftest import SeededTopic, label, request_skip, seed_topic
from tests.dags.test_approval_attacks import first_unacked

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG = "cursorops_skip_messages"
GATE = "approve_skip"
DELAYS_S = (0.0, 1.0, 3.0, 6.0, 10.0)
"""Seconds between the gate parking (``awaiting_input`` over the REST API) and bob's answer."""


def _requested(airflow: Airflow, seeded: SeededTopic, pills: list[Any]) -> str:
    """A skip requested as a door requests it; Airflow on SQLite may refuse a trigger with a
    database error while other runs' tasks write: asked again, as a person would."""
    for attempt in range(5):
        try:
            return request_skip(airflow, seeded, pills)
        except RuntimeError as exc:
            if "Database error" not in str(exc) or attempt == 4:
                raise
            time.sleep(2)
    raise AssertionError("unreachable")


def _answer_after(
    airflow: Airflow, run: str, delay: float, out: dict[str, Any], key: float
) -> None:
    try:
        airflow.wait_parked(DAG, run, GATE, poll=0.2)
        time.sleep(delay)
        out[key] = airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code
    except BaseException as exc:  # reported by the test, not lost in the thread
        out[key] = exc


def test_every_accepted_answer_is_applied_whenever_it_comes(
    airflow: Airflow, cursorops_home: Config
):
    runs: dict[float, tuple[str, SeededTopic, list[Any], set[str]]] = {}
    for delay in DELAYS_S:
        seeded = seed_topic(cursorops_home, partitions=1)
        pills = first_unacked(seeded, 2)
        before = seeded.unacknowledged()
        runs[delay] = (_requested(airflow, seeded, pills), seeded, pills, before)
    answered: dict[float, Any] = {}
    threads = [
        threading.Thread(target=_answer_after, args=(airflow, run, delay, answered, delay))
        for delay, (run, *_) in runs.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert sorted(answered) == sorted(DELAYS_S), answered
    failures = {d: a for d, a in answered.items() if not isinstance(a, int)}
    assert not failures, failures
    assert all(code == 200 for code in answered.values()), answered
    for delay, (run, seeded, pills, before) in runs.items():
        state = airflow.wait_run(DAG, run)
        where = f"answered {delay} s after parking"
        assert state == "success", (where, airflow.task_states(DAG, run))
        assert seeded.unacknowledged() == before - {label(m) for m in pills}, where
        [closing] = seeded.audit("skip-request")
        assert closing["outcome"] == "applied" and closing["approvedBy"] == ["bob"], where

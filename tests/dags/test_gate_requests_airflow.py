"""What a gated skip asks of Airflow's API server, counted in the API server's own access log.

Airflow 3.3.2 logs every request it serves (``[http.access]``: method, path, the
``X-Request-ID`` it was sent with). Every request this test makes carries the
harness's id (:data:`~cursorops.airflow.local_airflow.CLIENT_REQUEST_ID`); the Task SDK of
each task talks to the Execution API (``/execution/…``), with its own token. Any other
request is one a worker's code or the API server itself made: a worker logging in
(``/auth/token``), reading an answer back (``…/hitlDetails``) or calling the plugin.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cursorops.airflow.local_airflow import CLIENT_REQUEST_ID
from cursorops.core.domain.config import Config
from tests.airflow_fixtures import COUNTS_FILE
from tests.airflow_harness import Airflow
from tests.dags.conftest import SUBSCRIPTION, label, request_skip, seed_topic
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG = "cursorops_skip_messages"
GATE = "approve_skip"
ACCESS = re.compile(r"^api-server \| .*\[http\.access\] (?P<fields>.*)$")
FIELD = re.compile(r"(\w+)=('(?:[^']*)'|\S*)")


@dataclass(frozen=True)
class Served:
    """One request the API server served, as its access log tells it."""

    method: str
    path: str
    request_id: str | None

    @property
    def by_the_test(self) -> bool:
        return (self.request_id or "").startswith(CLIENT_REQUEST_ID)

    @property
    def execution_api(self) -> bool:
        return self.path.startswith("/execution/")


def served_since(airflow: Airflow, offset: int, timeout: float = 120) -> list[Served]:
    """The requests the API server served since byte ``offset`` of the standalone's log,
    up to a last request of the test's, once the log shows that one (the standalone copies
    the API server's output into its log a moment after it is written)."""
    end = f"{CLIENT_REQUEST_ID}-end-{secrets.token_hex(4)}"
    airflow.request("admin", "GET", "/api/v2/version", headers={"X-Request-ID": end})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        served = _logged(airflow.log, offset)
        if any(r.request_id == end for r in served):
            return served
        time.sleep(0.5)
    raise TimeoutError(f"the API server's access log never showed {end}: {airflow.log}")


def _logged(log: Path, offset: int) -> list[Served]:
    with log.open("rb") as lines:
        lines.seek(offset)
        text = lines.read().decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        match = ACCESS.match(line)
        if match is None:
            continue
        fields = {k: v.strip("'") for k, v in FIELD.findall(match["fields"])}
        out.append(Served(fields.get("method", ""), fields["path"], fields.get("request_id")))
    return out


def others(requests: list[Served]) -> list[Served]:
    """What neither the test nor a task's Task SDK asked: a worker's own code, or the API
    server calling itself."""
    return [r for r in requests if not r.by_the_test and not r.execution_api]


@pytest.fixture(scope="module")
def approval_namespace(cursorops_home: Config) -> str:
    from cursorops.core.services.broker import Broker

    namespace = f"acme/counted-{secrets.token_hex(3)}"
    with Broker(cursorops_home) as broker:
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", namespace, role, ["consume"])
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    return namespace


def test_a_gated_skip_asks_nothing_of_the_api_server_beyond_its_tasks_own_calls(
    airflow: Airflow, cursorops_home: Config, approval_namespace: str
):
    """alice asks, bob approves, the skip applies. No worker logs in, reads an answer back
    or calls the plugin, and the API server calls nobody; the gate's only request beyond
    a task's own life cycle (start, heartbeat, state, XCom) is Airflow's approval record."""
    seeded = seed_topic(cursorops_home, namespace=approval_namespace)
    before = seeded.unacknowledged()
    [pill] = [m for m in seeded.ids[10:60] if label(m) in before][:1]
    start = airflow.log.stat().st_size
    run = request_skip(airflow, seeded, [pill])
    airflow.wait_awaiting_input(DAG, run, GATE)
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
    assert seeded.unacknowledged() == before - {label(pill)}
    [applied] = seeded.audit("skip-request")
    assert applied["outcome"] == "applied" and applied["approvedBy"] == ["bob"]
    served = served_since(airflow, start)

    assert others(served) == []
    gate_id = str(airflow.task_instance(DAG, run, GATE)["id"])
    gate = [r for r in served if r.execution_api and gate_id in r.path]
    beyond_life_cycle = [r for r in gate if not r.path.startswith("/execution/task-instances/")]
    assert [(r.method, r.path) for r in beyond_life_cycle] == [
        ("POST", f"/execution/hitlDetails/{gate_id}")
    ]
    # The gate's requests, life cycle included, for the record of what a gate costs.
    print(f"gate {GATE}: {len(gate)} Execution API request(s): {[r.path for r in gate]}")


def _counts(path: Path, offset: int) -> dict[str, int]:
    """How many Brokers and validations of ids the lines after ``offset`` of ``path`` name
    (``tests/counting/sitecustomize.py`` writes them in every Airflow process)."""
    if not path.exists():
        return {}
    with path.open("rb") as lines:
        lines.seek(offset)
        text = lines.read().decode("utf-8")
    out: dict[str, int] = {}
    for line in text.splitlines():
        what = line.split()[1]
        out[what] = out.get(what, 0) + 1
    return out


def test_a_rest_skip_validates_twice_makes_six_brokers_and_calls_no_api_server(
    airflow: Airflow, cursorops_home: Config, approval_namespace: str
):
    """The happy path through the plugin's REST door: alice's ``skipByMessageIds`` stores
    the request and starts its run in the API server itself (no request to itself), bob
    approves, the skip applies. The ids are validated against the stores twice (the door's
    plan, the apply under the locks), and 6 Brokers are made (the gate as it waits and as
    it is resumed, each later gate as it reads from the record that it is not needed,
    apply, record); the door's own is made once per API server process, here by a first
    call before the count."""
    seeded = seed_topic(cursorops_home, namespace=approval_namespace)
    before = seeded.unacknowledged()
    chosen = next(m for m in seeded.ids[10:60] if label(m) in before)
    counts = airflow.home.parent / COUNTS_FILE
    stats = f"{PREFIX}{rest_path(seeded.topic)}/stats"
    assert airflow.request("alice", "GET", stats).status_code == 200
    counted_from = counts.stat().st_size if counts.exists() else 0
    path = f"{PREFIX}{rest_path(seeded.topic)}/subscription/{SUBSCRIPTION}/skipByMessageIds"
    start = airflow.log.stat().st_size
    answer = airflow.request(
        "alice", "POST", path, json=[chosen.to_base64()], headers={"X-Cursorops-Reason": "pill"}
    )
    assert answer.status_code == 202, answer.text
    run = str(answer.json()["runId"])
    assert airflow.dag_run(DAG, run)["triggering_user_name"] == "alice"
    airflow.wait_awaiting_input(DAG, run, GATE)
    assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
    assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
    assert seeded.unacknowledged() == before - {label(chosen)}
    served = served_since(airflow, start)

    assert others(served) == []
    spent = _counts(counts, counted_from)
    print(f"a gated REST skip: {spent}")
    assert spent.get("validate", 0) == 2, spent
    assert 5 <= spent.get("broker", 0) <= 6, spent

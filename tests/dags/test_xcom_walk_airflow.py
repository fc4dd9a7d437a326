"""A hostile XCom walk over every gated DAG, on the session's real Airflow.

XComs are output for people to read: any Airflow user with edit rights rewrites them
over the REST API. For each gated DAG, alice (the requester) makes a request at its
door; the walk then holds the DAG paused, unpausing it a moment at a time so that one
task is queued at a time, and after each task ends she rewrites every XCom of the run
(each key and ``return_value`` of every task so far, and posts one where a task left
none): another topic, subscription and predicate, the
digest of another plan record, paths outside the run's scratch folder (a file and a
folder of the test's, the ledger root), huge numbers, a forged "Approve". Then bob
approves through the gate (and admin the second gate of a quorum). Each run must still
apply exactly what its gate showed, on its own topic only; the decoy topic the forged
values name keeps its cursor; and no file outside a run's scratch folder changes
(bytes and modification times of the test's sentinels, the ledger root and the home).

Runs of different DAGs go side by side, four at a time, one DAG per thread (a DAG is
paused and resumed for its own run only, so two runs never share one); the module's
fixture walks them, each test checks one.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from cursorops.airflow.gated_tail import TAILS
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from tests.airflow_fixtures import session_environ
from tests.airflow_harness import Airflow, start_airflow
from tests.conftest import _postgres_base_url, postgres_databases
from tests.dags.conftest import SUBSCRIPTION, SeededTopic, label, seed_topic
from tests.dags.test_skip_matching_airflow import OLD_KEYS
from tests.plugins.conftest import PREFIX, rest_path

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]

HUGE = 2**62
REQUIRED_APPROVALS = "required_approvals"
"""The XCom key under which the first gate of a quorum said how many approvals its plan
needs, for later gates to read: forged, and posted where no gate said it."""
ENDED = {"success", "failed", "skipped", "upstream_failed", "removed"}
PARKED = "awaiting_input"
ACTIVE = {"queued", "running", "restarting", "deferred", "up_for_reschedule"}
NOT_STARTED = {"None", "none", "scheduled"}
WALK_TIMEOUT_S = 900
IDLE_SLEEP = "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"
SCHEDULER_NAP_S = 1.0
"""The walk's scheduler's nap when idle: Airflow's default."""
PULSE_S = 0.5
"""How long the walk lets the scheduler run a paused DAG to queue its next task."""
WALK_ATTEMPTS = 3
"""A walk the scheduler outran (on a loaded machine a pause can land after the next task
was queued and ended, so two tasks' boundary went unforged) is walked again, on a new
request at the same door: the raced run still counts for what must not change."""
WALKERS = 4
"""Runs walked at once: more would hold SQLite (Airflow's metadata) long enough for a pause
to land after the next task was queued."""
MATCH_DAG = "cursorops_skip_matching"
DAGS = (
    "cursorops_skip_messages",
    "cursorops_skip_head",
    MATCH_DAG,
    "cursorops_reset_cursor",
    "cursorops_unsubscribe",
    "cursorops_redrive",
    "cursorops_undo_skip",
)
"""Every gated DAG."""


# -- what the forger writes -------------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    """The values alice writes into every XCom."""

    decoy_topic: str
    decoy_digest: str
    """A real plan record's digest: a skip of the decoy topic, bound to no started run."""
    file: Path
    folder: Path
    ledger_root: str
    required_approvals: int = HUGE

    def document(self) -> dict[str, Any]:
        """One value with every key a reader might look for, each pointing elsewhere."""
        return {
            "topic": self.decoy_topic,
            "subscription": SUBSCRIPTION,
            "planDigest": self.decoy_digest,
            "requestDigest": self.decoy_digest,
            "digest": self.decoy_digest,
            "operation": "skip",
            "predicateJson": '{"publishTime": {"after": 0}}',
            "predicate": {"publishTime": {"after": 0}},
            "ids": HUGE,
            "messages": HUGE,
            "limit": HUGE,
            "allow_large": True,
            "requiredApprovals": 0,
            "ledgerRoot": self.ledger_root,
            "matchList": str(self.folder),
            "summary": str(self.file),
            "chart": str(self.file),
            "path": str(self.file),
            "scratch": str(self.folder),
            "role": "admin",
            "requester": "bob",
            "chosen_options": ["Approve"],
            "params_input": {},
            "responded_by_user": {"id": "bob", "name": "bob"},
            "responded_at": "2026-01-01T00:00:00+00:00",
            "approvals": [{"approver": "bob", "approvedAt": "2026-01-01T00:00:00Z"}],
        }

    def value(self, key: str) -> Any:
        """A key a task once returned on its own (``multiple_outputs``) gets its own forged
        value: a topic for ``topic``, a path for ``summary``; any other, the document."""
        if key == REQUIRED_APPROVALS:
            return self.required_approvals
        document = self.document()
        return document.get(key, document)


# -- the walk of one run ----------------------------------------------------------------

WRITES = threading.Lock()
"""The walks' own writes to Airflow go one at a time: its metadata is on SQLite, one writer."""
BUSY_RETRIES = 10


def write(
    airflow: Airflow, user: str, method: str, path: str, *, queue: bool = True, **kwargs: Any
) -> httpx.Response:
    """A write through Airflow's REST API, tried again while SQLite was busy: the api-server
    answers 500 "Database error" when the scheduler held the database longer than its
    driver waits (a loaded machine, several runs at once). ``queue=False``: not behind the
    other walks' writes (a pause, which must land before the next task is queued)."""
    for _ in range(BUSY_RETRIES):
        with WRITES if queue else contextlib.nullcontext():
            response = airflow.request(user, method, path, **kwargs)
        if response.status_code != 500 or "Database error" not in response.text:
            return response
        time.sleep(1 if queue else 0.1)
    return response


@dataclass
class Forge:
    """One round of forging: which tasks had ended (parked excluded) and which had not
    started when it was done."""

    ended: frozenset[str]
    not_started: frozenset[str]


@dataclass
class Walk:
    """One run walked task by task with its DAG paused between tasks."""

    airflow: Airflow
    dag: str
    chain: tuple[str, ...]
    """The run's tasks in order (each DAG is a chain)."""
    gates: tuple[str, ...]
    approvers: tuple[str, ...]
    """Who answers the first, second, ... gate that waits."""
    hostile: Hostile
    run: str = ""
    forges: list[Forge] = field(default_factory=list)
    forged: int = 0
    shown: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each answered gate's HITL record (subject, body, assigned users) as it waited."""
    answered: list[str] = field(default_factory=list)
    final: str = ""
    states: dict[str, str] = field(default_factory=dict)

    def pause(self, paused: bool) -> None:
        response = write(
            self.airflow,
            "admin",
            "PATCH",
            f"/api/v2/dags/{self.dag}",
            queue=False,
            json={"is_paused": paused},
        )
        assert response.status_code == 200, response.text

    def task_states(self) -> dict[str, str]:
        return {t: s[0] for t, s in self.airflow.task_states(self.dag, self.run).items()}

    def go(self, start: Callable[[], str]) -> Walk:
        """Start the run (its DAG paused), then walk it to its end."""
        self.pause(True)
        try:
            self.run = start()
            self._walk()
        finally:
            self.pause(False)
        self.final = self.airflow.wait_run(self.dag, self.run, timeout=WALK_TIMEOUT_S)
        self.forge(self.task_states())
        self.states = self.task_states()
        return self

    def _walk(self) -> None:
        deadline = time.monotonic() + WALK_TIMEOUT_S
        while time.monotonic() < deadline:
            states = self._settled()
            self.forge(states)
            if all(states.get(task) in ENDED for task in self.chain):
                return  # paused, the run's state waits for the scheduler: resumed by go()
            parked = [g for g in self.gates if states.get(g) == PARKED and g not in self.answered]
            if parked:
                gate = parked[0]
                self.airflow.wait_answerable(self.dag, self.run, gate)
                self.shown[gate] = self.airflow.hitl_detail(self.dag, self.run, gate)
                self.forge(self.task_states())
                # Answered while paused: the resumed gate waits for the walk's go, so that
                # nothing after it starts before the walk has forged again.
                approver = self.approvers[len(self.answered)]
                answer = write(
                    self.airflow,
                    approver,
                    "PATCH",
                    f"/api/v2/dags/{self.dag}/dagRuns/{self.run}/taskInstances/{gate}/-1/hitlDetails",
                    json={"chosen_options": ["Approve"], "params_input": {}},
                )
                assert answer.status_code == 200, (gate, approver, answer.text)
                self.answered.append(gate)
            self._step(states, deadline)
        raise TimeoutError(f"{self.dag} run {self.run} not walked in {WALK_TIMEOUT_S} s")

    def _settled(self) -> dict[str, str]:
        """The task states once no task is queued or running (the DAG is paused: nothing
        new starts)."""
        while True:
            states = self.task_states()
            if not any(state in ACTIVE for state in states.values()):
                return states
            time.sleep(0.5)

    def _step(self, before: dict[str, str], deadline: float) -> None:
        """Let the scheduler queue the run's next task and nothing after it: unpause the DAG
        for a moment, pause it, and look; again until a task has moved on (queued, started
        or ended). The next task is queued only once that one has ended, which takes longer
        than the moment (a task process starts, then reports its end)."""
        while time.monotonic() < deadline:
            self.pause(False)
            time.sleep(PULSE_S)
            self.pause(True)
            states = self.task_states()
            if any(
                states.get(task) != state and states.get(task) not in NOT_STARTED
                for task, state in before.items()
            ):
                return
            time.sleep(PULSE_S)

    def forge(self, states: dict[str, str]) -> None:
        """Rewrite every XCom of the run; post a ``return_value`` where an ended task left
        none, and the first gate's count where it said none."""
        base = f"/api/v2/dags/{self.dag}/dagRuns/{self.run}/taskInstances"
        listed = self.airflow.get("alice", f"{base}/~/xcomEntries", params={"limit": 1000})
        present = {(e["task_id"], e["key"]) for e in listed["xcom_entries"]}
        for task, key in sorted(present):
            response = write(
                self.airflow,
                "alice",
                "PATCH",
                f"{base}/{task}/xcomEntries/{key}",
                json={"value": self.hostile.value(key), "map_index": -1},
            )
            assert response.status_code == 200, (task, key, response.text)
            self.forged += 1
        wanted = {(t, "return_value") for t, s in states.items() if s in ENDED | {PARKED}}
        if states.get(self.gates[0]) in ENDED | {PARKED}:
            wanted.add((self.gates[0], REQUIRED_APPROVALS))
        if states.get("validate_request") in ENDED:
            wanted |= {("validate_request", key) for key in OLD_KEYS}
        for task, key in sorted(wanted - present):
            response = write(
                self.airflow,
                "alice",
                "POST",
                f"{base}/{task}/xcomEntries",
                json={"key": key, "value": self.hostile.value(key), "map_index": -1},
            )
            assert response.status_code in (200, 201), (task, key, response.text)
            self.forged += 1
        self.forges.append(
            Forge(
                frozenset(t for t, s in states.items() if s in ENDED),
                frozenset(t for t, s in states.items() if s in NOT_STARTED),
            )
        )

    def unforged_boundaries(self) -> list[tuple[str, str]]:
        """Each (task, next task that ran) with no forging between the one's end and the
        other's start: what the walk failed to cover."""
        ran = [t for t in self.chain if self.states.get(t) not in {"upstream_failed", None}]
        return [
            (before, after)
            for before, after in zip(ran, ran[1:], strict=False)
            if not any(before in f.ended and after in f.not_started for f in self.forges)
        ]


# -- the home and the sentinels ---------------------------------------------------------


def snapshot(roots: list[Path], skip: Callable[[Path], bool]) -> dict[str, tuple[str, int]]:
    """Every file under ``roots``: its SHA-256 and modification time (ns)."""
    files: dict[str, tuple[str, int]] = {}
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file() and not path.is_symlink() and not skip(path):
                files[str(path)] = (
                    hashlib.sha256(path.read_bytes()).hexdigest(),
                    path.stat().st_mtime_ns,
                )
    return files


def _database_or_scratch(home: Path) -> Callable[[Path], bool]:
    """The metadata database (SQLite and its journal) and the runs' scratch root change."""

    def skip(path: Path) -> bool:
        if path.name.startswith("metadata.db"):
            return True
        return path.is_relative_to(home / "runs")

    return skip


# -- the requests at each door ----------------------------------------------------------


def approval_namespace(config: Config, quorum: bool = False) -> str:
    namespace = f"acme/walk-{secrets.token_hex(3)}"
    with Broker(config) as broker:
        broker.admin.create_namespace("admin", namespace)
        for role in ("alice", "bob"):
            broker.admin.grant_permission("admin", namespace, role, ["produce", "consume"])
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
        if quorum:
            broker.admin.set_approval_quorum(
                "admin", namespace, large_above_messages=0, approvals=2
            )
    return namespace


def plain_topic(config: Config, *subscriptions: str, quorum: bool = False) -> str:
    topic = f"persistent://{approval_namespace(config, quorum)}/t"
    with Broker(config) as broker:
        broker.admin.create_topic("admin", topic)
        for sub in subscriptions:
            broker.admin.create_subscription(
                "admin", topic, sub, SubscriptionType.SHARED, initial_position="earliest"
            )
    return topic


def backlog(config: Config, topic: str, subscription: str) -> int:
    with Broker(config) as broker:
        return sum(
            a.result.messages for a in broker.analysis.analyze_backlog("admin", topic, subscription)
        )


def audit(config: Config, topic: str, kind: str) -> list[dict[str, Any]]:
    with Broker(config) as broker:
        return [r.detail for r in broker.metadata.audit_log(topic) if r.kind == kind]


@dataclass
class Case:
    """A request at one door, and what applying exactly its plan does."""

    dag: str
    topic: str
    start: Callable[[], str]
    effect: Callable[[], None]
    """Asserts the store after the run: exactly the planned change."""
    quorum: bool = False
    digest: list[str] = field(default_factory=list)
    """The plan record's digest the door answered with (empty: planned in a step)."""


def door(airflow: Airflow, case: Case, method: str, path: str, **kwargs: Any) -> str:
    answer = write(
        airflow, "alice", method, path, headers={"X-Cursorops-Reason": "the walk"}, **kwargs
    )
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["dagId"] == case.dag
    case.digest.append(body["planDigest"])
    return str(body["runId"])


def skip_messages_case(airflow: Airflow, config: Config, *, quorum: bool = False) -> Case:
    seeded = seed_topic(config, approval_namespace(config, quorum))
    before = seeded.unacknowledged()
    chosen = [m for m in seeded.ids[10:60] if label(m) in before][:3]

    def effect() -> None:
        assert seeded.unacknowledged() == before - {label(m) for m in chosen}

    case = Case("cursorops_skip_messages", seeded.topic, lambda: "", effect, quorum)
    path = f"{PREFIX}{rest_path(seeded.topic)}/subscription/{SUBSCRIPTION}/skipByMessageIds"
    case.start = lambda: door(airflow, case, "POST", path, json=[m.to_base64() for m in chosen])
    return case


def skip_head_case(airflow: Airflow, config: Config) -> Case:
    seeded = seed_topic(config, approval_namespace(config))
    before = seeded.unacknowledged()

    def effect() -> None:
        by_partition: dict[str, list[tuple[int, int, int, str]]] = {}
        for text in before:
            partition, triplet = text.split("/")
            ledger, entry, index = (int(v) for v in triplet.split(":"))
            by_partition.setdefault(partition, []).append((ledger, entry, index, text))
        head = {row[3] for rows in by_partition.values() for row in sorted(rows)[:2]}
        assert seeded.unacknowledged() == before - head

    case = Case("cursorops_skip_head", seeded.topic, lambda: "", effect)
    path = f"{PREFIX}{rest_path(seeded.topic)}/subscription/{SUBSCRIPTION}/skip/2"
    case.start = lambda: door(airflow, case, "POST", path)
    return case


def skip_matching_case(airflow: Airflow, config: Config) -> Case:
    seeded = seed_topic(config, approval_namespace(config))
    before = seeded.unacknowledged()
    reminders = {label(m) for m in seeded.ids[-3:]}

    def effect() -> None:
        assert seeded.unacknowledged() == before - reminders

    conf = {
        "topic": seeded.topic,
        "subscription": SUBSCRIPTION,
        "still_scheduled": True,
        "reason": "the walk",
    }
    case = Case(MATCH_DAG, seeded.topic, lambda: "", effect)
    case.start = lambda: airflow.trigger(MATCH_DAG, conf, user="alice")
    return case


def reset_cursor_case(airflow: Airflow, config: Config) -> Case:
    topic = plain_topic(config, "s")
    with Broker(config) as broker:
        broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 5)
        broker.reading.consume("admin", topic, "s", 5, ack=True)

    def effect() -> None:
        assert backlog(config, topic, "s") == 5

    case = Case("cursorops_reset_cursor", topic, lambda: "", effect)
    path = f"{PREFIX}{rest_path(topic)}/subscription/s/resetcursor/0"
    case.start = lambda: door(airflow, case, "POST", path)
    return case


def unsubscribe_case(airflow: Airflow, config: Config) -> Case:
    topic = plain_topic(config, "s", "keep")
    with Broker(config) as broker:
        broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 4)

    def effect() -> None:
        with Broker(config) as broker:
            assert [s.name for s in broker.admin.list_subscriptions("admin", topic)] == ["keep"]
        assert backlog(config, topic, "keep") == 4

    case = Case("cursorops_unsubscribe", topic, lambda: "", effect)
    path = f"{PREFIX}{rest_path(topic)}/subscription/s"
    case.start = lambda: door(airflow, case, "DELETE", path)
    return case


def redrive_case(airflow: Airflow, config: Config) -> Case:
    topic = plain_topic(config, "a", "b")
    dlq = f"{topic}-a-DLQ"
    with Broker(config) as broker:
        broker.admin.create_topic("admin", dlq)
        broker.admin.create_subscription(
            "admin", dlq, "reader", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", dlq, [OutgoingMessage(b"poison", key=f"k{i}") for i in range(3)]
        )

    def effect() -> None:
        assert [backlog(config, topic, s) for s in ("a", "b")] == [3, 0]
        assert backlog(config, dlq, "reader") == 0

    case = Case("cursorops_redrive", topic, lambda: "", effect)
    path = f"{PREFIX}{rest_path(topic)}/subscription/a/redrive"
    case.start = lambda: door(airflow, case, "POST", path)
    return case


def undo_skip_case(airflow: Airflow, config: Config) -> Case:
    topic = plain_topic(config, "s")
    namespace = "/".join(topic.removeprefix("persistent://").split("/")[:2])
    with Broker(config) as broker:
        ids = broker.producing.produce(
            "admin", topic, [OutgoingMessage(b"%d" % i) for i in range(6)]
        )
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=False)
        skip_id = skips.skip_messages(broker.gated, "admin", topic, "s", ids[1:4]).skip_id
        broker.admin.set_namespace_policy("admin", namespace, skip_requires_approval=True)
    assert backlog(config, topic, "s") == 3

    def effect() -> None:
        assert backlog(config, topic, "s") == 6

    case = Case("cursorops_undo_skip", topic, lambda: "", effect)
    path = f"{PREFIX}{rest_path(topic)}/subscription/s/undoSkip/{skip_id}"
    case.start = lambda: door(airflow, case, "POST", path)
    return case


MAKERS: dict[str, Callable[[Airflow, Config], Case]] = {
    "skip_messages": skip_messages_case,
    "skip_head": skip_head_case,
    "skip_matching": skip_matching_case,
    "reset_cursor": reset_cursor_case,
    "unsubscribe": unsubscribe_case,
    "redrive": redrive_case,
    "undo_skip": undo_skip_case,
}
QUORUM = "skip_messages_quorum"


def namespace_of(topic: str) -> str:
    """``tenant/namespace`` of a topic, as its ledger folder is named."""
    return "/".join(rest_path(topic).removeprefix("/admin/v2/persistent/").split("/")[:2])


def chain_of(case: Case) -> tuple[str, ...]:
    tail = TAILS[_recorded(case.dag)]
    head = ("validate_request", "authorize", "find_messages", "plan_matched_ids")
    return (*(head if case.dag == MATCH_DAG else ()), *tail.gates, tail.apply, "close_request")


def _recorded(dag: str) -> str:
    return {
        "cursorops_reset_cursor": "reset-cursor",
        "cursorops_unsubscribe": "unsubscribe",
        "cursorops_redrive": "redrive",
        "cursorops_undo_skip": "undo-skip",
    }.get(dag, "skip")


# -- the module's walk ------------------------------------------------------------------


@dataclass
class Walked:
    case: Case
    walk: Walk | None
    error: BaseException | None
    decoy: SeededTopic
    decoy_before: set[str]
    hostile: Hostile


@dataclass
class Outcome:
    walked: dict[str, Walked]
    changed: list[str]
    """Files outside the runs' scratch folders that changed, went or appeared."""
    seconds: float


@pytest.fixture(scope="module")
def walk_airflow(
    tmp_path_factory: pytest.TempPathFactory, cursorops_home: Config
) -> Iterator[Airflow]:
    """An Airflow of the walk's own, like the session's but for its scheduler's nap and
    its metadata database. The nap is Airflow's default second, which the walk's pauses
    outpace (the session's and a deployment's scheduler naps 0.2 s, and would queue the
    next task before a pause lands on a loaded machine). The database is a PostgreSQL one,
    as ``make up``'s: four runs walked at once write pauses and XComs while the scheduler
    runs, which on SQLite made the scheduler wait past its lock timeout and exit. Its own
    unit of the suite, so it runs beside the session's Airflow tests rather than after
    them."""
    root = tmp_path_factory.mktemp("walk-airflow")
    name = f"airflow_walk_{secrets.token_hex(4)}"
    with postgres_databases(name) as urls:
        environ = session_environ(root, cursorops_home)
        environ |= {
            IDLE_SLEEP: str(SCHEDULER_NAP_S),
            "CURSOROPS_AIRFLOW_DB": "postgres",
            "AIRFLOW_PG_PORT": str(make_url(_postgres_base_url()).port),
            "AIRFLOW_PG_DATABASE": make_url(urls[name]).database or "",
        }
        stack = start_airflow(root, environ)
        try:
            yield stack
        finally:
            stack.stop()


@pytest.fixture(scope="module")
def walked(
    walk_airflow: Airflow, cursorops_home: Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Outcome]:
    airflow = walk_airflow
    from cursorops.core.services.broker import new_run_id, wall_clock_ms
    from cursorops.core.services.gating import Caller, Run, SkipMessages

    for dag in DAGS:
        airflow.wait_dag(dag)
    sentinels = tmp_path_factory.mktemp("sentinels")
    file = sentinels / "precious.json"
    file.write_text('{"kept": true}', encoding="utf-8")
    folder = sentinels / "precious"
    folder.mkdir()
    (folder / "keep.txt").write_text("kept", encoding="utf-8")

    decoy = seed_topic(cursorops_home, approval_namespace(cursorops_home))
    decoy_before = decoy.unacknowledged()
    with Broker(cursorops_home) as broker:
        unacked = [m for m in decoy.ids if label(m) in decoy_before][:3]
        record = broker.plan_request(
            "skip-messages",
            Caller("alice", "alice", "rest"),
            SkipMessages(
                topic=decoy.topic, subscription=SUBSCRIPTION, ids=tuple(unacked), reason="decoy"
            ),
            Run("cursorops_skip_messages", new_run_id(wall_clock_ms())),
        )
    hostile = Hostile(decoy.topic, record.digest, file, folder, str(cursorops_home.ledger_root))
    quorum_hostile = Hostile(
        decoy.topic, record.digest, file, folder, str(cursorops_home.ledger_root), 1
    )

    cases = {name: make(airflow, cursorops_home) for name, make in MAKERS.items()}
    cases[QUORUM] = skip_messages_case(airflow, cursorops_home, quorum=True)
    home = Path(cursorops_home.home)
    roots = [sentinels, home]
    before = snapshot(roots, _database_or_scratch(home))
    # New ledger segments are the redrive's, on its own topic; nothing else may appear.
    redriven = rest_path(cases["redrive"].topic).removeprefix("/admin/v2/persistent/")

    fresh: list[str] = []
    """The namespaces of cases made after the snapshot above (a walk made again)."""

    def walk(name: str, forged: Hostile) -> tuple[Walk | None, BaseException | None]:
        for attempt in range(1, WALK_ATTEMPTS + 1):
            if attempt > 1:
                cases[name] = make_case(name)
                fresh.append(namespace_of(cases[name].topic))
            case = cases[name]
            tail = TAILS[_recorded(case.dag)]
            walk = Walk(airflow, case.dag, chain_of(case), tail.gates, ("bob", "admin"), forged)
            try:
                walk.go(case.start)
            except BaseException as exc:  # reported by the case's own test
                return walk, exc
            if not walk.unforged_boundaries() or attempt == WALK_ATTEMPTS:
                return walk, None
        raise AssertionError("unreachable")

    def make_case(name: str) -> Case:
        if name == QUORUM:
            return skip_messages_case(airflow, cursorops_home, quorum=True)
        return MAKERS[name](airflow, cursorops_home)

    def by_dag(names: list[str]) -> dict[str, tuple[Walk | None, BaseException | None]]:
        # One DAG's runs one after another: its pause is its run's alone.
        return {n: walk(n, quorum_hostile if n == QUORUM else hostile) for n in names}

    groups = [[name] for name in MAKERS if name != "skip_messages"] + [["skip_messages", QUORUM]]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=WALKERS) as pool:
        results: dict[str, tuple[Walk | None, BaseException | None]] = {}
        for done in pool.map(by_dag, groups):
            results |= done
    seconds = time.monotonic() - started
    after = snapshot(roots, _database_or_scratch(home))
    ledger = Path(cursorops_home.ledger_root)
    changed = [
        path
        for path in sorted(before.keys() | after.keys())
        if before.get(path) != after.get(path)
        and not (
            path not in before
            and any(Path(path).is_relative_to(ledger / own) for own in (redriven, *fresh))
        )
    ]
    yield Outcome(
        {
            name: Walked(
                cases[name],
                *results[name],
                decoy,
                decoy_before,
                quorum_hostile if name == QUORUM else hostile,
            )
            for name in cases
        },
        changed,
        seconds,
    )


def check_walked(outcome: Outcome, name: str) -> None:
    walked = outcome.walked[name]
    case, walk = walked.case, walked.walk
    if walked.error is not None:
        raise walked.error
    assert walk is not None
    assert walk.final == "success", (walk.states, walk.dag, walk.run)
    assert walk.unforged_boundaries() == [], walk.forges
    assert walk.forged > len(walk.chain)
    config = case_config(walked)
    with Broker(config) as broker:
        record = broker.metadata.plans.current(case.dag, walk.run)
        shown = {r.gate: r for r in broker.metadata.plans.requests(case.dag, walk.run)}
        decoy_record = broker.metadata.plans.get(walked.hostile.decoy_digest)
    assert record is not None and record.topic == case.topic
    assert case.digest in ([], [record.digest])
    # What each gate showed is the run's own plan, on its own topic, and that plan was
    # applied, once; the decoy plan the forged digests named was not.
    assert walk.answered and set(walk.answered) <= set(shown)
    for gate in walk.answered:
        assert shown[gate].digest == record.digest
        body = walk.shown[gate]["body"]
        assert _unescaped(case.topic) in _unescaped(body), body
        assert _unescaped(walked.decoy.topic) not in _unescaped(body), body
    assert record.applied_at_ms is not None
    assert decoy_record is not None and decoy_record.applied_at_ms is None
    case.effect()
    [request] = audit(config, case.topic, f"{record.operation}-request")
    assert request["outcome"] == "applied", request
    assert request["planDigest"] == record.digest
    assert walked.decoy.unacknowledged() == walked.decoy_before
    for kind in ("skip", "skip-request", "skip-refused"):
        assert audit(config, walked.decoy.topic, kind) == []
    assert outcome.changed == []
    assert sorted(p.name for p in walked.hostile.folder.iterdir()) == ["keep.txt"]


def case_config(walked: Walked) -> Config:
    return walked.decoy.config


def _unescaped(text: str) -> str:
    return text.replace("\\", "")


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_forged_xcoms_change_nothing_the_run_applies(walked: Outcome, name: str) -> None:
    check_walked(walked, name)


def test_a_forged_approval_count_does_not_cut_a_quorum_short(walked: Outcome) -> None:
    check_walked(walked, QUORUM)
    [request] = audit(
        walked.walked[QUORUM].decoy.config, walked.walked[QUORUM].case.topic, "skip-request"
    )
    assert request["approvedBy"] == ["bob", "admin"]


def test_the_walk_ran_its_runs_side_by_side(walked: Outcome) -> None:
    print(f"walked {len(walked.walked)} runs in {walked.seconds:.0f} s")
    assert {w.case.dag for w in walked.walked.values()} == set(DAGS)

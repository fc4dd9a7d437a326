"""``cursorops demo --protocol``: a real Pulsar app's poison pill, skipped after a second
person's approval in Airflow.

On the home, the namespace ``demo/four-eyes`` requires an approval for every skip;
alice and bob may skip there. A ``cursorops standalone`` serves the home; an app in
a separate process, the official ``pulsar-client``, consumes orders with batch-index
acks and negatively acknowledges one poison pill inside a batch, over and over.
The exact backlog shows that only the pill is left (its batch neighbours stay
acknowledged). A local Airflow starts on the same home (or the one passed in is
used). alice, the operator, asks for the skip of the id the app printed as she
would anywhere: ``cursorops --admin-url ... --login alice topics skip-messages``,
whose REST call answers 202 and starts ``cursorops_skip_messages`` as her. The
preview at the approval gate is printed; alice approving her own request is
refused, and the app still gets the pill; bob approves; the run applies the skip.
The app, still running, moves on (it acknowledges new orders) and, by its own
output, never gets the pill again.

Every process started here (the standalone, the app, Airflow) is stopped on the
way out, also on an error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

import cursorops.airflow.bundle as bundle
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import AlreadyExistsError, InvalidArgumentError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.services.broker import Broker, wall_clock_ms

if TYPE_CHECKING:
    from cursorops.airflow.local_airflow import Airflow

TENANT = "demo"
NAMESPACE = "demo/four-eyes"
"""Where every skip waits for a second person's approval (kept apart from ``demo/ops``,
where ``cursorops demo`` skips directly)."""
SUBSCRIPTION = "billing"
REQUESTER = "alice"
APPROVER = "bob"
SKIP_DAG = "cursorops_skip_messages"
GATE = "approve_skip"
ORDERS = 100
LATER_ORDERS = 10
"""Orders produced once the skip is applied: the app takes them, and never the pill."""
BATCH = 10
PILL_AT = 57
NACKS_BEFORE_SKIP = 3
IN_FLIGHT_S = 2.0
"""After the skip commits, a pill delivery already on its way may still reach the app this
long (a bound for a loaded machine: on an idle one, well under a second)."""
QUIET_S = 3.0
"""How long the app is watched after that and after it took the later orders (a nacked
pill comes back after 0.3 s)."""
APP_TIMEOUT_S = 120.0

_APP = textwrap.dedent(
    """
    import json, sys, time, pulsar
    url, topic, subscription = sys.argv[1:4]
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    acked = nacks = 0
    def say(**event):
        print(json.dumps({"t": time.time(), "acked": acked, "nacks": nacks, **event}), flush=True)
    try:
        consumer = client.subscribe(
            topic, subscription, consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
            batch_index_ack_enabled=True, negative_ack_redelivery_delay_ms=300,
        )
        while True:
            try:
                message = consumer.receive(500)
            except pulsar.Timeout:
                say()
                continue
            if message.data().startswith(b"POISON"):
                nacks += 1
                consumer.negative_acknowledge(message)
                mid = message.message_id()
                say(pill=[mid.ledger_id(), mid.entry_id(), mid.batch_index()])
            else:
                acked += 1
                consumer.acknowledge(message)
                say(order=message.data().decode())
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    finally:
        client.close()
    """
)
"""The app: it prints one JSON line per message (``pill`` with its id when it nacks the
pill, ``order`` when it acknowledges one) and one every 0.5 s without a message; ``t`` is
its wall clock. It ends when its output is closed or on Ctrl-C."""

Line = Callable[[str], None]


class App:
    """The app's process and every line it printed, read by a thread as they come (the app
    never blocks on a full pipe, whatever the demo is waiting for)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(text)
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait(
        self, wanted: Callable[[dict[str, Any]], bool], timeout: float
    ) -> dict[str, Any] | None:
        """The first line (already printed or to come) for which ``wanted`` holds; None if
        none within ``timeout`` seconds. An app that exited is an error."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for event in self.events[seen:]:
                    if wanted(event):
                        return event
                seen = len(self.events)
                if self._ended:
                    raise RuntimeError(f"the app exited ({self.process.poll()})")
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)

    def latest(self) -> dict[str, Any]:
        with self._changed:
            return dict(self.events[-1]) if self.events else {"acked": 0, "nacks": 0}

    def pills(self) -> list[dict[str, Any]]:
        """Every delivery of the pill the app reported, in order."""
        with self._changed:
            return [event for event in self.events if "pill" in event]


def run(
    config: Config, role: str, *, say: TextIO | None = None, airflow: Airflow | None = None
) -> dict[str, object]:
    """Tell the story on ``config``'s home as ``role`` (a superuser: it creates the tenant);
    return a summary with the checks (and print each step to ``say``). Airflow is started
    and stopped here unless ``airflow``, one already running on this home, is given."""

    _require_parts(start_airflow=airflow is None)

    def line(text: str = "") -> None:
        if say is not None:
            print(text, file=say, flush=True)

    stamp = datetime.now(tz=UTC).strftime("%Y%m%d-%H%M%S")
    topic = f"persistent://{NAMESPACE}/orders-{stamp}-{secrets.token_hex(2)}"
    summary: dict[str, object] = {"topic": topic, "subscription": SUBSCRIPTION}
    checks: dict[str, bool] = {}
    with contextlib.ExitStack() as stack:
        stack.enter_context(_sigterm_as_interrupt())
        with Broker(config) as broker:
            _prepare(broker, role)
        line(
            f"[1] namespace {NAMESPACE}: every skip waits for a second person's approval in "
            f"Airflow; {REQUESTER} and {APPROVER} may skip"
        )
        url = stack.enter_context(_standalone(config))
        line(f"[2] cursorops standalone serves {config.home} at {url}")
        _produce(url, topic, [f"order {i}" for i in range(ORDERS)], pill=PILL_AT)
        line(
            f"[3] {ORDERS} orders produced in batches of {BATCH} to {topic}; "
            f"order {PILL_AT} is a poison pill"
        )
        app = stack.enter_context(_app(url, topic))
        first = app.wait(
            lambda e: e["acked"] >= ORDERS - 1 and e["nacks"] >= NACKS_BEFORE_SKIP, APP_TIMEOUT_S
        )
        if first is None:
            raise RuntimeError(f"the app did not get through the orders in {APP_TIMEOUT_S:.0f} s")
        ledger, entry, index = app.pills()[-1]["pill"]
        pill = MessageId(ledger, entry, -1, index)
        triplet = pill.triplet()
        summary["pill"] = triplet
        line(
            f"[4] the app (official pulsar-client, pid {app.process.pid}, Shared subscription "
            f"'{SUBSCRIPTION}', batch-index acks) acknowledged {first['acked']} orders and "
            f"negatively acknowledged the pill {triplet} {first['nacks']} times"
        )
        before = _backlog(config, role, topic)
        line(
            f"[5] exact backlog: {before} message: the pill (its {BATCH - 1} batch neighbours "
            "stay acknowledged by batch-index acks; Pulsar's analyze-backlog would count the "
            f"whole batch, {BATCH}); the app keeps getting it"
        )
        checks["only the pill is left (exact backlog 1)"] = before == 1

        if airflow is None:
            line(
                "[6] Airflow on the same home (standalone: api-server, scheduler, dag-processor;"
                " LocalExecutor, SQLite), started for the demo and stopped at the end"
            )
            airflow = stack.enter_context(_local_airflow(config, line, app))
        else:
            line("[6] Airflow already running on the same home")
        line(f"    {airflow.base_url}  (logs: {airflow.log})")

        command = [
            "cursorops",
            "--admin-url",
            f"{airflow.base_url}/cursorops",
            "--login",
            REQUESTER,
            "-o",
            "json",
            "topics",
            "skip-messages",
            topic,
            "-s",
            SUBSCRIPTION,
            "--messageId-triplet",
            triplet,
            "--reason",
            f"poison pill: order {PILL_AT} fails every time",
            "--ticket",
            "OPS-1",
        ]
        line(
            f"[7] {REQUESTER}, the operator, asks for the skip as anywhere else (the REST call "
            "answers 202 on this namespace and starts the skip workflow as her):"
        )
        line(f"    $ CURSOROPS_PASSWORD=*** {shlex.join(command)}")
        requested_at = time.time()
        asked = _cursorops(command[1:], password=f"{REQUESTER}-pw")
        run_id = str(asked["runId"])
        summary["runId"] = run_id
        line(f"    run {run_id} of {asked['dagId']} started; nothing is skipped yet")
        line(f"    approve or reject at {asked['url']}")
        line("    waiting for the approval gate ...")
        detail = airflow.wait_awaiting_input(SKIP_DAG, run_id, GATE)
        assigned = sorted(str(u["id"]) for u in detail["assigned_users"])
        line(
            f"[8] the preview, what the approver reads at the gate (assigned: "
            f"{', '.join(assigned)}; never the requester):"
        )
        # As the page shows it: backslash escapes (requester text made inert) read as text.
        shown = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(detail["body"]))
        for text in shown.splitlines():
            line("    | " + text)
        checks["the preview at the gate names the pill"] = f"| {triplet} |" in shown

        refused_at = time.time()
        refused = airflow.answer(SKIP_DAG, run_id, GATE, "Approve", user=REQUESTER)
        again = app.wait(lambda e: "pill" in e and e["t"] > refused_at, 30)
        still = _backlog(config, role, topic)
        applied_early = _skip_records(config, role, topic)
        line(
            f"[9] {REQUESTER} approves her own request: HTTP {refused.status_code}: "
            f"{_detail(refused)}"
        )
        line(
            f"    nothing is applied: exact backlog {still}; the app got the pill again "
            f"(nack #{again['nacks'] if again else '?'})"
        )
        checks[f"{REQUESTER}'s own approval refused (HTTP 403)"] = refused.status_code == 403
        checks["nothing applied before the approval: the app still gets the pill"] = (
            again is not None and still == 1 and not applied_early
        )

        approved_at_ms = wall_clock_ms()
        approved = airflow.answer(SKIP_DAG, run_id, GATE, "Approve", user=APPROVER)
        line(f"[10] {APPROVER} approves: HTTP {approved.status_code}; waiting for the run ...")
        state = airflow.wait_run(SKIP_DAG, run_id)
        for task, states in airflow.task_states(SKIP_DAG, run_id).items():
            line(f"    {task:<19} {', '.join(states)}")
        line(f"    run: {state}")
        checks[f"{APPROVER}'s approval accepted"] = approved.status_code == 200
        checks["run succeeded"] = state == "success"

        skips = _skip_records(config, role, topic)
        applied_at_ms = skips[0].at_ms if skips else None
        with Broker(config) as broker:
            requests = broker.workflow.audit_log(role, topic, kind="skip-request")
        record = requests[0].detail if requests else {}
        checks[f"recorded: asked by {REQUESTER}, approved by {APPROVER}"] = (
            record.get("requester") == REQUESTER
            and (record.get("answer") or {}).get("by") == APPROVER
        )
        checks[f"applied after {APPROVER}'s approval, once"] = (
            len(skips) == 1 and applied_at_ms is not None and applied_at_ms >= approved_at_ms
        )

        acked_before = int(app.latest()["acked"])
        _produce(url, topic, [f"order {ORDERS + i}" for i in range(LATER_ORDERS)])
        moved_on = app.wait(lambda e: e["acked"] >= acked_before + LATER_ORDERS, APP_TIMEOUT_S)
        if moved_on is not None:
            since = max(float(moved_on["t"]), (applied_at_ms or 0) / 1000 + IN_FLIGHT_S)
            app.wait(lambda e: e["t"] > since + QUIET_S, QUIET_S + 30)
        after = _backlog(config, role, topic)
        late = [
            e
            for e in app.pills()
            if applied_at_ms is None or e["t"] * 1000 > applied_at_ms + IN_FLIGHT_S * 1000
        ]
        last = app.pills()[-1]
        line(
            f"[11] the app (pid {app.process.pid}, still running) moved on: it acknowledged "
            f"the {LATER_ORDERS} orders produced after the skip; exact backlog {after}"
        )
        if late:
            since_skip = f"and {len(late)} times after the skip"
        elif applied_at_ms is not None and last["t"] * 1000 > applied_at_ms:
            since_skip = "in flight as the skip committed; never after the skip"
        else:
            since_skip = "never after the skip"
        line(
            f"    {APPROVER} approved at {_utc(approved_at_ms)}, the skip was applied at "
            f"{_utc(applied_at_ms)}; the app got the pill last at {_utc(last['t'] * 1000)} "
            f"(nack #{last['nacks']}), {since_skip}"
        )
        checks["the app moved on: it took the later orders"] = (
            moved_on is not None and app.process.poll() is None
        )
        checks["the pill is never delivered again (the app's own output)"] = (
            applied_at_ms is not None and not late
        )
        checks["exact backlog 0"] = after == 0
        summary.update(
            {
                "requester": REQUESTER,
                "approver": APPROVER,
                "backlogBefore": before,
                "backlogAfter": after,
                "requestedAtMs": int(requested_at * 1000),
                "refusedAtMs": int(refused_at * 1000),
                "approvedAtMs": approved_at_ms,
                "appliedAtMs": applied_at_ms,
                "pillDeliveries": len(app.pills()),
                # The evidence, from the app's own output: its every delivery of the pill
                # since alice asked (its wall clock).
                "pillDeliveredAtMs": [
                    int(e["t"] * 1000) for e in app.pills() if e["t"] >= requested_at
                ],
            }
        )
        line("[12] stopping what the demo started ...")
    line("    the app and cursorops standalone stopped")
    summary["checks"] = checks
    summary["ok"] = all(checks.values())
    line("\nchecks:")
    for name, ok in checks.items():
        line(f"    {'ok  ' if ok else 'FAIL'}  {name}")
    return summary


def _require_parts(*, start_airflow: bool) -> None:
    """Before anything changes: the optional parts the demo runs, which the ``airflow``
    extra installs (the Pulsar client of the app and the producer; Airflow, its DAGs and
    its launcher when the demo starts it)."""
    parts = {"pulsar": "the Pulsar client"}
    if start_airflow:
        parts["airflow"] = "Airflow"
    missing = [name for module, name in parts.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise InvalidArgumentError(
            f"the protocol demo needs {' and '.join(missing)}: {bundle.INSTALL_HINT}"
        )
    if start_airflow:
        bundle.dags_folder()
        bundle.scripts_folder()


def _prepare(broker: Broker, role: str) -> None:
    """The tenant and the namespace (created on the first run, reused after), its approval
    policy, and the requester's and approver's permission to skip there."""
    with contextlib.suppress(AlreadyExistsError):
        broker.admin.create_tenant(role, TENANT)
    with contextlib.suppress(AlreadyExistsError):
        broker.admin.create_namespace(role, NAMESPACE)
    broker.admin.set_namespace_policy(role, NAMESPACE, skip_requires_approval=True)
    for user in (REQUESTER, APPROVER):
        broker.admin.grant_permission(role, NAMESPACE, user, ["consume"])


def _backlog(config: Config, role: str, topic: str) -> int:
    """The subscription's exact backlog in messages."""
    with Broker(config) as broker:
        return sum(
            p.result.messages for p in broker.analysis.analyze_backlog(role, topic, SUBSCRIPTION)
        )


def _skip_records(config: Config, role: str, topic: str) -> list[Any]:
    """The applied skips' audit records of the topic (each written with its acks)."""
    with Broker(config) as broker:
        return list(broker.workflow.audit_log(role, topic, kind="skip"))


def _produce(url: str, topic: str, bodies: list[str], pill: int | None = None) -> None:
    """``bodies`` through the official client, batched; the one at ``pill`` poisoned."""
    import pulsar

    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=BATCH,
            batching_max_publish_delay_ms=50,
        )
        for i, body in enumerate(bodies):
            producer.send_async(
                f"POISON PILL {body}".encode() if i == pill else body.encode(), None
            )
        producer.flush()
    finally:
        client.close()


def _cursorops(argv: list[str], *, password: str) -> dict[str, Any]:
    """``cursorops ARGV`` in a process of its own, as the operator runs it; its JSON."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    env.update(CURSOROPS_PASSWORD=password)
    done = subprocess.run(
        [sys.executable, "-m", "cursorops.cli.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cursorops exited {done.returncode}: {done.stderr.strip()}")
    return dict(json.loads(done.stdout))


def _detail(response: Any) -> str:
    try:
        return str(response.json().get("detail", response.text))
    except ValueError:
        return str(response.text)


def _utc(ms: float | None) -> str:
    if ms is None:
        return "(never)"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3] + " UTC"


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the demo as Ctrl-C does, through every cleanup (only the main thread
    can set a handler; elsewhere the caller's handling stays)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _standalone(config: Config) -> Iterator[str]:
    from cursorops.local import brokers

    metadata_url = None if config.metadata_url.startswith("sqlite:") else config.metadata_url
    with brokers.standalone(
        config.home, metadata_url=metadata_url, extra=("--log-level", "warning")
    ) as server:
        yield server.service_url


@contextlib.contextmanager
def _app(url: str, topic: str) -> Iterator[App]:
    process = subprocess.Popen(
        [sys.executable, "-c", _APP, url, topic, SUBSCRIPTION],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield App(process)
    finally:
        process.kill()
        process.wait(10)


@contextlib.contextmanager
def _local_airflow(config: Config, line: Line, app: App) -> Iterator[Airflow]:
    """Airflow on ``config``'s home, only the skip DAG active, without a Spark Connect
    server (the skip DAG runs no Spark job); stopped on the way out."""
    from cursorops.airflow.local_airflow import start_airflow

    def progress(text: str) -> None:
        line(f"    {text}; the app has nacked the pill {app.latest()['nacks']} times")

    airflow = start_airflow(
        config.home / "airflow-demo",
        {
            "CURSOROPS_HOME": str(config.home),
            "CURSOROPS_METADATA_URL": config.metadata_url,
            "CURSOROPS_LEDGER_ROOT": config.ledger_root,
            "CURSOROPS_SPARK_CONNECT": "0",
        },
        only_dag=True,
        progress=progress,
    )
    try:
        yield airflow
    finally:
        line("    stopping Airflow (SIGINT to standalone: every Airflow process ends) ...")
        airflow.stop()
        line("    Airflow stopped")

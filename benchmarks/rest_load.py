"""50 concurrent REST clients skip, consumers acknowledge, on one subscription (PostgreSQL).

Airflow's real api-server (``airflow api-server --apps core``, :data:`API_WORKERS`
workers, or ``AIRFLOW__API__WORKERS``; the cursorops plugin mounted) serves the
REST app; the cursorops metadata store is a fresh schema on PostgreSQL
(``CURSOROPS_TEST_PG_URL``; start a durable one with
``CURSOROPS_TEST_PG_DURABLE=1 bash scripts/start-postgres.sh``: the section
states the server's fsync, synchronous_commit and full_page_writes), the
ledgers a local folder. Each run: one Shared subscription of a fresh
4-partition topic of batched messages, on the same server.

For a bounded time per run (30 s; ``--quick`` 5 s):

- 50 REST clients (threads, one HTTP connection each, alice's bearer token)
  each call ``skipByMessageIds`` with 2 ids at a time from its own disjoint
  share of the messages (PIP-423's ``messageId`` form);
- 2 consumer processes receive and acknowledge through the Broker (Pulsar has
  no REST route for a consumer's acknowledgement: it is a binary-protocol
  command, so consumers acknowledge where Pulsar's do), :data:`CONSUMED_PER_S`
  messages a second between them.

Then it checks: every request answered 204 (none failed); no acknowledgement
lost (every id a consumer acknowledged and every id a 204 skipped is
acknowledged in the store); no skipped message delivered after its skip
answered (no consume call that started after the answer returned it, and a
final drain two hours ahead returns none); every message received at most
once. It writes the medians over ``--runs`` runs of requests per second and p50/p99
latency to ``docs/benchmarks.md`` (section ``rest_load``) through
:mod:`benchmarks.report`. A run with a failed request or a broken invariant
exits 1 and writes nothing.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks import machine, report
from benchmarks.report import Options

if TYPE_CHECKING:
    from cursorops.airflow.local_airflow import ApiServer

SECTION = "rest_load"
REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
TENANT, NAMESPACE = "bench", "bench/load"
SUBSCRIPTION = "load"
CLIENTS = 50
CONSUMERS = 2
CONSUMED_PER_S = 450
"""What the consumers receive and acknowledge a second between them: a fixed load, what
consumers polling as fast as they could managed before a consume stopped reading ahead
(13,500 messages a run). Unpaced, their share of the cores grows as receiving gets cheaper,
and the REST figure would fall for it (docs/decisions/, "REST under load")."""
IDS_PER_REQUEST = 2
PARTITIONS = 4
TWO_HOURS_MS = 2 * 3_600_000
API_WORKERS = 2
"""The api-server's workers (docs/decisions/ says why); ``AIRFLOW__API__WORKERS`` overrides."""
ARRIVAL_S = 0.5
"""The clients open their connections over this long."""
DURABILITY = ("fsync", "synchronous_commit", "full_page_writes")


@dataclass(frozen=True)
class Sizes:
    seconds: float
    messages: int
    batch: int


FULL = Sizes(seconds=30.0, messages=40_000, batch=10)
QUICK = Sizes(seconds=5.0, messages=4_000, batch=10)


@dataclass
class ClientLog:
    latencies: list[float] = field(default_factory=list)
    skipped: dict[str, float] = field(default_factory=dict)
    """label → when the 204 came back (time.time())."""
    failures: list[str] = field(default_factory=list)


def label(partition: int, ledger: int, entry: int, batch: int) -> str:
    return f"{partition}/{ledger}:{entry}:{batch}"


# -- the stores --------------------------------------------------------------------


def durability() -> dict[str, str]:
    """The test server's durability settings (:data:`DURABILITY`)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(os.environ["CURSOROPS_TEST_PG_URL"], poolclass=NullPool)
    with engine.connect() as connection:
        found = {
            name: str(connection.execute(text(f"SHOW {name}")).scalar()) for name in DURABILITY
        }
    engine.dispose()
    return found


def api_workers() -> int:
    text = os.environ.get("AIRFLOW__API__WORKERS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else API_WORKERS


def create_namespace(config: Any) -> None:
    from cursorops.core.services.broker import Broker

    with Broker(config) as broker:
        broker.admin.create_tenant("admin", TENANT)
        broker.admin.create_namespace("admin", NAMESPACE)
        broker.admin.grant_permission("admin", NAMESPACE, "alice", ["consume"])


def seed(config: Any, sizes: Sizes, run: int) -> tuple[str, list[tuple[str, dict[str, int]]]]:
    """Run ``run``'s topic and every message as (label, messageId body)."""
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.producer import OutgoingMessage

    topic = f"persistent://{NAMESPACE}/events-{run}"
    with Broker(config) as broker:
        broker.admin.create_topic("admin", topic, PARTITIONS)
        broker.admin.create_subscription(
            "admin", topic, SUBSCRIPTION, SubscriptionType.SHARED, initial_position="earliest"
        )
        messages = [
            OutgoingMessage(payload=f"m{i}".encode(), key=f"k{i % 97}")
            for i in range(sizes.messages)
        ]
        ids = broker.producing.produce("admin", topic, messages, batch_size=sizes.batch)
    out = [
        (
            label(m.partition, m.ledger_id, m.entry_id, m.batch_index),
            {"ledgerId": m.ledger_id, "entryId": m.entry_id, "batchIndex": m.batch_index},
        )
        for m in ids
    ]
    return topic, out


# -- Airflow's api-server ----------------------------------------------------------


def start_api_server(work: Path, environ: dict[str, str]) -> ApiServer:
    from cursorops.airflow.local_airflow import start_api_server as start

    return start(
        work / "airflow",
        {
            **environ,
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(work / "no-dags"),
            "PYTHONPATH": str(REPO),
            "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
        },
        users={"admin": "admin", "alice": "op"},
        workers=api_workers(),
    )


# -- where the CPU goes -----------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command (field 3 on), or None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def session_cpu(session: int) -> float:
    """CPU seconds used so far by the live processes of ``session`` (the api-server's)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        fields = _proc_stat(int(entry.name)) if entry.name.isdigit() else None
        if fields and int(fields[3]) == session:
            total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def postgres_cpu(port: int) -> float:
    """CPU seconds used so far by the PostgreSQL server on ``port``: its postmaster and live
    processes, and the backends that exited (their time is added to the postmaster's
    children's)."""
    pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    postmaster = None
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        postgres = bool(argv) and argv[0].endswith(b"/postgres") and b"-p" in argv
        if postgres and argv[argv.index(b"-p") + 1 :][:1] == [str(port).encode()]:
            postmaster = pid
    if postmaster is None:
        return float("nan")
    total = 0.0
    for pid in pids:
        fields = _proc_stat(pid)
        if fields and (pid == postmaster or int(fields[1]) == postmaster):
            total += sum(int(value) for value in fields[11:15]) / _TICK
    return total


def connections_per_worker(session: int, port: int) -> list[int]:
    """Established connections to ``port`` held by each process of ``session``, most first."""
    established = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                established.add(fields[9])  # the socket's inode
    held = []
    for entry in Path("/proc").iterdir():
        fields = _proc_stat(int(entry.name)) if entry.name.isdigit() else None
        if not fields or int(fields[3]) != session:
            continue
        count = 0
        try:
            for fd in (entry / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in established:
                    count += 1
        except OSError:
            continue
        if count:
            held.append(count)
    return sorted(held, reverse=True)


# -- the load ----------------------------------------------------------------------


def client(
    base_url: str,
    path: str,
    token: str,
    share: Sequence[tuple[str, dict[str, int]]],
    until: float,
    log: ClientLog,
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=120) as http:
        for start in range(0, len(share), IDS_PER_REQUEST):
            # A client's first request goes out whatever the time: every client is heard at
            # least once however slowly its thread got going on a loaded machine.
            if start and time.monotonic() >= until:
                return
            chunk = share[start : start + IDS_PER_REQUEST]
            began = time.perf_counter()
            try:
                answer = http.post(
                    path, json={"type": "messageId", "messageIds": [body for _, body in chunk]}
                )
            except httpx.HTTPError as exc:
                log.failures.append(f"{type(exc).__name__}: {exc}")
                continue
            log.latencies.append(time.perf_counter() - began)
            if answer.status_code == 204:
                done = time.time()
                for name, _ in chunk:
                    log.skipped[name] = done
            else:
                log.failures.append(f"{answer.status_code} {answer.text[:200]}")


def consumer(config_json: str, topic: str, seconds: float, out: Any) -> None:
    """Receive and acknowledge through the Broker until the time is up; report each batch's
    start time and the labels it returned."""
    from cursorops.core.domain.config import Config
    from cursorops.core.services.broker import Broker

    fields = json.loads(config_json)
    config = Config.from_home(
        fields["home"], metadata_url=fields["metadata_url"], ledger_root=fields["ledger_root"]
    )
    batches: list[tuple[float, list[str]]] = []
    started = time.monotonic()
    until = started + seconds
    per_second = CONSUMED_PER_S / CONSUMERS
    received = 0
    with Broker(config) as broker:
        while time.monotonic() < until:
            # Paced: the next batch waits until this consumer is behind its share.
            ahead = started + received / per_second - time.monotonic()
            if ahead > 0:
                time.sleep(min(ahead, until - time.monotonic(), 1.0))
                continue
            began = time.time()
            got = broker.reading.consume("alice", topic, SUBSCRIPTION, 100, ack=True)
            batches.append(
                (
                    began,
                    [
                        label(
                            m.message_id.partition,
                            m.message_id.ledger_id,
                            m.message_id.entry_id,
                            m.message_id.batch_index,
                        )
                        for m in got
                    ],
                )
            )
            received += len(got)
            if not got:
                time.sleep(0.05)
    out.put((batches, time.process_time()))


@dataclass(frozen=True)
class Results:
    requests: int
    seconds: float
    latencies: list[float]
    skipped: int
    consumed: int
    failures: list[str]
    violations: list[str]
    remaining: int
    split: list[int] = field(default_factory=list)
    """Client connections per api-server worker while loaded."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds of the loaded window by process: api-server, clients, consumers,
    PostgreSQL."""


def measure(sizes: Sizes, work: Path, runs: int) -> list[Results]:
    """``runs`` bounded runs on one api-server, each on a fresh topic."""
    from cursorops.core.domain.config import Config
    from cursorops.local import postgres

    with contextlib.ExitStack() as stack:
        url, _schema = stack.enter_context(
            postgres.schema(os.environ[postgres.URL_ENV], prefix="bench")
        )
        config = Config.from_home(work / "cursorops", metadata_url=url)
        create_namespace(config)
        server = start_api_server(
            work,
            {
                "CURSOROPS_HOME": str(config.home),
                "CURSOROPS_METADATA_URL": url,
                "CURSOROPS_LEDGER_ROOT": str(config.ledger_root),
            },
        )
        stack.callback(server.stop)
        token = httpx.post(
            f"{server.base_url}/auth/token",
            json={"username": "alice", "password": "alice-pw"},
            timeout=60,
        ).json()["access_token"]
        results = []
        for run in range(runs):
            results.append(measure_one(sizes, config, server, token, run))
            print(f"run {run + 1}/{runs}: {summary(results[-1])}", file=sys.stderr)
        return results


def summary(r: Results) -> str:
    p50, p99 = percentile(r.latencies, 0.50), percentile(r.latencies, 0.99)
    return (
        f"connections per worker {r.split}, "
        f"{r.requests / r.seconds:.1f} requests/s, p50 {p50 * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, {len(r.failures)} failed, {len(r.violations)} violation(s)"
    )


def measure_one(sizes: Sizes, config: Any, server: ApiServer, token: str, run: int) -> Results:
    from sqlalchemy.engine import make_url

    from cursorops.core.services.broker import Broker, wall_clock_ms

    topic, messages = seed(config, sizes, run)
    path = (
        "/cursorops/admin/v2/persistent/"
        + topic.removeprefix("persistent://")
        + f"/subscription/{SUBSCRIPTION}/skipByMessageIds"
    )
    shuffled = list(messages)
    random.Random(7).shuffle(shuffled)
    shares = [shuffled[i::CLIENTS] for i in range(CLIENTS)]
    logs = [ClientLog() for _ in range(CLIENTS)]

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    config_json = json.dumps(
        {
            "home": str(config.home),
            "metadata_url": config.metadata_url,
            "ledger_root": str(config.ledger_root),
        }
    )
    consumers = [
        context.Process(target=consumer, args=(config_json, topic, sizes.seconds, queue))
        for _ in range(CONSUMERS)
    ]
    for process in consumers:
        process.start()
    pg_port = make_url(config.metadata_url).port or 5432
    server_cpu, pg_cpu = session_cpu(server.process.pid), postgres_cpu(pg_port)
    client_cpu = time.process_time()
    began = time.monotonic()
    until = began + sizes.seconds
    threads = [
        threading.Thread(
            target=client, args=(server.base_url, path, token, shares[i], until, logs[i])
        )
        for i in range(CLIENTS)
    ]
    for thread in threads:
        # Clients arrive over half a second, not in one instant: a worker's event loop
        # accepts every connection waiting when it wakes, so a burst of 50 lands on the
        # first worker to wake and the other idles (measured: 48 and 2).
        thread.start()
        time.sleep(ARRIVAL_S / CLIENTS)
    split = connections_per_worker(server.process.pid, int(server.base_url.rsplit(":", 1)[1]))
    for thread in threads:
        thread.join()
    seconds = time.monotonic() - began
    cpu = {
        "api-server": session_cpu(server.process.pid) - server_cpu,
        "clients": time.process_time() - client_cpu,
        "PostgreSQL": postgres_cpu(pg_port) - pg_cpu,
    }
    reports = [queue.get(timeout=600) for _ in consumers]
    batches = [batch for got, _ in reports for batch in got]
    # A consumer's whole life: its start-up and its last batch outside the window included.
    cpu["consumers"] = sum(used for _, used in reports)
    for process in consumers:
        process.join(timeout=120)

    skipped = {name: at for log in logs for name, at in log.skipped.items()}
    received = [name for _, names in batches for name in names]
    violations = []
    if len(received) != len(set(received)):
        violations.append("a message was received twice")
    for began_at, names in batches:
        late = [n for n in names if n in skipped and skipped[n] < began_at]
        if late:
            violations.append(f"skipped then delivered: {late[:5]}")
    with Broker(config, clock=lambda: wall_clock_ms() + TWO_HOURS_MS) as broker:
        unacked = {
            label(m.message_id.partition, m.message_id.ledger_id, m.message_id.entry_id,
                  m.message_id.batch_index)
            for m in broker.reading.peek_messages("admin", topic, SUBSCRIPTION, sizes.messages + 1)
        }  # fmt: skip
        lost = (set(received) | set(skipped)) & unacked
        if lost:
            violations.append(f"{len(lost)} acknowledgement(s) lost: {sorted(lost)[:5]}")
        drained: list[str] = []
        while got := broker.reading.consume("admin", topic, SUBSCRIPTION, 1000, ack=True):
            drained += [
                label(m.message_id.partition, m.message_id.ledger_id, m.message_id.entry_id,
                      m.message_id.batch_index)
                for m in got
            ]  # fmt: skip
    if set(drained) & set(skipped):
        violations.append("a skipped message was delivered after the run")
    every = {name for name, _ in messages}
    if set(drained) != every - set(received) - set(skipped):
        violations.append("the drain does not return exactly the messages left")
    return Results(
        requests=sum(len(log.latencies) for log in logs),
        seconds=seconds,
        latencies=sorted(x for log in logs for x in log.latencies),
        skipped=len(skipped),
        consumed=len(received),
        failures=[f for log in logs for f in log.failures],
        violations=violations,
        remaining=len(unacked),
        split=split,
        cpu=cpu,
    )


CPU_GROUPS = ("api-server", "clients", "consumers", "PostgreSQL")


def cpu_rows(results: Sequence[Results]) -> list[list[str]]:
    """Median CPU milliseconds per request of each group, their total, and the rate that
    total allows on this machine's cores."""
    rows = []
    totals = [1000 * sum(r.cpu.values()) / r.requests for r in results if r.requests]
    for group in CPU_GROUPS:
        each = report.Runs.of([1000 * r.cpu[group] / r.requests for r in results if r.requests])
        rows.append([group, each.cell("ms")])
    total = report.Runs.of(totals)
    cores = os.cpu_count() or 1
    rows.append(["all of them", total.cell("ms")])
    rows.append(
        [f"requests/s that CPU allows on {cores} cores", f"{cores * 1000 / total.median:.0f}"]
    )
    return rows


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted values."""
    index = max(0, min(len(sorted_values) - 1, int(round(q * len(sorted_values) + 0.5)) - 1))
    return sorted_values[index]


HISTORY = (
    "Earlier figures of this benchmark: 53.0 requests/s, p50 827 ms, p99 1,800 ms (commit "
    "4ea534e, while other suites loaded the machine, load average 2 to 8); 37.3 requests/s, "
    "p50 742 ms, p99 5,550 ms before the changes below (commit f54302a, load 3.6); 18.1 "
    "requests/s before the skip route became the one skip path (load 6 to 10). The changes "
    '(docs/decisions/, "REST under load"): a skip costs 8 statements instead of 14; its '
    "cursors are locked in one statement and their journals read in one; a long journal is "
    "folded into a snapshot under the skip's lock, so a skip decodes at most 32 deltas per "
    "cursor instead of up to 512; the PostgreSQL pool keeps 20 connections instead of opening "
    "and closing one per transaction past the fifth; each api-server worker runs 4 skips at a "
    "time. The last one moved the queue from PostgreSQL's row locks (about 40 of 55 sessions "
    "waited on a cursor's lock, sampled every 0.25 s) to a turn in the worker: the same rate, "
    "a p99 of about 2 s instead of 6 to 8 s. Then 46.6 requests/s, p50 968 ms, p99 2.1 s "
    "(commit b917438, load average 3), before the changes said below."
)
WHERE_THE_TIME_GOES = (
    "Where it stands. The rate is bound by the CPU of the two cores: the table above says "
    "what each group of processes spends per answered request, and the rate its total allows."
    " 50 clients that each wait for their answer see a mean latency of 50 divided by the "
    "rate, about half a second at that rate. The p99 was about twice the mean until the "
    "api-server's workers froze their start-up heap (`cursorops/rest/heap.py`): a full "
    "garbage collection walked the 600,000-odd objects a worker holds once it has loaded "
    "Airflow, and paused it for 400 to 550 ms every 10 to 15 s under load (timed with "
    "`gc.callbacks`); the slowest 1% of requests came in bursts that ended just after one. "
    "Frozen on the first request, a full collection takes 20 to 60 ms. Of the api-server's "
    "share (py-spy, "
    "samples of the thread holding a worker's interpreter lock) about half is the Broker's "
    "skip, about a sixth Airflow's own token check (`get_user`: the JWT, and a query of "
    "Airflow's revoked tokens on every request), most of the rest Airflow's middlewares "
    "(access log, gzip) and FastAPI. The changes since 46.6 requests/s, each measured on its "
    "own: a replay goes on from the state its process kept for the same snapshot and journal "
    "prefix, so a skip decodes 1.8 stored records instead of 29 (after 2,000 random skips, in"
    " process); runs of 3 gave 73.0 requests/s, p99 1.6 s, 15.2 ms of api-server CPU per "
    "request before it and 101 requests/s, p99 1.07 s, 11.0 ms after. Skips take their turns "
    "first come, first served: p99 1.35 s before, 1.15 s after (same code otherwise). The "
    "statements a skip runs are built once, and the cheap dependencies run on the event loop:"
    " within the noise (70.3 and 71.9 requests/s before, 73.0 after). Two skips at a time per"
    " worker instead of four: the same. Last, the clients arrive over half a second instead "
    "of at once: a worker's event loop accepts every connection waiting when it wakes, and a "
    "burst of 50 gave one worker 48 of them (measured), so one worker did nearly all the work"
    " while the other idled; the figures above are with the connections spread (the split is "
    "in the table), every client waiting alike and both workers competing for the two cores "
    "with the clients, the consumers and PostgreSQL (90.3 requests/s, p99 1.12 s, 19.6 ms per"
    " request, commit 92f6b62). Since then: a skip reads what authorizes it and what "
    "validates its ids in one read transaction, on the connection without an ORM session: one"
    " pooled connection, pre-ping and commit fewer per skip; one run of the code without it "
    "(92.1 requests/s, 12.2 ms of api-server CPU), then two runs with it (medians 99.5 "
    "requests/s and 10.9 ms). A one-off consume no longer reads twice what it returns ahead, "
    "to hand it back at its end: 50 to 22 ms of CPU per consume of 100 in process. The "
    "consumers then polled faster (21,200 messages a run instead of 13,500) and took the CPU "
    "the REST clients gained; they are paced at what they managed before, 450 messages a "
    "second, so the figure measures the REST path on a fixed load. Side by side on that paced"
    " load, runs of 3 one after the other: the code before both changes (commit ddb85f1) 88.9"
    " requests/s, p99 1.05 s, 20.3 ms of CPU per request (its consumers fell behind the pace:"
    " 10,900 messages a run); with them 96.9 requests/s, p99 935 ms, 17.4 ms. Then skips of "
    "one subscription that wait for the same cursors are written together, in one "
    "transaction, and each worker runs 8 skips at a time instead of 4 (bigger batches). "
    "Interleaved runs of 2 (commit c6acb7d, then batched with 8 at a time, then with 4, twice "
    "over) while the machine was slow (the clients' yardstick 2.0 to 2.4 ms): c6acb7d 68.0 "
    "and 62.8, then 69.1 and 69.6 requests/s, 16.5 and 15.5 ms of api-server CPU per request;"
    " 8 at a time 86.6 and 87.7, then 81.9 and 87.9 requests/s, 12.3 and 12.5 ms; 4 at a time"
    " 67.0 and 67.5, then 82.4 and 86.0 requests/s, 15.6 and 12.8 ms. Divided by the clients'"
    " yardstick, the api-server's CPU per request fell by about 9% with 8 at a time and 4% "
    "with 4; the p99 stayed above 1 s for all three in that phase. The clients' CPU per "
    "request is the yardstick of the machine's speed: their code does not change between "
    "runs, yet it went from 1.58 ms to 2.43 ms within a day, and when it is higher every "
    "other figure is too. Runs minutes apart differ by up to a third for it, and the split of"
    " the clients between the two workers moves the rate by up to a tenth. Last, the frozen"
    " heap, interleaved runs of 2 (commit e594500 without it, then with it, twice over; "
    "yardstick 1.3 to 1.4 ms): without it p99 987 ms and 1.10 s, then 1.11 s and 1.30 s "
    "(108.7 to 128.2 requests/s); with it 828 and 605 ms, then 550 and 710 ms (112.3 to "
    "129.5 requests/s). The rate and the CPU per request stay the same (9.5 ms of "
    "api-server CPU either way): the pauses cost little CPU, but every request a paused "
    "worker held waited through them."
)


def render(
    host: machine.Machine,
    sizes: Sizes,
    options: Options,
    work: Path,
    results: Sequence[Results],
    settings: dict[str, str],
) -> str:
    lines = report.preamble(
        "REST under load: 50 clients skip, consumers acknowledge (PostgreSQL)",
        "rest_load",
        host,
        options,
        work,
    )
    durable = settings.get("fsync") == "on" and settings.get("synchronous_commit") == "on"
    server = ", ".join(f"{name} {value}" for name, value in settings.items())
    per_second = report.Runs.of([r.requests / r.seconds for r in results])
    p50 = report.Runs.of([percentile(r.latencies, 0.50) * 1000 for r in results])
    p99 = report.Runs.of([percentile(r.latencies, 0.99) * 1000 for r in results])
    requests = report.Runs.of([float(r.requests) for r in results])
    skipped = report.Runs.of([float(r.skipped) for r in results])
    consumed = report.Runs.of([float(r.consumed) for r in results])
    lost = sum(any("lost" in v for v in r.violations) for r in results)
    delivered = sum(any("delivered" in v for v in r.violations) for r in results)
    lines += [
        f"Airflow's api-server (`--apps core`, {api_workers()} workers) with the cursorops "
        f"plugin; metadata on PostgreSQL ({'durable' if durable else '**not durable**'}: "
        f"{server}); per run, one Shared subscription of a fresh {PARTITIONS}-partition topic "
        f"of {sizes.messages:,} messages in batches of {sizes.batch}, loaded for "
        f"{sizes.seconds:.0f} s. {CLIENTS} REST clients (threads of one process, one "
        f"connection each) call `skipByMessageIds` with {IDS_PER_REQUEST} ids of their own "
        f"disjoint share; {CONSUMERS} consumer processes receive 100 at a time and acknowledge "
        f"through the Broker, {CONSUMED_PER_S} messages a second between them (Pulsar has no "
        "REST acknowledgement). The clients and consumers "
        "run on the same 2 cores as the server. Aim: at least 100 requests/s, p99 under 1 s.",
        "",
        report.table(
            ["figure", "value"],
            [
                ["skip requests answered per run", requests.cell(digits=4)],
                ["requests per second", per_second.cell()],
                ["latency p50", p50.cell("ms")],
                ["latency p99", p99.cell("ms")],
                ["ids skipped (204) per run", skipped.cell(digits=4)],
                ["messages received and acknowledged by consumers per run", consumed.cell()],
                [
                    "client connections per api-server worker, each run",
                    "; ".join(" and ".join(map(str, r.split)) for r in results),
                ],
                ["requests failed", f"{sum(len(r.failures) for r in results):,}"],
                ["runs with an acknowledgement lost", str(lost)],
                ["runs with a skipped message delivered afterwards", str(delivered)],
                [
                    "aim met (median)",
                    report.verdict(per_second.median >= 100 and p99.median < 1000),
                ],
            ],
        ),
        "",
        "Where the CPU went while loaded, per answered request (CPU time of each group of "
        "processes over the loaded window, divided by the requests answered; the consumers' "
        "whole lives, start-up included):",
        "",
        report.table(["processes", "CPU per request"], cpu_rows(results)),
        "",
    ]
    violations = [v for r in results for v in r.violations]
    if violations:
        lines += ["**Violations:** " + "; ".join(violations), ""]
    lines += [HISTORY, "", WHERE_THE_TIME_GOES, ""]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options(
        "50 concurrent REST clients skip and consumers acknowledge on one subscription.", argv
    )
    host = machine.describe()
    sizes = QUICK if options.quick else FULL
    if "CURSOROPS_TEST_PG_URL" not in os.environ:
        raise SystemExit("set CURSOROPS_TEST_PG_URL (bash scripts/start-postgres.sh)")
    settings = durability()
    with report.work_dir(options, "rest-load") as work:
        results = measure(sizes, work, options.runs)
        markdown = render(host, sizes, options, work, results, settings)
    print(markdown)
    failures = [f for r in results for f in r.failures]
    if failures:
        print("failures:", failures[:10], file=sys.stderr)
    if failures or any(r.violations for r in results):
        return 1
    if options.write:
        print(f"wrote {report.write_section(SECTION, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

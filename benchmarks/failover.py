"""Brokers on one store: how long a failover takes, and one broker against two.

Every run starts its brokers afresh (``python -m cursorops.cli.main standalone``, this
checkout's code) on a fresh PostgreSQL database of the server ``CURSOROPS_TEST_PG_URL``
names (``bash scripts/start-postgres.sh -- python -m benchmarks.failover``), each broker
on a home of its own, all on one ledger folder (``CURSOROPS_METADATA_URL`` and
``CURSOROPS_LEDGER_ROOT``), with a 4-partition topic and the official ``pulsar-client``
on the multi-host service URL ``pulsar://127.0.0.1:P1,127.0.0.1:P2``.

- **Failover.** Two brokers. A producer sends a batch of messages; two Shared consumers
  (each on a client of its own) receive every one of them, acknowledge those of the
  partitions the surviving broker owns and hold the others unacknowledged: every
  message of the victim's partitions has been handed out and not acknowledged. Then the
  broker that owns the most partitions (by the rule lookups answer, ``owner_of``) gets
  ``kill -9``, or ``SIGSTOP`` (``SIGCONT`` once the run is over). Measured from the
  signal: the first held message delivered again to a consumer, and the last of them.
  ``SIGSTOP`` runs in the first :data:`STOP_RUNS` runs of a full run only (each waits about a
  minute, for the client's keep-alive); the smoke size (``--quick``) runs ``kill -9``.
- **Throughput.** One broker, then two, side by side in each run: N messages produced
  (batched, ``send_async`` then ``flush``) and then received and acknowledged by one
  Shared consumer, with each broker's CPU time and PostgreSQL's (the backends serving
  the run's database, from ``/proc``) and its ``pg_stat_database`` counters per message.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import machine, report
from benchmarks.report import Runs

if TYPE_CHECKING:
    from cursorops.local.brokers import Standalone

SECTION = "failover"
PG_ENV = "CURSOROPS_TEST_PG_URL"
PARTITIONS = 4
HELD_FULL = 2_000
HELD_QUICK = 200
THROUGHPUT_FULL = 100_000
THROUGHPUT_QUICK = 3_000
RECEIVER_QUEUE = 1_000
DEADLINE_S = 120.0
"""How long a run waits for an outcome before it is reported as not reached."""
STATS_SETTLE_FULL_S = 11.0
"""PostgreSQL 15 flushes an idle backend's statistics within 10 s: the wait before the
closing ``pg_stat_database`` reading of a full run (what the setup left unflushed before
the opening one is tens of rows, against the run's hundreds of thousands)."""
STATS_SETTLE_QUICK_S = 0.5
STOP_RUNS = 3
"""Runs of the ``SIGSTOP`` case at full size, at most (each waits for the client to give up
on the paused broker's connection, about a minute); none at the smoke size."""
PAYLOAD = b"x" * 64
WHY_THESE_TIMES = (
    "What decides these times. After `kill -9` the victim's connections close at once and "
    "the client looks its partitions up again, retrying with its backoff (100 ms, doubling, "
    "with jitter). Until the survivor declares the victim dead a lookup still redirects to "
    "the victim. A killed broker is declared at the survivor's next beat (every 0.5 s), "
    "which finds the dead process's PostgreSQL session lock free; a paused one keeps its "
    "session and is declared when its heartbeat is 3 s old. The same beat releases the "
    "victim's consumers' messages. After the declaration the client still "
    "sends some lookups to the victim's address, one of the service URL's two hosts, and "
    "those fail too. Each failure doubles that partition consumer's wait: the first held "
    "messages come back on the first retry that succeeds after the declaration, and the "
    "last on the slowest partition consumer's, hence the range of the last columns. "
    "After `SIGSTOP` the connections stay open: the survivor declares the victim dead and "
    "releases its messages after 3 s, but the partitions' consumers are still "
    "attached to the paused process, and nothing reaches them until the client gives that "
    "connection up when its keep-alive goes unanswered (the C++ client pings every 30 s; "
    "this Python client does not expose the interval), about a minute. Then it looks up "
    "again, and a paused process is worse than a dead one: its listening socket still "
    "completes TCP handshakes (the kernel queues them for it), so an attempt that goes to "
    "its address waits out the client's 10 s connection timeout instead of failing at "
    "once, and the backoff grows on top. The store's part of a failover is the "
    "declaration; the rest is the client's. That nothing is lost either way is checked by "
    "`tests/protocol/test_broker_failover.py`, not here."
)
_REPO = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")
COUNTERS = ("xact_commit", "tup_returned", "tup_fetched", "tup_inserted", "tup_updated")
COUNTERS_ALL = (*COUNTERS, "tup_deleted")


# -- PostgreSQL --------------------------------------------------------------------


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user and system, every thread) used so far by ``pid``; None: gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


@dataclass(frozen=True)
class PgReading:
    counters: dict[str, int]
    backends: dict[int, float]
    """CPU seconds of each backend serving the database, by process id (empty when the
    server's processes are not visible on this machine)."""


def pg_reading(url: str, name: str) -> PgReading:
    """``pg_stat_database``'s counters of database ``name`` and its backends' CPU."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_stat_clear_snapshot()"))
            row = connection.execute(
                text(f"SELECT {', '.join(COUNTERS_ALL)} FROM pg_stat_database WHERE datname = :n"),
                {"n": name},
            ).one()
            pids = connection.execute(
                text("SELECT pid FROM pg_stat_activity WHERE datname = :n"), {"n": name}
            ).scalars()
            backends = {int(pid): cpu for pid in pids if (cpu := process_cpu(int(pid))) is not None}
    finally:
        engine.dispose()
    return PgReading(dict(zip(COUNTERS_ALL, (int(v) for v in row), strict=True)), backends)


def pg_cpu_between(before: PgReading, after: PgReading) -> float | None:
    """CPU seconds the database's backends used between two readings (a backend that
    started between them counts from 0; one that ended between them is not seen)."""
    if not after.backends:
        return None
    return sum(cpu - before.backends.get(pid, 0.0) for pid, cpu in after.backends.items())


# -- brokers -----------------------------------------------------------------------


@dataclass
class Cluster:
    nodes: list[Standalone]
    config: Any
    """The admin's :class:`~cursorops.core.domain.config.Config` on the shared stores."""
    url: str
    database: str

    @property
    def service_url(self) -> str:
        return "pulsar://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def admin(self) -> Any:
        from cursorops.core.services.broker import Broker

        return Broker(self.config)

    def owners(self, topic: str) -> dict[int, Standalone]:
        """Each partition's owner among the members (the rule lookups answer)."""
        from cursorops.core.services.broker.cluster import owner_of

        with self.admin() as admin:
            live = admin.cluster.members()
        found: dict[int, Standalone] = {}
        for i in range(PARTITIONS):
            record = owner_of(f"{topic}-partition-{i}", live)
            assert record is not None, "no live broker"
            port = int(record.advertised.broker_url.rsplit(":", 1)[1])
            found[i] = next(n for n in self.nodes if n.port == port)
        return found


@contextlib.contextmanager
def cluster(work: Path, base_url: str, brokers: int) -> Iterator[Cluster]:
    from cursorops.core.domain.config import Config
    from cursorops.core.services.broker import Broker
    from cursorops.local import brokers as local_brokers
    from cursorops.local import postgres

    with postgres.database(base_url, "cursorops_bench") as (url, name):
        root = work / "ledgers"
        config = Config.from_home(work / "admin", metadata_url=url, ledger_root=str(root))
        Broker.migrate_metadata(config)
        with local_brokers.cluster(work, brokers, url, ledger_root=root, tree=_REPO) as nodes:
            yield Cluster(nodes.brokers, config, url, name)


def _client(url: str) -> Any:
    import pulsar

    return pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def _new_topic(cluster_: Cluster, prefix: str) -> str:
    topic = f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"
    with cluster_.admin() as admin:
        admin.admin.create_topic("admin", topic, PARTITIONS)
    return topic


def _wait(condition: Callable[[], bool], deadline_s: float = DEADLINE_S) -> bool:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


# -- failover ----------------------------------------------------------------------


@dataclass
class Held:
    """What the consumers hold, and when each held message came back after the signal."""

    victim_partitions: set[str]
    held: set[bytes] = field(default_factory=set)
    seen: set[bytes] = field(default_factory=set)
    back: dict[bytes, float] = field(default_factory=dict)
    signalled_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)


def _consume(consumer: Any, state: Held) -> None:
    import pulsar

    while not state.stop.is_set():
        try:
            message = consumer.receive(100)
        except pulsar.Timeout:
            continue
        except Exception as exc:  # the client is being closed at the end
            if not state.stop.is_set():
                state.errors.append(repr(exc))
            return
        now = time.perf_counter()
        payload = message.data()
        with state.lock:
            if state.signalled_at is None:
                state.seen.add(payload)
                if message.topic_name() in state.victim_partitions:
                    state.held.add(payload)
                    continue
            elif payload in state.held and payload not in state.back:
                state.back[payload] = now - state.signalled_at
        with contextlib.suppress(Exception):
            consumer.acknowledge(message)


@dataclass(frozen=True)
class Failover:
    held: int
    first_s: float | None
    """From the signal to the first held message delivered again; None: not within the
    deadline."""
    all_s: float | None
    """From the signal to the last held message delivered again; None: not within it."""
    victim_partitions: int
    back: int
    """Held messages delivered again within the deadline."""


def failover_run(work: Path, base_url: str, messages: int, how: str) -> Failover:
    """One failover: ``how`` is ``"kill"`` (SIGKILL) or ``"stop"`` (SIGSTOP)."""
    import pulsar

    with cluster(work, base_url, 2) as c:
        topic = _new_topic(c, "failover")
        owners = c.owners(topic)
        counts = {id(n): sum(1 for o in owners.values() if o is n) for n in c.nodes}
        victim = max(c.nodes, key=lambda n: counts[id(n)])
        state = Held({f"{topic}-partition-{i}" for i, n in owners.items() if n is victim})
        clients = [_client(c.service_url) for _ in range(3)]
        readers: list[threading.Thread] = []
        try:
            for client in clients[:2]:
                consumer = client.subscribe(
                    topic,
                    "failover",
                    consumer_type=pulsar.ConsumerType.Shared,
                    initial_position=pulsar.InitialPosition.Earliest,
                    receiver_queue_size=RECEIVER_QUEUE,
                )
                readers.append(threading.Thread(target=_consume, args=(consumer, state)))
            producer = clients[2].create_producer(
                topic,
                batching_enabled=True,
                batching_max_messages=100,
                batching_max_publish_delay_ms=10,
                block_if_queue_full=True,
            )
            for reader in readers:
                reader.start()
            for i in range(messages):
                producer.send_async(b"f-%07d" % i, None, partition_key=str(i))
            producer.flush()
            if not _wait(lambda: len(state.seen) >= messages):
                raise RuntimeError(f"only {len(state.seen)} of {messages} received before")
            with state.lock:
                held = len(state.held)
                state.signalled_at = time.perf_counter()
                victim.process.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
            everything = _wait(lambda: len(state.back) >= held)
            with state.lock:
                times = sorted(state.back.values())
        finally:
            state.stop.set()
            victim.process.send_signal(signal.SIGCONT)  # the clients' close needs its answer
            for reader in readers:
                reader.join(10)
            for client in clients:
                with contextlib.suppress(Exception):
                    client.close()
        if state.errors:
            raise RuntimeError(f"a consumer failed: {state.errors[0]}")
    return Failover(
        held,
        times[0] if times else None,
        times[-1] if everything and times else None,
        len(state.victim_partitions),
        len(times),
    )


# -- throughput --------------------------------------------------------------------


@dataclass(frozen=True)
class Throughput:
    produce_s: float
    consume_s: float
    broker_cpu: tuple[float, ...]
    """CPU seconds of each broker over produce and consume."""
    pg_cpu: float | None
    pg: dict[str, int]
    """``pg_stat_database`` counter deltas over produce and consume."""


def throughput_run(
    work: Path, base_url: str, brokers: int, count: int, settle: float
) -> Throughput:
    import pulsar

    with cluster(work, base_url, brokers) as c:
        topic = _new_topic(c, "throughput")
        client = _client(c.service_url)
        try:
            consumer = client.subscribe(
                topic,
                "throughput",
                consumer_type=pulsar.ConsumerType.Shared,
                receiver_queue_size=RECEIVER_QUEUE,
            )
            producer = client.create_producer(
                topic,
                batching_enabled=True,
                batching_max_messages=100,
                batching_max_publish_delay_ms=10,
                max_pending_messages=10_000,
                block_if_queue_full=True,
            )
            time.sleep(0.5)
            pg_before = pg_reading(c.url, c.database)
            cpu_before = [process_cpu(n.pid) or 0.0 for n in c.nodes]
            with report.Stopwatch() as produce:
                for i in range(count):
                    producer.send_async(PAYLOAD, None, partition_key=str(i))
                producer.flush()
            with report.Stopwatch() as consume:
                for _ in range(count):
                    consumer.acknowledge(consumer.receive(30_000))
            cpu_after = [process_cpu(n.pid) or 0.0 for n in c.nodes]
            time.sleep(settle)
            pg_after = pg_reading(c.url, c.database)
        finally:
            client.close()
    return Throughput(
        produce.seconds,
        consume.seconds,
        tuple(b - a for a, b in zip(cpu_before, cpu_after, strict=True)),
        pg_cpu_between(pg_before, pg_after),
        {k: pg_after.counters[k] - pg_before.counters[k] for k in COUNTERS_ALL},
    )


# -- the section -------------------------------------------------------------------


def _seconds(values: Sequence[float | None], runs: int) -> str:
    reached = [v for v in values if v is not None]
    if not reached:
        return f"not within {DEADLINE_S:.0f} s"
    cell = Runs.of(reached).cell("s", 2)
    missed = runs - len(reached)
    return cell + (f"; {missed} of {runs} runs not within {DEADLINE_S:.0f} s" if missed else "")


def _us(value: float) -> str:
    return f"{report.number(value * 1e6, 3)} µs"


def render(
    host: machine.Machine,
    options: report.Options,
    work: Path,
    failovers: dict[str, list[Failover]],
    sides: dict[int, list[Throughput]],
    count: int,
    held: int,
    server: str,
) -> str:
    lines = report.preamble(
        "Brokers on one store: failover and one broker against two", SECTION, host, options, work
    )
    lines += [
        f"`cursorops standalone` brokers on one PostgreSQL ({server}, on this machine) "
        "and one ledger folder, a fresh database and fresh brokers per "
        f"run, a {PARTITIONS}-partition topic, the official client (pulsar-client "
        f"{_version('pulsar-client')}) on the multi-host service URL, in the benchmark's "
        "process on the same cores as the brokers and PostgreSQL.",
        "",
        "### Failover",
        "",
        f"{held:,} messages produced (batches of 100, spread over the partitions by key), all "
        "received by two Shared consumers (receiver queues of "
        f"{RECEIVER_QUEUE:,}, each on a client of its own): those of the survivor's partitions "
        "acknowledged, those of the victim's (the broker owning the most partitions) held "
        "unacknowledged. Then the signal, and the time from it to the held messages "
        "delivered again to the consumers (from the survivor), first and last.",
        "",
    ]
    rows = []
    for how, label in (("kill", "`kill -9`"), ("stop", "`SIGSTOP` (`SIGCONT` after the run)")):
        runs = failovers.get(how, [])
        if not runs:
            continue
        held_cells = sorted({f"{r.held:,} ({r.victim_partitions} partitions)" for r in runs})
        rows.append(
            [
                label,
                " / ".join(held_cells),
                _seconds([r.first_s for r in runs], len(runs)),
                _seconds([r.all_s for r in runs], len(runs)),
                " / ".join(f"{r.back:,} of {r.held:,}" for r in runs),
            ]
        )
    lines += [
        report.table(
            [
                "signal",
                "held (victim's partitions)",
                "first delivered again",
                "all delivered again",
                f"delivered again within {DEADLINE_S:.0f} s, each run",
            ],
            rows,
        ),
        "",
        WHY_THESE_TIMES,
        "",
        "### One broker against two",
        "",
        f"{count:,} messages of 64 bytes produced (batches of 100, `send_async` then `flush`, "
        "keys spreading them over the partitions), then received and acknowledged one by one "
        "by one Shared consumer; one broker, then two, in each run. CPU from `/proc` (every "
        "thread of each broker; the PostgreSQL backends serving the run's database), "
        "PostgreSQL's counters from `pg_stat_database` (read after its statistics settle), "
        "per message over produce and consume together.",
        "",
    ]
    table_rows = []
    per: dict[int, dict[str, float]] = {}
    for brokers in sorted(sides):
        results = sides[brokers]
        produce = Runs.of([r.produce_s for r in results])
        consume = Runs.of([r.consume_s for r in results])
        total = Runs.of([r.produce_s + r.consume_s for r in results])
        broker_cpu = Runs.of([sum(r.broker_cpu) / count for r in results])
        pg_cpus = [r.pg_cpu / count for r in results if r.pg_cpu is not None]
        counters = {k: Runs.of([r.pg[k] / count for r in results]) for k in COUNTERS_ALL}
        split = (
            " + ".join(
                _us(Runs.of([r.broker_cpu[i] / count for r in results]).median)
                for i in range(brokers)
            )
            if brokers > 1
            else ""
        )
        per[brokers] = {
            "broker_cpu": broker_cpu.median,
            "pg_cpu": Runs.of(pg_cpus).median if pg_cpus else float("nan"),
            "commits": counters["xact_commit"].median,
            "rate": Runs.of([count / s for s in total.values]).median,
        }
        table_rows.append(
            [
                f"{brokers} broker{'s' if brokers > 1 else ''}",
                report.rates(count, produce).cell("msg/s"),
                report.rates(count, consume).cell("msg/s"),
                report.rates(count, total).cell("msg/s"),
                Runs.of([v * 1e6 for v in broker_cpu.values]).cell("µs")
                + (f" ({split})" if split else ""),
                Runs.of([v * 1e6 for v in pg_cpus]).cell("µs") if pg_cpus else "not visible",
                counters["xact_commit"].cell("", 3),
                Runs.of(
                    [
                        (r.pg["tup_inserted"] + r.pg["tup_updated"] + r.pg["tup_deleted"]) / count
                        for r in results
                    ]
                ).cell("", 3),
                Runs.of(
                    [(r.pg["tup_returned"] + r.pg["tup_fetched"]) / count for r in results]
                ).cell("", 3),
            ]
        )
    lines += [
        report.table(
            [
                "brokers",
                "produce",
                "consume and acknowledge",
                "both, wall",
                "brokers' CPU per msg",
                "PostgreSQL CPU per msg",
                "commits per msg",
                "rows written per msg",
                "rows read per msg",
            ],
            table_rows,
        ),
        "",
        _on_paper(per),
        "",
    ]
    return "\n".join(lines) + "\n"


def _on_paper(per: dict[int, dict[str, float]]) -> str:
    one = per.get(1)
    two = per.get(2)
    if one is None or two is None:
        return ""
    pg, pg_one = two["pg_cpu"], one["pg_cpu"]
    broker = two["broker_cpu"]
    if pg != pg or pg <= 0 or pg_one != pg_one:  # NaN: PostgreSQL's processes not visible
        ratio = "PostgreSQL's CPU was not visible here"
        growth = ("", "")
    else:
        ratio = (
            f"a message cost the brokers {_us(broker)} of CPU and PostgreSQL {_us(pg)}, so "
            f"one PostgreSQL core keeps up with about {broker / pg:.1f} busy brokers (a "
            "broker is one Python process and uses about one core at most: its event loop "
            "and its store thread share one interpreter lock), that is about "
            f"{report.number(1 / pg, 3)} messages produced and consumed per second per "
            "PostgreSQL core"
        )
        growth = (f" and {_us(pg)} of its CPU", f" and {_us(pg_one)}")
    change = two["commits"] / one["commits"] - 1 if one["commits"] > 0 else 0.0
    more = f"by {100 * change:.0f}% more commits" if abs(change) >= 0.05 else "about as much"
    return (
        "On paper, brokers on machines of their own. PostgreSQL's work per message, with "
        f"two brokers {report.number(two['commits'], 3)} commits{growth[0]}, with one "
        f"{report.number(one['commits'], 3)}{growth[1]}: it grows with the traffic, "
        f"and {more} with the second broker. By CPU, {ratio}; "
        "adding brokers scales until their summed rate reaches that. Before CPU, a lock "
        "binds: every dispatch, every acknowledgement and every consumer change of a "
        "subscription opens with `SELECT id FROM subscriptions WHERE topic = ? AND name = ? "
        "FOR NO KEY UPDATE` (`cursor_door.py`, `Hold.DISPATCH`), and the row is the "
        "subscription's, shared by all partitions of the topic: one subscription's dispatch "
        "and acknowledgement transactions run one at a time across every broker, so a "
        "subscription's rate is bounded by one transaction after another (its statements and "
        "round trips, plus the network's round trips once brokers are on other machines), "
        "whatever the number of brokers. Many subscriptions or topics spread; one hot "
        "subscription does not. Appends lock their partitions' rows (`SELECT name FROM "
        "topic_partitions ... FOR UPDATE`, `entry_allocation.py`), one append per partition "
        "at a time, which spreads with the partitions. The fence, `SELECT state FROM brokers "
        "WHERE broker_id = ? AND epoch = ? FOR KEY SHARE`, runs in every subscription "
        "transaction and every append: all of one broker's writers share its one row. "
        "PostgreSQL writes a row lock into the row itself (its `xmax`, with a WAL record), "
        "so each of those reads is a write to the same heap tuple, and overlapping share "
        "locks become a MultiXact (another write, in `pg_multixact`); the heartbeat "
        "(`UPDATE brokers SET heartbeat_ms`, every 0.5 s) does not conflict with a key "
        "share lock, so it neither waits for the writes nor holds them (it did while the "
        "fence read `FOR SHARE`). That is per broker, so it does not grow with their number: the "
        "subscription row is the first limit for one busy subscription, PostgreSQL's CPU "
        "for many."
    )


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _server_version(base_url: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(base_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            version = str(connection.execute(text("SHOW server_version")).scalar())
            fsync = str(connection.execute(text("SHOW fsync")).scalar())
    finally:
        engine.dispose()
    return f"PostgreSQL {version.split()[0]}, fsync {fsync}"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options(
        "Brokers on one PostgreSQL: failover time, and throughput of one broker against two.",
        argv,
    )
    base_url = os.environ.get(PG_ENV)
    if not base_url:
        raise SystemExit(f"set {PG_ENV} (bash scripts/start-postgres.sh -- python -m ...)")
    host = machine.describe()
    held = HELD_QUICK if options.quick else HELD_FULL
    count = THROUGHPUT_QUICK if options.quick else THROUGHPUT_FULL
    settle = STATS_SETTLE_QUICK_S if options.quick else STATS_SETTLE_FULL_S
    failovers: dict[str, list[Failover]] = {"kill": [], "stop": []}
    sides: dict[int, list[Throughput]] = {1: [], 2: []}
    with report.work_dir(options, "failover") as work:
        for run in range(options.runs):
            stop = not options.quick and run < STOP_RUNS
            for how in ("kill", "stop") if stop else ("kill",):
                result = failover_run(work / f"{how}-{run}", base_url, held, how)
                failovers[how].append(result)
                print(f"  run {run} {how}: {result}", flush=True)
            for brokers in (1, 2):
                measured = throughput_run(
                    work / f"tp{brokers}-{run}", base_url, brokers, count, settle
                )
                sides[brokers].append(measured)
                print(f"  run {run} {brokers} broker(s): {measured}", flush=True)
        markdown = render(
            host, options, work, failovers, sides, count, held, _server_version(base_url)
        )
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    raise SystemExit(main())

"""analyze-backlog over a big topic: Spark ``local[2]`` against core and a one-process reference.

For each size (default 1M, 10M and 30M messages) a topic of 16 partitions is
written with the real :class:`~cursorops.core.services.producer.Producer` and ledger store
(batches of 10, 1% delayed messages, which the producer never batches; 70%
keyed, half with a property), and four Shared subscriptions get scattered
acknowledgements: a cumulative acknowledgement part-way, individual entries,
and some indexes of some batches. Then, on the same data, each several times:

- **Spark, warm**: :func:`cursorops.spark.analyze_backlog.run` on a ``local[2]``
  session already up (what a long-lived driver or notebook sees);
- **Spark, spark-submit**: the job as an operator launches it, JVM start included;
- **Spark Connect**: the job submitted to a Spark Connect server already running
  (``scripts/spark-connect-up.sh``, ``local[2]``, started once for the whole
  run) through :func:`cursorops.airflow.operators.spark.run_on_connect`, the very call a DAG's
  Spark task makes when ``spark_connect_default`` exists: no JVM starts;
- **core**: :meth:`cursorops.core.services.broker.analysis.Analysis.analyze_backlog`, the
  pure-Python path;
- **DuckDB**: one SQL query over the same Parquet files and the cursors
  exported as tables, an independent reference for how fast one process reads
  this data (2 threads).

All five answers are checked equal (entries, messages, first and last id per
partition and subscription) before any time is written. Figures go to the
``spark_backlog`` section of ``docs/benchmarks.md``.

    python -m benchmarks.spark_backlog [--quick] [--sizes 1000000,10000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks import machine, report
from cursorops.core.domain.acks import ack_set, cursor_codec
from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.analysis.backlog import PartitionAnalysis
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage, Producer
from cursorops.core.store.cursor_state import replay
from cursorops.local import spark as local_spark

SECTION = "spark_backlog"
TOPIC = "persistent://bench/backlog/orders"
PARTITIONS = 16
SUBSCRIPTIONS = ("billing", "shipping", "audit", "search")
BATCH = 10
SEND_CHUNK = 1_000_000
"""Messages per ``Producer.send``: one segment per partition per send."""
FULL_SIZES = (1_000_000, 10_000_000, 30_000_000)
QUICK_SIZES = (200_000,)
AIM_SECONDS = 60.0
AIM_RATIO = 3.0
CONNECT_AIM_RATIO = 2.0
"""The aim: through the path a DAG task uses, within 2x of DuckDB at 10,000,000 messages."""
CONNECT_START_SECONDS = 300
NOW = 1_700_000_000_000
_REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Dataset:
    config: Config
    messages: int
    entries: int
    segments: int
    bytes_on_disk: int
    backlog_messages: int
    generate_seconds: float
    ack_seconds: float


# -- the data ------------------------------------------------------------------------


def generate(home: Path, messages: int, seed: int = 7) -> Dataset:
    """Write the topic and acknowledge scattered messages on every subscription."""
    rng = random.Random(seed)
    config = Config.from_home(home)
    clock = iter(range(NOW, NOW + 10**12, 1_000))
    started = time.perf_counter()
    with Broker(config, clock=lambda: next(clock)) as broker:
        broker.admin.create_tenant("admin", "bench")
        broker.admin.create_namespace("admin", "bench/backlog")
        info = broker.admin.create_topic("admin", TOPIC, PARTITIONS)
        for sub in SUBSCRIPTIONS:
            broker.admin.create_subscription(
                "admin", TOPIC, sub, SubscriptionType.SHARED, initial_position="earliest"
            )
        producer = Producer(broker.ledgers, info, producer_name="bench", batch_size=BATCH)
        regions = ("eu", "us", "apac")
        for start in range(0, messages, SEND_CHUNK):
            count = min(SEND_CHUNK, messages - start)
            outgoing = [
                OutgoingMessage(
                    payload=b'{"order": %d, "amount": %d}' % (start + i, rng.randrange(10_000)),
                    key=f"customer-{rng.randrange(10_000)}" if rng.random() < 0.7 else None,
                    properties={"region": regions[i % 3]} if i % 2 else {},
                    deliver_at=NOW + rng.randrange(86_400_000) if rng.random() < 0.01 else None,
                )
                for i in range(count)
            ]
            producer.send(outgoing, next(clock))
            del outgoing
        generated = time.perf_counter() - started
        started = time.perf_counter()
        entries = 0
        segments = 0
        size = 0
        for partition in info.partition_names():
            index = broker.ledgers.entry_index(TopicName.parse(partition))
            paths = broker.ledgers.segment_paths(TopicName.parse(partition))
            segments += len(paths)
            size += sum(os.path.getsize(p) for p in paths)
            entries += len(index)
            layout = LedgerLayout.of(
                (ledger.ledger_id, ledger.entries) for ledger in broker.metadata.ledgers(partition)
            )
            for number, sub in enumerate(SUBSCRIPTIONS):
                _acknowledge(broker, partition, sub, layout, index, np.random.default_rng(number))
        acked = time.perf_counter() - started
        backlog_messages = sum(
            one.result.messages for one in broker.analysis.analyze_backlog("admin", TOPIC)
        )
    return Dataset(config, messages, entries, segments, size, backlog_messages, generated, acked)


def _acknowledge(
    broker: Broker,
    partition: str,
    subscription: str,
    layout: LedgerLayout,
    index: Any,
    rng: np.random.Generator,
) -> None:
    """A cumulative ack part-way, 10% of later entries whole, some indexes of 5% of batches."""
    n = len(index)
    if n == 0:
        return
    store = broker.metadata
    head = int(n * rng.uniform(0.0, 0.2))
    if head:
        through = Position(int(index.ledger_id[head - 1]), int(index.entry_id[head - 1]))
        delta = CursorState().acknowledge_cumulative(through, layout)
        store.append_cursor_delta(partition, subscription, cursor_codec.encode(delta))
    draw = rng.random(n)
    targets = [
        AckTarget(Position(int(index.ledger_id[row]), int(index.entry_id[row])))
        for row in np.flatnonzero((draw < 0.10) & (np.arange(n) >= head)).tolist()
    ]
    batched = np.flatnonzero((draw >= 0.10) & (draw < 0.15) & (index.batch_size > 1))
    for row in batched.tolist():
        size = int(index.batch_size[row])
        position = Position(int(index.ledger_id[row]), int(index.entry_id[row]))
        picked = rng.choice(size, size=int(rng.integers(1, size)), replace=False)
        targets.extend(AckTarget(position, int(i), size) for i in picked.tolist())
    if targets:
        delta = CursorState.ack_delta(targets)
        store.append_cursor_delta(partition, subscription, cursor_codec.encode(delta))


# -- the four ways to the answer ------------------------------------------------------


Answer = dict[tuple[str, str], tuple[int, int, str | None, str | None]]


def _answer(analyses: Sequence[PartitionAnalysis]) -> Answer:
    return {
        (a.topic_partition, a.subscription): (
            a.result.entries,
            a.result.messages,
            a.result.first_message_id,
            a.result.last_message_id,
        )
        for a in analyses
    }


def core_path(config: Config) -> Answer:
    with Broker(config) as broker:
        return _answer(broker.analysis.analyze_backlog("admin", TOPIC))


def spark_warm(config: Config, spark: Any) -> Answer:
    from cursorops.spark import analyze_backlog

    return _answer(analyze_backlog.run(config, TOPIC, spark=spark))


def _document_answer(path: Path) -> Answer:
    document = json.loads(path.read_text())
    return {
        (row["topicPartition"], row["subscription"]): (
            row["entries"],
            row["messages"],
            row["firstMessageId"],
            row["lastMessageId"],
        )
        for row in document["partitions"]
    }


def spark_submit(config: Config, work: Path) -> Answer:
    output = work / "spark-submit.json"
    command = [
        str(Path(sys.executable).with_name("spark-submit")),
        "--master",
        "local[2]",
        "--driver-memory",
        "4g",
        str(_REPO / "spark_apps" / "analyze_backlog.py"),
        "--home",
        str(config.home),
        TOPIC,
        "--output",
        str(output),
    ]
    environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    subprocess.run(command, check=True, env=environment, capture_output=True)
    return _document_answer(output)


def _connect_args(home: str, output: str) -> list[str]:
    return ["--home", home, TOPIC, "--output", output]


_CLIENT = """
import json, sys, time
from cursorops.airflow.operators.spark import run_on_connect
from benchmarks.spark_backlog import _connect_args
home, remote, output, runs, warm_up = sys.argv[1:]
if warm_up == "1":
    run_on_connect("analyze_backlog", _connect_args(home, output), remote)
seconds = []
for _ in range(int(runs)):
    started = time.perf_counter()
    run_on_connect("analyze_backlog", _connect_args(home, output), remote)
    seconds.append(time.perf_counter() - started)
print(json.dumps(seconds))
"""

_FRESH = """
import sys
from cursorops.airflow.operators.spark import run_on_connect
from benchmarks.spark_backlog import _connect_args
run_on_connect("analyze_backlog", _connect_args(*sys.argv[1:3]), sys.argv[3])
"""


def _client_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def spark_connect(
    config: Config, work: Path, remote: str, runs: int, *, warm_up: bool
) -> tuple[report.Runs, Answer]:
    """The DAG task's call on Connect
    (:func:`cursorops.airflow.operators.spark.run_on_connect`), timed in a client process of
    its own.

    pyspark allows one kind of session per process (this one holds the classic
    warm session), and a task is a process of its own: the client imports once,
    then each run is the call alone, as DuckDB's runs are the query alone.
    """
    output = work / "spark-connect.json"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CLIENT,
            str(config.home),
            remote,
            str(output),
            str(runs),
            "1" if warm_up else "0",
        ],  # fmt: skip
        env=_client_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the Spark Connect client failed:\n{done.stderr[-3000:]}")
    return report.Runs.of(json.loads(done.stdout.strip().splitlines()[-1])), _document_answer(
        output
    )


def spark_connect_fresh(config: Config, work: Path, remote: str) -> Answer:
    """The same call in a new Python process, imports included: what a task process pays."""
    output = work / "spark-connect-fresh.json"
    subprocess.run(
        [sys.executable, "-c", _FRESH, str(config.home), str(output), remote],
        env=_client_env(),
        check=True,
        capture_output=True,
    )
    return _document_answer(output)


def duckdb_reference(config: Config) -> Answer:
    """One SQL query over the listed segments, with the cursors exported as three tables."""
    import duckdb

    marks: list[tuple[int, str, int, int]] = []
    acked: dict[str, list[Any]] = {"partition": [], "sub": [], "ledger_id": [], "entry_id": []}
    partial: list[tuple[int, str, int, int, int]] = []
    paths: list[str] = []
    names: dict[int, str] = {}
    with Broker(config) as broker:
        info = broker.metadata.get_topic(TOPIC)
        for number, partition in enumerate(info.partition_names()):
            names[number] = partition
            paths.extend(broker.ledgers.segment_paths(TopicName.parse(partition)))
            layout = LedgerLayout.of(
                (ledger.ledger_id, ledger.entries) for ledger in broker.metadata.ledgers(partition)
            )
            for sub in SUBSCRIPTIONS:
                state = replay(broker.metadata.load_cursor(partition, sub), layout)
                marks.append((number, sub, *state.mark_delete))
                deleted = state.individually_deleted
                for ledger_id in deleted.ledgers():
                    entries = np.asarray(deleted.bitmap(ledger_id).to_array(), dtype=np.int64)
                    acked["partition"].append(np.full(entries.size, number, dtype=np.int32))
                    acked["sub"].extend([sub] * entries.size)
                    acked["ledger_id"].append(np.full(entries.size, ledger_id, dtype=np.int64))
                    acked["entry_id"].append(entries)
                partial.extend(
                    (number, sub, p.ledger_id, p.entry_id, ack_set.unacked_count(bits))
                    for p, bits in state.batch_acks.items()
                )
    connection = duckdb.connect()
    connection.execute("SET threads = 2")
    marks_table = pa.table(
        dict(
            zip(
                ["partition", "sub", "md_ledger", "md_entry"], zip(*marks, strict=True), strict=True
            )
        )
    )
    acked_table = pa.table(
        {
            "partition": np.concatenate(acked["partition"] or [np.empty(0, np.int32)]),
            "sub": pa.array(acked["sub"], pa.string()),
            "ledger_id": np.concatenate(acked["ledger_id"] or [np.empty(0, np.int64)]),
            "entry_id": np.concatenate(acked["entry_id"] or [np.empty(0, np.int64)]),
        }
    )
    partial_schema = pa.schema(
        [
            ("partition", pa.int32()),
            ("sub", pa.string()),
            ("ledger_id", pa.int64()),
            ("entry_id", pa.int64()),
            ("unacked", pa.int64()),
        ]
    )
    partial_table = pa.Table.from_pylist(
        [dict(zip(partial_schema.names, row, strict=True)) for row in partial],
        schema=partial_schema,
    )
    connection.register("marks", marks_table)
    connection.register("acked", acked_table)
    connection.register("partial_acks", partial_table)
    rows = connection.execute(
        """
        WITH e AS (
            SELECT partition, ledger_id, entry_id, greatest(batch_size, 1) AS n
            FROM read_parquet($paths, union_by_name = true) WHERE batch_index <= 0
        ),
        live AS (
            SELECT e.*, m.sub FROM e JOIN marks m ON e.partition = m.partition
                AND (e.ledger_id > m.md_ledger
                     OR (e.ledger_id = m.md_ledger AND e.entry_id > m.md_entry))
            ANTI JOIN acked a ON a.partition = e.partition AND a.sub = m.sub
                AND a.ledger_id = e.ledger_id AND a.entry_id = e.entry_id
        )
        SELECT live.partition, live.sub, count(*) AS entries,
               sum(coalesce(p.unacked, live.n)) AS messages,
               arg_min(live.ledger_id || ':' || live.entry_id, (live.ledger_id, live.entry_id)),
               arg_max(live.ledger_id || ':' || live.entry_id, (live.ledger_id, live.entry_id))
        FROM live LEFT JOIN partial_acks p ON p.partition = live.partition AND p.sub = live.sub
            AND p.ledger_id = live.ledger_id AND p.entry_id = live.entry_id
        GROUP BY live.partition, live.sub
        """,
        {"paths": paths},
    ).fetchall()
    connection.close()
    answer: Answer = {
        (names[number], sub): (0, 0, None, None) for number in names for sub in SUBSCRIPTIONS
    }
    for number, sub, entries, messages, first, last in rows:
        answer[(names[number], sub)] = (int(entries), int(messages), first, last)
    return answer


# -- measuring -----------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    dataset: Dataset
    spark_warm: report.Runs
    spark_submit: report.Runs
    spark_connect: report.Runs
    spark_connect_fresh: report.Runs
    core: report.Runs
    duckdb: report.Runs


def _timed(runs: int, work: Any, *args: Any) -> tuple[report.Runs, Answer]:
    seconds = []
    answer: Answer = {}
    for _ in range(runs):
        with report.Stopwatch() as watch:
            answer = work(*args)
        seconds.append(watch.seconds)
    return report.Runs.of(seconds), answer


def measure(
    size: int, runs: int, work: Path, spark: Any, remote: str, *, warm_up: bool
) -> Measured:
    print(f"[spark_backlog] {size:,} messages: generating", flush=True)
    dataset = generate(work / f"home-{size}", size)
    print(
        f"[spark_backlog] generated in {dataset.generate_seconds:.0f} s, acknowledged in "
        f"{dataset.ack_seconds:.0f} s; measuring",
        flush=True,
    )
    if warm_up:
        # The first job of a session starts Python workers and compiles code: not steady state.
        spark_warm(dataset.config, spark)
    duck, duck_answer = _timed(runs, duckdb_reference, dataset.config)
    core, core_answer = _timed(runs, core_path, dataset.config)
    warm, warm_answer = _timed(runs, spark_warm, dataset.config, spark)
    submit, submit_answer = _timed(runs, spark_submit, dataset.config, work)
    connect, connect_answer = spark_connect(dataset.config, work, remote, runs, warm_up=warm_up)
    fresh, fresh_answer = _timed(runs, spark_connect_fresh, dataset.config, work, remote)
    for name, answer in (("duckdb", duck_answer), ("spark", warm_answer),
                         ("spark-submit", submit_answer),
                         ("spark-connect", connect_answer),
                         ("spark-connect, new process", fresh_answer)):  # fmt: skip
        if answer != core_answer:
            wrong = sorted(k for k in core_answer if answer.get(k) != core_answer[k])[:3]
            raise SystemExit(f"{name} disagrees with core at {wrong}")
    print(
        f"[spark_backlog] {size:,}: spark warm {warm.median:.1f} s, spark-submit "
        f"{submit.median:.1f} s, spark connect {connect.median:.1f} s ({fresh.median:.1f} s in "
        f"a new process), core "
        f"{core.median:.1f} s, duckdb {duck.median:.1f} s",
        flush=True,
    )
    return Measured(dataset, warm, submit, connect, fresh, core, duck)


def _versions() -> str:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    java_line = (java.stderr.splitlines() or ["java unknown"])[0]
    return (
        f"Spark {metadata.version('pyspark')} (pyspark, `local[2]`, driver memory 4 GiB for "
        f"spark-submit and the Connect server), {java_line}, DuckDB {metadata.version('duckdb')}, "
        f"Python {platform.python_version()}"
    )


def markdown(
    results: Sequence[Measured], options: report.Options, host: machine.Machine, work: Path
) -> str:
    lines = report.preamble("analyze-backlog on Spark", SECTION, host, options, work)
    lines += [
        f"Engines: {_versions()}.",
        "",
        f"Topic: {PARTITIONS} partitions written with the `Producer` (batches of {BATCH}, 1% "
        "delayed and so unbatched, 70% keyed, half with a property); four Shared subscriptions, "
        "each with a cumulative acknowledgement part-way (0-20% of each partition), 10% of the "
        "later entries acknowledged whole and 5% of the batches partly acknowledged (1-9 of 10 "
        "indexes). Every run analyses all four subscriptions of every partition; the five "
        "answers (entries, messages, first and last id per partition and subscription) were "
        "checked equal. *Spark warm* runs the job on a session already up; *spark-submit* "
        "is the whole command (JVM and session start, metadata and cursors read on the "
        "driver, the scan); *Spark Connect* is "
        "`cursorops.airflow.operators.spark.run_on_connect`, what a "
        "DAG's Spark task runs when `spark_connect_default` exists: the job's `main` in the "
        "client's process (metadata and cursors read there, a new session on a Connect server "
        "started once for the whole benchmark, the scan on the server, the JSON written), "
        "timed in a client process that imported pyspark and cursorops once (pyspark allows "
        "one kind of session per process, and this one holds the classic session); *Spark "
        "Connect, new process* is the same call in a new Python process, start and imports "
        "included, as a task process pays them; *core* is "
        "`Broker.analysis.analyze_backlog` in this process; *DuckDB* "
        "exports the cursors as tables and runs one query over the same files.",
        "",
        report.table(
            [
                "messages",
                "entries",
                "segments",
                "on disk",
                "backlog messages, 4 subscriptions",
                "Spark warm s",
                "spark-submit s",
                "Spark Connect s",
                "Spark Connect, new process s",
                "core s",
                "DuckDB s",
                "Spark warm / DuckDB",
                "spark-submit / DuckDB",
                "Spark Connect / DuckDB",
                "Spark warm / core",
            ],
            [
                [
                    f"{m.dataset.messages:,}",
                    f"{m.dataset.entries:,}",
                    f"{m.dataset.segments:,}",
                    f"{m.dataset.bytes_on_disk / 2**20:,.0f} MiB",
                    f"{m.dataset.backlog_messages:,}",
                    m.spark_warm.cell(),
                    m.spark_submit.cell(),
                    m.spark_connect.cell(),
                    m.spark_connect_fresh.cell(),
                    m.core.cell(),
                    m.duckdb.cell(),
                    f"{m.spark_warm.median / m.duckdb.median:.1f}x",
                    f"{m.spark_submit.median / m.duckdb.median:.1f}x",
                    f"{m.spark_connect.median / m.duckdb.median:.1f}x",
                    f"{m.spark_warm.median / m.core.median:.1f}x",
                ]
                for m in results
            ],
        ),
        "",
    ]
    if len(results) > 1:
        base = results[0]
        lines += [
            "Growth from the smallest size (median time / median time of "
            f"{base.dataset.messages:,} messages):",
            "",
            report.table(
                [
                    "messages",
                    "data x",
                    "Spark warm",
                    "spark-submit",
                    "Spark Connect",
                    "core",
                    "DuckDB",
                ],
                [
                    [
                        f"{m.dataset.messages:,}",
                        f"{m.dataset.messages / base.dataset.messages:.0f}x",
                        *(
                            f"{getattr(m, name).median / getattr(base, name).median:.1f}x"
                            for name in (
                                "spark_warm",
                                "spark_submit",
                                "spark_connect",
                                "core",
                                "duckdb",
                            )
                        ),
                    ]
                    for m in results
                ],
            ),
            "",
        ]
    aims = []
    for m in results:
        if m.dataset.messages != 10_000_000:
            continue
        submit, warm, duck = m.spark_submit.median, m.spark_warm.median, m.duckdb.median
        connect = m.spark_connect.median
        aims += [
            "Aims at 10,000,000 messages: all four subscriptions exact in under "
            f"{AIM_SECONDS:.0f} s on 2 cores: {report.verdict(submit < AIM_SECONDS)} with "
            f"spark-submit ({submit:.1f} s, JVM start included), "
            f"{report.verdict(warm < AIM_SECONDS)} on a warm session ({warm:.1f} s); within "
            f"{AIM_RATIO:.0f}x of the one-process reference: "
            f"{report.verdict(warm <= AIM_RATIO * duck)} warm ({warm / duck:.1f}x), "
            f"{report.verdict(submit <= AIM_RATIO * duck)} with spark-submit "
            f"({submit / duck:.1f}x).",
            "",
            "Aim at 10,000,000 messages: through the path a DAG task uses, within "
            f"{CONNECT_AIM_RATIO:.0f}x of DuckDB on the same files: "
            f"{report.verdict(connect <= CONNECT_AIM_RATIO * duck)} on Spark Connect "
            f"({connect:.1f} s, {connect / duck:.1f}x; in a new process, imports included, "
            f"{m.spark_connect_fresh.median:.1f} s, "
            f"{m.spark_connect_fresh.median / duck:.1f}x), against {submit / duck:.1f}x with "
            "spark-submit.",
            "",
        ]
    lines += aims
    lines += [
        "Data generation is not timed in the table: "
        + "; ".join(
            f"{m.dataset.messages:,} messages took {m.dataset.generate_seconds:.0f} s to produce "
            f"and {m.dataset.ack_seconds:.0f} s to acknowledge"
            for m in results
        )
        + ".",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size; no docs by default")
    parser.add_argument(
        "--sizes", help="comma-separated message counts (default 1000000,10000000,30000000)"
    )
    parser.add_argument("--runs", type=int, default=report.MIN_RUNS, help="runs per figure")
    parser.add_argument("--write", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--dir", default=None, help="folder for the stores (default: temp)")
    args = parser.parse_args(argv)
    sizes = (
        tuple(int(s.replace("_", "")) for s in args.sizes.split(","))
        if args.sizes
        else (QUICK_SIZES if args.quick else FULL_SIZES)
    )
    write = (not args.quick) if args.write is None else bool(args.write)
    if write and args.runs < report.MIN_RUNS:
        parser.error(f"figures written to the docs need --runs >= {report.MIN_RUNS}")
    options = report.Options(args.quick, args.runs, write, args.dir)
    host = machine.describe()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from cursorops.spark.session import build_session

    spark = build_session(
        "local[2]", "cursorops-bench", extra={"spark.driver.memory": "4g"}, remote=""
    )
    results: list[Measured] = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="cursorops-spark-", dir=args.dir) as folder,
            local_spark.connect_server(
                Path(folder) / "connect-server.log",
                driver_memory="4g",
                timeout_s=CONNECT_START_SECONDS,
                stop_timeout_s=120,
            ) as server,
        ):
            work = Path(folder)
            for size in sizes:
                results.append(
                    measure(size, args.runs, work, spark, server.url, warm_up=not results)
                )
                for leftover in sorted(work.glob(f"home-{size}")):
                    subprocess.run(["rm", "-rf", str(leftover)], check=True)
            text = markdown(results, options, host, work)
    finally:
        spark.stop()
    print(text)
    if write:
        print(f"wrote {report.write_section(SECTION, text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The binary protocol: cursorops standalone against pulsar-lite, same client, same run.

Both brokers serve the official ``pulsar-client`` (the C++ library under the
Python package) from this process, one after the other in every run, with
64-byte payloads:

- produce, batched (batches of 100, ``send_async`` then ``flush``);
- consume and acknowledge everything just produced (receive, ``acknowledge``);
- produce unbatched, one synchronous ``send`` after the other;
- publish latency, p50 and p99, at a fixed 5,000 msg/s (batching on, the
  client's default 10 ms batching delay), from ``send_async`` to its callback;
- the correctness cases: 10 batches of 10, every other message acknowledged
  with batch-index acks, a reconnect, then what comes back (exact: the 50
  others); the exact backlog after those partial batch acks (cursorops'
  analyze-backlog; pulsar-lite has no admin API to ask); delayed delivery
  (``deliver_after`` 2 s on Shared).

``pulsar-lite`` (PyPI; not a dependency of cursorops) must be installed; the
benchmark says so and measures nothing otherwise. The standalone runs as
``python -m cursorops.cli.main standalone``, so the code measured is this checkout's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Runs

SECTION = "protocol"
PAYLOAD = b"x" * 64
FULL = 200_000
QUICK = 20_000
UNBATCHED_FULL = 1_000
UNBATCHED_QUICK = 200
LATENCY_RATE = 5_000
LATENCY_SECONDS_FULL = 5.0
LATENCY_SECONDS_QUICK = 2.0
ROLE = "admin"
WHERE_PYTHON_STOPS = (
    "Where the time goes, and where a Python broker stops. Batched produce: a batch of "
    "plain messages of one size is read as a whole with numpy and its ledger columns are "
    "built from arrays (no Python per message; a batch with keys, properties, event times "
    "or ordering keys is read message by message, a few microseconds each). What is left is "
    "per group commit: one Parquet segment written under its own name, the file and its "
    "folder fsynced side by side, then one metadata commit flushed: two flushes one after "
    "the other (the commit may list the segment only once it is on disk), and the receipts "
    "go out only then. The client keeps at most 10,000 messages in flight, so throughput is "
    "at most that window over the group commit's time, and on a disk that other processes "
    "load a flush takes tens of milliseconds. Consume: a dispatch mostly reads segments this "
    "process committed moments before, from its memory rather than the files; it records "
    "what it hands out in the metadata store without waiting for the disk (bookkeeping: a "
    "power loss may undo it, and those messages are delivered again), and each "
    "acknowledgement group is a flushed commit. Unbatched, each send waits for its entry's "
    "commit, the two flushes in a row: a receipt here means the message is on disk, and "
    "that it survives kill -9 of the standalone is tested. Counted with strace over 300 "
    "synchronous sends, the standalone makes 3 flush calls per send (the segment, its "
    "folder, the metadata log) and pulsar-lite none: its receipts come before anything "
    "reaches the disk, so the unbatched and latency rows compare a flush per send with "
    "none. The standalone's event loop and its store thread share one interpreter lock and "
    "the machine's 2 cores with the client; pulsar-lite is a native process (Rust, "
    "RocksDB). The correctness rows are where the two differ in kind: pulsar-lite "
    "redelivers none of the unacknowledged messages of partly acknowledged batches after a "
    "reconnect, and delivers a delayed message at once. Before the segment written under "
    "its own name, the reads from memory and the dispatch commits without a flush (same "
    "benchmark, full size, load average 6 to 8): produce 55,600 msg/s (0.51x), consume and "
    "acknowledge 72,300 msg/s (0.35x), unbatched 69.4 msg/s, publish latency p50 43.1 ms; "
    "after them, while other suites loaded the machine (load average about 6): produce "
    "68,600 msg/s (0.74x), consume and acknowledge 164,000 msg/s (0.61x). The broker shares "
    "the 2 cores with the client, so other load costs it more than it costs pulsar-lite: "
    "compare the ratios at the load average stated above. Acknowledgements kept as words "
    "from the wire to the cursor journal (a `CommandAck`'s ack sets become the delta with no "
    "object per batch index), side by side with the revision before, alternating, 5 runs of "
    "200,000 messages on a quiet machine: consume and acknowledge 218,000 then 235,000 "
    "msg/s (medians; with the client's batch-index acks on, 88,700 then 85,300, ranges "
    "76,000 to 120,000 on both sides); the time the standalone spends in its acknowledgement "
    "handler per 100,000 messages, three runs each: 0.065 to 0.068 s before, 0.041 to 0.046 "
    "s after (batch-index acks on: 0.36 to 0.43 s before, 0.29 to 0.35 s after, and "
    "consume and acknowledge faster in each of the three pairs)."
    " All cursor changes through one door (`core/store/cursor_door.py`: acknowledgements "
    "stay on the dispatcher's DBAPI statements, in the same transaction type as skips, "
    "resets and redrives), side by side with the revision before, alternating, on an "
    "Intel Xeon of 2 cores, 23.5 GiB RAM, Debian 12, Python 3.11.7, SQLite 3.40.1: "
    "consume and acknowledge of 100,000 messages (this benchmark's loop, with the "
    "standalone's own CPU time over it), 10 pairs while other suites loaded the machine "
    "(load average 4 to 12): 40,000 then 42,300 msg/s (medians; ranges 27,400 to 118,000 "
    "and 22,600 to 61,800), 3.30 then 3.35 µs of the standalone's CPU per message (ranges "
    "2.7 to 4.0 and 2.7 to 4.1); 8 earlier pairs of 200,000 at load 10 to 21: 4.0 then "
    "4.4 µs per message, each side within the other's range. In process (a Shared "
    "subscription read to the end in batches of 100, each acknowledged: 500 dispatch and "
    "500 acknowledgement transactions), 9 pairs: 2.60 then 2.48 s of CPU. The same, "
    "within the noise of a loaded machine."
)
METADATA_AS_SENT = (
    "What keeping each entry's `MessageMetadata` bytes as sent costs (the "
    "entries-as-sent change, `208fcc4`, and what followed it): `python -m "
    "benchmarks.protocol_revisions` runs this benchmark's three throughput workloads "
    "against the standalone of `208fcc4^` (`f84c392`) and of main, alternating base, "
    "current, base, current..., each on a fresh store, with the standalone's CPU time "
    "per workload (all its threads, from `/proc`); 28 pairs in four sessions of 7 (main "
    "at `b197b4a`, `b40c7ec` and twice `218aea6`, as main moved), on an Intel Xeon of 2 "
    "cores (23.5 GiB RAM, stores on ext4 on /dev/vda), shared with other test suites: "
    "load average 4.4 to 26 as runs started, so wall times vary by 2x from run to run "
    "and the ratio base/current of each pair is the figure (above 1: current slower). "
    "Batched produce: base 31,300 msg/s (16,900 to 53,000), current 32,400 (14,900 to "
    "61,400), base/current per pair median 0.99 (0.40 to 1.65, current slower in 13 of "
    "28); the standalone's CPU 0.80 then 0.83 s per 100,000 messages (medians; "
    "current/base per pair median 1.08); in the quietest session (load average 4.4 to "
    "11.5) per pair median 1.13. Consume and acknowledge: base 37,300 msg/s (21,600 to "
    "70,300), current 42,600 (20,000 to 105,000), per pair median 0.91; CPU 0.43 then "
    "0.35 s per 100,000 (main also has the acknowledgements as words). Unbatched, "
    "synchronous: base 50 msg/s (28 to 97), current 44 (30 to 65), per pair median 1.15 "
    "(0.80 to 1.67, current slower in 20 of 28); CPU 7.9 then 8.6 ms per send "
    "(current/base per pair median 1.14; in the quietest session 6.3 then 8.0 ms, and "
    "base/current per pair median 1.26). The change alone (`1156e78` against `f84c392`, "
    "7 pairs, load average 9 to 21): per pair medians 0.99 (batched produce), 0.96 "
    "(consume and acknowledge: a dispatch sends the stored bytes instead of writing each "
    "entry's metadata again) and 1.08 (unbatched, slower in 6 of 7); the standalone's "
    "CPU +9% to +13%, -14% to -17%, +6% to +12% (ratio of medians, median of pairs). So "
    "within 10% for batched produce (its CPU about 5% more) and for consume (faster), "
    "and more than 10% for synchronous sends. What costs is the segment file's 11 "
    "columns more (`metadata`, `single_metadata`, `entry_payload`, the encryption, "
    "chunk, null-value and schema-version columns), mostly per column and file, not per "
    "byte. Sampled with py-spy (200 Hz, 2 x 1,000 synchronous sends on each revision, "
    "load average 4 to 8), the time added per send is mostly in the store thread's "
    "append, 1.0 ms of it (active samples, which also count waiting for a core): Parquet "
    "encoding 0.55 ms, the producer building the columns 0.15 ms "
    "(`cursorops.core.services.producer.entry_columns`), the null arrays of the absent "
    "ones 0.14 ms (`_assemble`), slicing them 0.08 ms. Encoded in memory with the store's write "
    "options (pyarrow 26, best of 15): the one-message segment a synchronous send "
    "writes, 0.83 to 1.17 ms against 0.47 to 0.50 ms at the base (two rounds); the "
    "100,000 messages of a batched run as stored (50 segments of about 2,000 rows) 0.089 "
    "s with those columns, 0.074 s without `metadata` and `single_metadata`, 0.051 s "
    "without all 11 (about 0.75 ms a segment). For a plain unbatched message all but "
    "`metadata` are null; written without its all-null later columns (which every reader "
    "already takes as null, for segments older than them), that segment encodes in 0.50 "
    "to 0.58 ms. Not done here: it changes what a segment file holds, and the producer "
    "and `_assemble` would then build none of those null columns either."
)
WIRE_IN_LAYERS = (
    "The wire server in layers (`cursorops/wire/server.py`'s one `Connection` class of "
    "944 lines cut into a socketless session, command handlers by concern and the asyncio "
    "server; nothing a client sees changes), side by side with the revision before "
    "(`b9662ab`, whose `cursorops/wire/` is main's at `4d5052a`): `python -m "
    "benchmarks.protocol_revisions --base-tree` a worktree of it (`--base b9662ab` in the "
    "last session), this benchmark's three throughput workloads, 20 pairs in four "
    "sessions of 5, the third with the two checkouts swapped (the layered code first in "
    "each pair), on an AMD EPYC of 2 cores (23.5 GiB RAM, Debian 12, Linux 6.18.44, "
    "Python 3.11.7, SQLite 3.40.1, pulsar-client 3.13.0, stores on ext4 on /dev/vda), "
    "shared with other test suites: load average 5.0 to 14.7 as runs started, so the "
    "ratio before/after of each pair and the standalone's CPU are the figures (above 1: "
    "after slower). Batched produce: before 53,300 msg/s (26,600 to 103,000), after "
    "50,900 (34,500 to 83,500), per pair median 1.00 (0.53 to 2.31, after slower in 10 of "
    "20); the standalone's CPU 0.74 then 0.77 s per 100,000 messages (medians; "
    "after/before per pair median 1.00, more in 8 of 20). Consume and acknowledge: before "
    "57,600 msg/s (37,700 to 163,000), after 61,900 (44,300 to 125,000), per pair median "
    "0.91 (after slower in 7 of 20); CPU 0.36 then 0.37 s per 100,000 (per pair 1.00). "
    "Unbatched, synchronous: before 80 msg/s (45 to 205), after 72 (54 to 182), per pair "
    "median 1.05 (0.38 to 2.66, after slower in 12 of 20; by session 1.04, 1.12, 1.14, "
    "0.85); CPU 5.4 then 5.9 ms per send (medians of runs at loads that differ; per pair "
    "median 1.00, more in 10 of 20). The send's path is the same code moved (the group "
    "commit, the receipt), and per frame the layered server makes one function call more "
    "to find the handler, under a microsecond against the 5 ms of CPU a synchronous send "
    "costs; a send's wall time is mostly its three flushes on the disk the other suites "
    "were using. So the same CPU per pair on every workload, batched produce and consume "
    "no slower, and synchronous sends 5% slower by the per pair median of wall time, "
    "within the noise of their flushes (one session of four faster)."
)
_REPO = Path(__file__).resolve().parent.parent


@dataclass
class Figures:
    produce_batched: list[float] = field(default_factory=list)
    consume_ack: list[float] = field(default_factory=list)
    produce_unbatched: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    redelivered: list[str] = field(default_factory=list)
    backlog: list[str] = field(default_factory=list)
    delayed: list[str] = field(default_factory=list)


@contextlib.contextmanager
def cursorops_standalone(home: Path) -> Iterator[str]:
    with standalone_process(home) as (url, _pid):
        yield url


@contextlib.contextmanager
def standalone_process(home: Path, tree: Path = _REPO) -> Iterator[tuple[str, int]]:
    """The standalone of the checkout ``tree`` (its folder is the process's ``cwd`` and
    ``PYTHONPATH``, so that tree's code is what runs): its broker URL and process id."""
    from cursorops.local import brokers

    with brokers.standalone(home, extra=("--log-level", "warning"), tree=tree) as server:
        yield server.service_url, server.pid


@contextlib.contextmanager
def lite_broker(home: Path) -> Iterator[str]:
    import pulsar_lite as lite

    handle = lite.start_broker(str(home / "lite.db"))
    try:
        yield str(handle.url)
    finally:
        handle.stop()


def _client(url: str) -> object:
    import pulsar

    return pulsar.Client(
        url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def _topic() -> str:
    return f"persistent://public/default/bench-{uuid.uuid4().hex[:10]}"


def throughput(
    url: str, count: int, unbatched: int, mark: Callable[[str], None] | None = None
) -> tuple[float, float, float]:
    """Batched produce, consume and acknowledge, unbatched produce: messages per second.

    ``mark``, when given, is called with each workload's name as it starts and with
    ``"end"`` after the last.
    """
    import pulsar

    def at(name: str) -> None:
        if mark is not None:
            mark(name)

    client = _client(url)
    try:
        topic = _topic()
        consumer = client.subscribe(topic, "bench", receiver_queue_size=10_000)
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=100,
            batching_max_publish_delay_ms=10,
            max_pending_messages=10_000,
            block_if_queue_full=True,
        )
        at("produce_batched")
        with report.Stopwatch() as produce:
            for _ in range(count):
                producer.send_async(PAYLOAD, None)
            producer.flush()
        at("consume_ack")
        with report.Stopwatch() as consume:
            for _ in range(count):
                consumer.acknowledge(consumer.receive(30_000))
        single = client.create_producer(_topic(), batching_enabled=False)
        at("produce_unbatched")
        with report.Stopwatch() as plain:
            for _ in range(unbatched):
                single.send(PAYLOAD)
        at("end")
        consumer.close()
        assert isinstance(consumer, pulsar.Consumer)
    finally:
        client.close()
    return count / produce.seconds, count / consume.seconds, unbatched / plain.seconds


def latency(url: str, seconds: float) -> tuple[float, float]:
    client = _client(url)
    try:
        producer = client.create_producer(_topic(), batching_enabled=True)
        latencies: list[float] = []
        lock = threading.Lock()

        def done(sent_at: float) -> Callable[[object, object], None]:
            def callback(_result: object, _mid: object) -> None:
                with lock:
                    latencies.append(time.perf_counter() - sent_at)

            return callback

        total = int(LATENCY_RATE * seconds)
        start = time.perf_counter()
        for i in range(total):
            due = start + i / LATENCY_RATE
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            producer.send_async(PAYLOAD, done(time.perf_counter()))
        producer.flush()
    finally:
        client.close()
    ordered = sorted(latencies)
    return (
        1000 * statistics.median(ordered),
        1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    )


def correctness(url: str, backlog: Callable[[str, str], int] | None) -> tuple[str, str, str]:
    import pulsar

    client = _client(url)
    try:
        topic = _topic()
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=10, batching_max_publish_delay_ms=50
        )
        for i in range(100):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        options = dict(
            consumer_type=pulsar.ConsumerType.Shared,
            batch_index_ack_enabled=True,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        consumer = client.subscribe(topic, "half", **options)
        for i in range(100):
            message = consumer.receive(10_000)
            if i % 2 == 0:
                consumer.acknowledge(message)
        consumer.close()
        time.sleep(0.5)
        exact = "n/a (no admin API)" if backlog is None else f"{backlog(topic, 'half')} of 50"
        consumer = client.subscribe(topic, "half", **options)
        again = []
        with contextlib.suppress(pulsar.Timeout):
            while True:
                again.append(consumer.receive(2_000).data())
        expected = {f"m{i}".encode() for i in range(1, 100, 2)}
        right = "exact" if set(again) == expected and len(again) == 50 else "wrong"
        redelivered = f"{len(again)} of 50 ({right})"
        consumer.close()

        delayed_topic = _topic()
        consumer = client.subscribe(delayed_topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        plain = client.create_producer(delayed_topic, batching_enabled=False)
        sent = time.perf_counter()
        plain.send(b"later", deliver_after=dt.timedelta(seconds=2))
        try:
            consumer.receive(10_000)
            held = time.perf_counter() - sent
            delayed = f"held {held:.1f} s ({'honoured' if held >= 1.9 else 'early'})"
        except pulsar.Timeout:
            delayed = "never delivered"
        consumer.close()
    finally:
        client.close()
    return redelivered, exact, delayed


def _cursorops_backlog(home: Path) -> Callable[[str, str], int]:
    def backlog(topic: str, subscription: str) -> int:
        from cursorops.core.domain.config import Config
        from cursorops.core.services.broker import Broker

        with Broker(Config.from_home(home)) as broker:
            parts = broker.analysis.analyze_backlog(ROLE, topic, subscription)
        return sum(part.result.messages for part in parts)

    return backlog


def _run(
    figures: Figures,
    url: str,
    count: int,
    unbatched: int,
    seconds: float,
    backlog: Callable[[str, str], int] | None,
) -> None:
    produced, consumed, plain = throughput(url, count, unbatched)
    figures.produce_batched.append(produced)
    figures.consume_ack.append(consumed)
    figures.produce_unbatched.append(plain)
    p50, p99 = latency(url, seconds)
    figures.p50_ms.append(p50)
    figures.p99_ms.append(p99)
    redelivered, exact, delayed = correctness(url, backlog)
    figures.redelivered.append(redelivered)
    figures.backlog.append(exact)
    figures.delayed.append(delayed)
    print(
        f"    produce {produced:,.0f}/s, consume+ack {consumed:,.0f}/s, unbatched {plain:,.0f}/s,"
        f" p50 {p50:.1f} ms, p99 {p99:.1f} ms; {redelivered}; backlog {exact}; {delayed}",
        flush=True,
    )


def _cells(values: Sequence[str]) -> str:
    return values[0] if len(set(values)) == 1 else " / ".join(values)


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("cursorops standalone against pulsar-lite.", argv)
    try:
        import pulsar_lite  # noqa: F401
    except ImportError:
        print("skipped: pulsar-lite is not installed (pip install pulsar-lite)")
        return 0
    host = machine.describe()
    count = QUICK if options.quick else FULL
    unbatched = UNBATCHED_QUICK if options.quick else UNBATCHED_FULL
    seconds = LATENCY_SECONDS_QUICK if options.quick else LATENCY_SECONDS_FULL
    ours, theirs = Figures(), Figures()
    with report.work_dir(options, "protocol") as work:
        for run in range(options.runs):
            home = work / f"cursorops-{run}"
            print(f"  run {run}: cursorops standalone", flush=True)
            with cursorops_standalone(home) as url:
                _run(ours, url, count, unbatched, seconds, _cursorops_backlog(home))
            print(f"  run {run}: pulsar-lite", flush=True)
            (work / f"lite-{run}").mkdir()
            with lite_broker(work / f"lite-{run}") as url:
                _run(theirs, url, count, unbatched, seconds, None)
        lines = report.preamble(
            "Binary protocol: cursorops standalone and pulsar-lite", SECTION, host, options, work
        )
    rows = [
        (f"produce, batches of 100 ({count:,} msgs)", "msg/s", "produce_batched", True),
        (f"consume and acknowledge ({count:,} msgs)", "msg/s", "consume_ack", True),
        (
            f"produce unbatched, synchronous ({unbatched:,} msgs)",
            "msg/s",
            "produce_unbatched",
            True,
        ),
        (f"publish latency p50 at {LATENCY_RATE:,} msg/s", "ms", "p50_ms", False),
        (f"publish latency p99 at {LATENCY_RATE:,} msg/s", "ms", "p99_ms", False),
    ]
    table_rows = []
    for label, unit, name, higher_better in rows:
        a, b = Runs.of(getattr(ours, name)), Runs.of(getattr(theirs, name))
        ratio = a.median / b.median if higher_better else b.median / a.median
        table_rows.append([label, a.cell(unit), b.cell(unit), f"{ratio:.2f}x"])
    lines += [
        "Same official client (pulsar-client "
        f"{_version('pulsar-client')}), pulsar-lite {_version('pulsar-lite')}, 64-byte payloads; "
        "the client runs in the benchmark's process on the same 2 cores as the broker.",
        "",
        report.table(
            ["workload", "cursorops", "pulsar-lite", "cursorops / pulsar-lite"], table_rows
        ),
        "",
        "The last column is the ratio of medians, oriented so that above 1 is cursorops ahead.",
        "",
        "### Correctness cases",
        "",
        report.table(
            ["case", "cursorops", "pulsar-lite"],
            [
                [
                    "every other message of 10 batches acked (batch-index acks), reconnect: "
                    "redelivered",
                    _cells(ours.redelivered),
                    _cells(theirs.redelivered),
                ],
                [
                    "exact backlog after those partial batch acks",
                    _cells(ours.backlog),
                    _cells(theirs.backlog),
                ],
                ["`deliver_after` 2 s on Shared", _cells(ours.delayed), _cells(theirs.delayed)],
            ],
        ),
        "",
        WHERE_PYTHON_STOPS,
        "",
        METADATA_AS_SENT,
        "",
        WIRE_IN_LAYERS,
        "",
    ]
    return report.publish(options, SECTION, "\n".join(lines))


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    raise SystemExit(main())

"""Produce: messages per second to a 16-partition topic, in batches of 100.

Plain messages of 32 bytes in batches of 100, round-robin over 16
partitions, in calls of 100,000 messages (one call = one segment per
partition). Sizes 1x, 10x and 30x of a base, to show how cost grows. Wall
time and the process's CPU time are both reported: the machine is shared, and
the CPU time says what the code costs when it is not waiting for a core.

Two ways in, each measured: ``Producer.send_columns`` (payloads as a list of
bytes, ids back as columns: the form for generating data) and
``Producer.send`` (``OutgoingMessage`` objects in, ``MessageId`` objects out).
Older producers (``core/services/producer.py`` of a commit, loaded from git over
today's ledger store: their trees do not import on their own) run in the same
runs, for side-by-side ratios: the per-message producer (``OLD_COMMIT``) at
1x, the columnar one committing partition after partition
(``PER_PARTITION_COMMIT``) at 10x, and the one before ``send_columns``
(``PREVIOUS_COMMIT``) at 30x. All producers are called directly, without
the Broker's authorization, which is the same for all. One call of ``CALL``
messages through ``send_columns`` is then profiled in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Runs

SECTION = "produce"
OLD_COMMIT = "473903b"
"""The last commit with the per-message producer only."""
PER_PARTITION_COMMIT = "1c90d78"
"""The last commit whose columnar producer committed and fsynced partition after partition."""
PREVIOUS_COMMIT = "4d38220"
"""The last commit before ``send_columns`` (one MessageId per message, pyarrow.array)."""
PARTITIONS = 16
BATCH = 100
CALL = 100_000
AIM = 500_000
FULL_BASE = 50_000
QUICK_BASE = 10_000
SCALES = (1, 10, 30)

_REPO = Path(__file__).resolve().parent.parent

_MEASURE = """
import importlib.util, json, sys, tempfile, time, gc
from pathlib import Path
from cursorops.core.services.broker import Broker
from cursorops.core.domain.config import Config
from cursorops.core.services.producer import OutgoingMessage, Producer

if sys.argv[6] != "-":
    spec = importlib.util.spec_from_file_location("old_producer", sys.argv[6])
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_producer"] = old
    spec.loader.exec_module(old)
    Producer, OutgoingMessage = old.Producer, old.OutgoingMessage

count, partitions, batch, call = (int(a) for a in sys.argv[1:5])
columns = sys.argv[7] == "columns"
topic = "persistent://bench/produce/topic"
with tempfile.TemporaryDirectory(dir=sys.argv[5]) as home:
    with Broker(Config.from_home(Path(home) / "home")) as broker:
        broker.admin.create_tenant("admin", "bench")
        broker.admin.create_namespace("admin", "bench/produce")
        broker.admin.create_topic("admin", topic, partitions=partitions)
        make = (lambda i: b"%032d" % i) if columns else (lambda i: OutgoingMessage(b"%032d" % i))
        chunks = [
            [make(i) for i in range(start, min(start + call, count))]
            for start in range(0, count, call)
        ]
        producer = Producer(broker.ledgers, broker.metadata.get_topic(topic), "bench", batch)
        send = producer.send_columns if columns else producer.send
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        produced = 0
        for chunk in chunks:
            produced += len(send(chunk, broker.clock()))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert produced == count
        print(json.dumps({"wall": wall, "cpu": cpu}))
"""


def _run(old_producer: Path | None, count: int, work: Path, api: str) -> tuple[float, float]:
    """Seconds (wall, CPU) to produce ``count`` messages through ``api`` ("send" or "columns")."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _MEASURE,
            str(count),
            str(PARTITIONS),
            str(BATCH),
            str(CALL),
            str(work),
            str(old_producer or "-"),
            api,
        ],
        cwd=_REPO,
        env={**os.environ, "PYTHONPATH": str(_REPO)},
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"produce run failed: {done.stderr.strip()[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return float(figures["wall"]), float(figures["cpu"])


def _git_file(commit: str, path: str, into: Path) -> Path:
    into.write_bytes(
        subprocess.run(
            ["git", "show", f"{commit}:{path}"], cwd=_REPO, check=True, capture_output=True
        ).stdout
    )
    return into


def _profile_one_call(work: Path) -> report.Profile:
    """``cProfile`` of one ``send_columns`` of ``CALL`` payloads to a fresh topic."""
    from cursorops.core.domain.config import Config
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.producer import OutgoingMessage, Producer

    topic = "persistent://bench/produce/profiled"
    with (
        tempfile.TemporaryDirectory(dir=work) as home,
        Broker(Config.from_home(Path(home) / "home")) as broker,
    ):
        broker.admin.create_tenant("admin", "bench")
        broker.admin.create_namespace("admin", "bench/produce")
        broker.admin.create_topic("admin", topic, partitions=PARTITIONS)
        producer = Producer(broker.ledgers, broker.metadata.get_topic(topic), "bench", BATCH)
        producer.send([OutgoingMessage(b"warm")], broker.clock())
        chunk = [b"%032d" % i for i in range(CALL)]
        return report.profile(lambda: producer.send_columns(chunk, broker.clock()))


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Produce to a 16-partition topic.", argv)
    host = machine.describe()
    base = QUICK_BASE if options.quick else FULL_BASE
    with report.work_dir(options, "produce") as work, tempfile.TemporaryDirectory() as trees:
        files = {
            code: _git_file(
                commit, "core/services/producer.py", Path(trees) / f"{code}_producer.py"
            )
            for code, commit in (
                ("before", OLD_COMMIT),
                ("per-partition", PER_PARTITION_COMMIT),
                ("previous", PREVIOUS_COMMIT),
            )
        }
        # (code, producer file or None for today's, scale, API)
        plan: list[tuple[str, Path | None, int, str]] = [
            ("before", files["before"], 1, "send"),
            ("per-partition", files["per-partition"], 10, "send"),
            ("previous", files["previous"], 30, "send"),
        ]
        plan += [("now", None, scale, "send") for scale in SCALES]
        plan += [("now", None, scale, "columns") for scale in SCALES]
        measured: dict[tuple[str, int, str], tuple[list[float], list[float]]] = {}
        for run in range(options.runs):
            for code, producer_file, scale, api in plan:
                count = base * scale
                wall, cpu = _run(producer_file, count, work, api)
                wall_list, cpu_list = measured.setdefault((code, scale, api), ([], []))
                wall_list.append(wall)
                cpu_list.append(cpu)
                print(
                    f"  run {run}: {code} {api}, {count:,}: wall {wall:.2f} s, cpu {cpu:.2f} s",
                    flush=True,
                )
        labels = {
            ("before", "send"): f"before (`{OLD_COMMIT}`, per message), `send`",
            ("per-partition", "send"): (
                f"columnar, a commit per partition (`{PER_PARTITION_COMMIT}`), `send`"
            ),
            ("previous", "send"): f"before `send_columns` (`{PREVIOUS_COMMIT}`), `send`",
            ("now", "send"): "now, `send` (MessageId objects)",
            ("now", "columns"): "now, `send_columns` (id columns)",
        }
        figures: dict[tuple[str, int, str], tuple[Runs, Runs]] = {}
        rows: list[list[str]] = []
        for code, _, scale, api in plan:
            count = base * scale
            walls, cpus = (Runs.of(values) for values in measured[(code, scale, api)])
            figures[(code, scale, api)] = (walls, cpus)
            rows.append(
                [
                    f"{labels[(code, api)]}, {scale}x",
                    f"{count:,}",
                    walls.cell("s"),
                    report.rates(count, walls).cell(),
                    cpus.cell("s"),
                    report.rates(count, cpus).cell(),
                    report.verdict(report.rates(count, walls).median >= AIM),
                ]
            )
        profiled = _profile_one_call(work)

        def ratio(older: tuple[str, int, str], newer: tuple[str, int, str]) -> str:
            (old_walls, old_cpus), (new_walls, new_cpus) = figures[older], figures[newer]
            return (
                f"{old_walls.median / new_walls.median:.1f}x in wall time and "
                f"{old_cpus.median / new_cpus.median:.1f}x in CPU time"
            )

        top = max(SCALES)
        columns_top = figures[("now", top, "columns")]
        per_message = {
            api: [figures[("now", s, api)][1].median / (base * s) for s in SCALES]
            for api in ("columns", "send")
        }
        lines = report.preamble("Produce", "produce", host, options, work)
        lines += [
            f"Plain messages of 32 bytes in batches of {BATCH} to a {PARTITIONS}-partition "
            f"topic in calls of {CALL:,} messages (fewer at the smallest size); round-robin "
            "routing, one segment per partition per call, all of a call's segments "
            "registered in one metadata transaction (SQLite), each file and its folder "
            "fsynced before the commit (durable on return). `send_columns` takes the "
            "payloads as a list of bytes and returns the ids as columns (`MessageIdColumns`, "
            "MessageId objects built only when indexed); `send` takes `OutgoingMessage` "
            "objects and returns `MessageId` objects. Every run is a fresh process and "
            "installation, first call included; the older producers are "
            "`core/services/producer.py` of the named commits over today's ledger and "
            "metadata stores, in the same runs.",
            "",
            report.table(
                [
                    "code, size",
                    "messages",
                    "wall time",
                    "msg/s (wall)",
                    "CPU time",
                    "msg/s (CPU)",
                    f"vs {AIM:,}/s (wall)",
                ],
                rows,
            ),
            "",
            f"At {top}x, `send_columns` runs "
            f"{report.rates(base * top, columns_top[0]).median:,.0f} msg/s in wall time "
            f"and {report.rates(base * top, columns_top[1]).median:,.0f} per CPU-second: "
            + ratio(("previous", top, "send"), ("now", top, "columns"))
            + f" the rate of the producer before it (`{PREVIOUS_COMMIT}`); `send` now runs "
            + ratio(("previous", top, "send"), ("now", top, "send"))
            + " that rate. At 1x `send_columns` runs "
            + ratio(("before", 1, "send"), ("now", 1, "columns"))
            + " the per-message producer's rate; at 10x, "
            + ratio(("per-partition", 10, "send"), ("now", 10, "columns"))
            + " the rate of one commit per partition (medians, same runs). CPU time per "
            "message at 1x, 10x, 30x: `send_columns` "
            + ", ".join(f"{1e6 * p:.2f} µs" for p in per_message["columns"])
            + "; `send` "
            + ", ".join(f"{1e6 * p:.2f} µs" for p in per_message["send"])
            + " (growth with the data is linear when these stay level). The wall-time "
            "figure is the one the aim is judged by; the load average above says how much "
            "of the two cores the run had.",
            "",
            *report.profile_markdown(profiled, f"one `send_columns` call of {CALL:,} payloads"),
        ]
        markdown = "\n".join(lines) + "\n"
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

"""Produce: messages per second through ``Broker.produce`` to a 16-partition topic.

Plain messages of 32 bytes in batches of 100, round-robin over 16
partitions, in calls of 100,000 messages (one call = one segment per
partition). Sizes 1x, 10x and 30x of a base, to show how cost grows. Wall
time and the process's CPU time are both reported: the machine is shared, and
the CPU time says what the code costs when it is not waiting for a core.

The producer before the columnar path (``core/producer.py`` of commit
``OLD_COMMIT``, loaded from git over today's ledger store: that commit's tree
does not import on its own) runs at 1x in the same run, for the side-by-side
ratio; the columnar producer before one commit per send (``PER_PARTITION_COMMIT``:
one metadata commit and one fsync after another per partition) runs at 10x.
All producers are called directly (``Producer.send``), without the Broker's
authorization, which is the same for all. One call of ``CALL`` messages is
then profiled in this process.
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
from core.broker import Broker
from core.config import Config
from core.producer import OutgoingMessage, Producer

if sys.argv[6] != "-":
    spec = importlib.util.spec_from_file_location("old_producer", sys.argv[6])
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_producer"] = old
    spec.loader.exec_module(old)
    Producer, OutgoingMessage = old.Producer, old.OutgoingMessage

count, partitions, batch, call = (int(a) for a in sys.argv[1:5])
topic = "persistent://bench/produce/topic"
with tempfile.TemporaryDirectory(dir=sys.argv[5]) as home:
    with Broker(Config.from_home(Path(home) / "home")) as broker:
        broker.create_tenant("admin", "bench")
        broker.create_namespace("admin", "bench/produce")
        broker.create_topic("admin", topic, partitions=partitions)
        chunks = [
            [OutgoingMessage(b"%032d" % i) for i in range(start, min(start + call, count))]
            for start in range(0, count, call)
        ]
        producer = Producer(broker.ledgers, broker.metadata.get_topic(topic), "bench", batch)
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        produced = 0
        for chunk in chunks:
            produced += len(producer.send(chunk, broker.clock()))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert produced == count
        print(json.dumps({"wall": wall, "cpu": cpu}))
"""


def _run(old_producer: Path | None, count: int, work: Path) -> tuple[float, float]:
    """Seconds (wall, CPU) to produce ``count`` messages (with the old producer if given)."""
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
    """``cProfile`` of one send of ``CALL`` plain messages to a fresh topic."""
    from core.broker import Broker
    from core.config import Config
    from core.producer import OutgoingMessage, Producer

    topic = "persistent://bench/produce/profiled"
    with (
        tempfile.TemporaryDirectory(dir=work) as home,
        Broker(Config.from_home(Path(home) / "home")) as broker,
    ):
        broker.create_tenant("admin", "bench")
        broker.create_namespace("admin", "bench/produce")
        broker.create_topic("admin", topic, partitions=PARTITIONS)
        producer = Producer(broker.ledgers, broker.metadata.get_topic(topic), "bench", BATCH)
        producer.send([OutgoingMessage(b"warm")], broker.clock())
        chunk = [OutgoingMessage(b"%032d" % i) for i in range(CALL)]
        return report.profile(lambda: producer.send(chunk, broker.clock()))


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Produce to a 16-partition topic.", argv)
    host = machine.describe()
    base = QUICK_BASE if options.quick else FULL_BASE
    with report.work_dir(options, "produce") as work, tempfile.TemporaryDirectory() as trees:
        old = _git_file(OLD_COMMIT, "core/producer.py", Path(trees) / "old_producer.py")
        per_partition = _git_file(
            PER_PARTITION_COMMIT, "core/producer.py", Path(trees) / "per_partition_producer.py"
        )
        rows: list[list[str]] = []
        measured: dict[tuple[str, int], tuple[list[float], list[float]]] = {}
        plan: list[tuple[str, Path | None, int]] = [
            ("before", old, 1),
            ("per-partition", per_partition, 10),
        ]
        plan += [("now", None, scale) for scale in SCALES]
        for run in range(options.runs):
            for code, producer_file, scale in plan:
                count = base * scale
                wall, cpu = _run(producer_file, count, work)
                wall_list, cpu_list = measured.setdefault((code, scale), ([], []))
                wall_list.append(wall)
                cpu_list.append(cpu)
                print(
                    f"  run {run}: {code}, {count:,}: wall {wall:.2f} s, cpu {cpu:.2f} s",
                    flush=True,
                )
        labels = {
            "before": f"before (`{OLD_COMMIT}`, per message)",
            "per-partition": f"columnar, a commit per partition (`{PER_PARTITION_COMMIT}`)",
            "now": "now",
        }
        figures: dict[tuple[str, int], tuple[Runs, Runs]] = {}
        for code, _, scale in plan:
            count = base * scale
            walls, cpus = (Runs.of(values) for values in measured[(code, scale)])
            figures[(code, scale)] = (walls, cpus)
            rows.append(
                [
                    f"{labels[code]}, {scale}x",
                    f"{count:,}",
                    walls.cell("s"),
                    report.rates(count, walls).cell(),
                    cpus.cell("s"),
                    report.rates(count, cpus).cell(),
                    report.verdict(report.rates(count, walls).median >= AIM),
                ]
            )
        profiled = _profile_one_call(work)
        old_walls, old_cpus = figures[("before", 1)]
        new_walls, new_cpus = figures[("now", 1)]
        pp_walls, pp_cpus = figures[("per-partition", 10)]
        now10_walls, now10_cpus = figures[("now", 10)]
        per_message = [figures[("now", s)][1].median / (base * s) for s in SCALES]
        lines = report.preamble("Produce", "produce", host, options, work)
        lines += [
            f"Plain messages of 32 bytes, `Producer.send` with batch size {BATCH} to a "
            f"{PARTITIONS}-partition topic in calls of {CALL:,} messages (fewer at the "
            "smallest size); round-robin routing, one segment per partition per call. Now "
            "every partition's segment of a call is registered in ONE metadata transaction "
            "(SQLite) and the 16 files are written and fsynced side by side, each file and "
            "its folder fsynced before the commit. Every run is a fresh process and "
            "installation; the older producers are `core/producer.py` of the named commits "
            "over today's ledger store, in the same runs.",
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
            f"At 1x the code now runs {old_walls.median / new_walls.median:.1f}x the "
            "per-message producer's rate in wall time and "
            f"{old_cpus.median / new_cpus.median:.1f}x in CPU time; at 10x, "
            f"{pp_walls.median / now10_walls.median:.2f}x the rate of one commit per "
            f"partition in wall time and {pp_cpus.median / now10_cpus.median:.2f}x in CPU "
            "time (medians, same runs). CPU time per message at 1x, 10x, 30x: "
            + ", ".join(f"{1e6 * p:.2f} µs" for p in per_message)
            + " (growth with the data is linear when these stay level). The wall-time "
            "figure is the one the aim is judged by; the load average above says how much "
            "of the two cores the run had.",
            "",
            *report.profile_markdown(profiled, f"one call of {CALL:,} plain messages"),
        ]
        markdown = "\n".join(lines) + "\n"
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

"""Produce: messages per second through ``Broker.produce`` to a 16-partition topic.

Plain messages of 32 bytes in batches of 100, round-robin over 16
partitions, in calls of 100,000 messages (one call = one segment per
partition). Sizes 1x, 10x and 30x of a base, to show how cost grows. Wall
time and the process's CPU time are both reported: the machine is shared, and
the CPU time says what the code costs when it is not waiting for a core.

The producer before the columnar path (``core/producer.py`` of commit
``OLD_COMMIT``, loaded from git over today's ledger store: that commit's tree
does not import on its own) runs at 1x in the same run, for the side-by-side
ratio. Both producers are called directly (``Producer.send``), without the
Broker's authorization, which is the same for both.
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


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Produce to a 16-partition topic.", argv)
    host = machine.describe()
    base = QUICK_BASE if options.quick else FULL_BASE
    with report.work_dir(options, "produce") as work, tempfile.TemporaryDirectory() as trees:
        old = Path(trees) / "old_producer.py"
        old.write_bytes(
            subprocess.run(
                ["git", "show", f"{OLD_COMMIT}:core/producer.py"],
                cwd=_REPO,
                check=True,
                capture_output=True,
            ).stdout
        )
        rows: list[list[str]] = []
        new_at: dict[int, tuple[Runs, Runs]] = {}
        old_wall: list[float] = []
        old_cpu: list[float] = []
        for run in range(options.runs):
            wall, cpu = _run(old, base, work)
            old_wall.append(wall)
            old_cpu.append(cpu)
            print(f"  run {run}: old code, {base:,}: wall {wall:.2f} s, cpu {cpu:.2f} s")
            for scale in SCALES:
                count = base * scale
                wall, cpu = _run(None, count, work)
                walls, cpus = new_at.get(scale, (Runs.of([wall]), Runs.of([cpu])))
                if scale in new_at:
                    walls = Runs.of([*walls.values, wall])
                    cpus = Runs.of([*cpus.values, cpu])
                new_at[scale] = (walls, cpus)
                print(f"  run {run}: {count:,}: wall {wall:.2f} s, cpu {cpu:.2f} s", flush=True)
        old_walls, old_cpus = Runs.of(old_wall), Runs.of(old_cpu)
        rows.append(
            [
                f"before (`{OLD_COMMIT}`), 1x",
                f"{base:,}",
                old_walls.cell("s"),
                report.rates(base, old_walls).cell(),
                old_cpus.cell("s"),
                report.rates(base, old_cpus).cell(),
                report.verdict(report.rates(base, old_walls).median >= AIM),
            ]
        )
        for scale in SCALES:
            count = base * scale
            walls, cpus = new_at[scale]
            rows.append(
                [
                    f"now, {scale}x",
                    f"{count:,}",
                    walls.cell("s"),
                    report.rates(count, walls).cell(),
                    cpus.cell("s"),
                    report.rates(count, cpus).cell(),
                    report.verdict(report.rates(count, walls).median >= AIM),
                ]
            )
        new_walls, new_cpus = new_at[1]
        per_message = [new_at[s][1].median / (base * s) for s in SCALES]
        lines = report.preamble("Produce", "produce", host, options, work)
        lines += [
            f"Plain messages of 32 bytes, `Broker.produce(..., batch_size={BATCH})` to a "
            f"{PARTITIONS}-partition topic in calls of {CALL:,} messages (fewer at the "
            "smallest size); round-robin routing, one segment per partition per call, each "
            "segment fsynced and committed in the metadata store (SQLite). Every run "
            'is a fresh process and installation. "before" is `core/producer.py` of the named '
            "commit (the per-message producer) over today's ledger store, in the same run; "
            "both producers are called directly (`Producer.send`).",
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
            f"At 1x the columnar path runs {old_walls.median / new_walls.median:.1f}x the old "
            f"code's rate in wall time and {old_cpus.median / new_cpus.median:.1f}x in CPU time "
            "(medians, same runs). CPU time per message at 1x, 10x, 30x: "
            + ", ".join(f"{1e6 * p:.2f} µs" for p in per_message)
            + " (growth with the data is linear when these stay level). The machine was "
            "shared with other engineers' tests (see the load average): wall times are far "
            "above CPU times, and the wall-time figure is the one the aim is judged by.",
            "",
        ]
        markdown = "\n".join(lines) + "\n"
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

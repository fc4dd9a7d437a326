"""Wall time of the ``cursorops`` command for the three commands operators run most.

``topics stats``, ``topics analyze-backlog`` and ``topics skip-messages`` (three
ids, different ones each run, so every run really skips) on a non-partitioned
topic of 1,000 messages with one Shared subscription, and at 10x and 30x that
size. Each run is a new process (``python -m cursorops.cli.main``, what the installed
script runs), timed from start to exit; its answer is checked (exit 0, the
backlog it reports, the ids it skipped). The command is a client: it sends one
request to the home's standalone over the home's socket, which the first, untimed,
run started in the background (warm, as a home is after its first command), and the
standalone is stopped at the end. Side by side: ``python -c pass`` (the interpreter's
start-up) and ``python -c "import cursorops.cli.main"`` (the client's own import).

CPU seconds (user + system of the command's process) are reported next to wall time:
on a shared machine wall time includes waiting for a core, CPU time much less so. The
broker's work runs in the standalone and is in the wall time, not in that CPU. The
processes write bytecode to a cache under the work folder and each command runs once
untimed first, as an installed ``cursorops`` runs from cached bytecode.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import machine, report
from benchmarks.report import Options, Runs
from cursorops.cli.home import stop
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker

SECTION = "cli_latency"
ROLE = "admin"
TOPIC = "persistent://bench/cli/topic"
SUBSCRIPTION = "sub"
BASE_MESSAGES = 1_000
SCALES = (1, 10, 30)
QUICK_SCALES = (1,)
RUNS = 7
"""Runs per figure (more with ``--runs``)."""
SKIPPED_PER_RUN = 3
AIM_S = 0.2
"""A small command on a warm home answers in under this."""
FLOOR_IMPORTS = "import cursorops.cli.main"

_REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


def _environment(work: Path) -> dict[str, str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CURSOROPS_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    environment["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return environment


def timed(command: Sequence[str], environment: dict[str, str]) -> tuple[Timing, str]:
    """Run ``command`` in a new process: its wall and CPU seconds and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        list(command), capture_output=True, text=True, env=environment, cwd=_REPO, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu), done.stdout


def build_home(home: Path, messages: int) -> None:
    """One topic of ``messages`` single-message entries and a Shared subscription (not timed)."""
    with Broker(Config.from_home(home)) as broker:
        broker.admin.create_tenant(ROLE, "bench")
        broker.admin.create_namespace(ROLE, "bench/cli")
        broker.admin.create_topic(ROLE, TOPIC)
        broker.admin.create_subscription(
            ROLE, TOPIC, SUBSCRIPTION, SubscriptionType.SHARED, initial_position="earliest"
        )
        for start in range(0, messages, 10_000):
            payloads = [b"m%d" % i for i in range(start, min(messages, start + 10_000))]
            broker.producing.produce_columns(ROLE, TOPIC, payloads)


class Commands:
    """The three commands on one home, each run checked against what it must answer.

    Run as the installed ``cursorops`` script runs them (``python -m cursorops.cli.main``).
    """

    def __init__(
        self,
        home: Path,
        messages: int,
        environment: dict[str, str],
    ) -> None:
        self.home = home
        self.messages = messages
        self.environment = environment
        self.skipped = 0

    def _cursorops(self, *args: str) -> tuple[Timing, Any]:
        command = [
            sys.executable,
            "-m",
            "cursorops.cli.main",
            "--home",
            str(self.home),
            "-o",
            "json",
        ]
        timing, out = timed([*command, *args], self.environment)
        return timing, json.loads(out)

    def stats(self) -> Timing:
        timing, answer = self._cursorops("topics", "stats", TOPIC)
        backlog = answer["subscriptions"][SUBSCRIPTION]["msgBacklog"]
        assert backlog == self.messages - self.skipped, answer
        return timing

    def analyze(self) -> Timing:
        timing, answer = self._cursorops("topics", "analyze-backlog", TOPIC, "-s", SUBSCRIPTION)
        assert answer["subscriptions"][SUBSCRIPTION]["messages"] == self.messages - self.skipped
        return timing

    def skip(self) -> Timing:
        # Ids spread over the topic (one ledger: 30x is below a ledger's 50,000 entries),
        # none skipped before, so every run writes.
        step = self.messages // 32
        ids = [f"1:{j * step}" for j in range(self.skipped, self.skipped + SKIPPED_PER_RUN)]
        timing, answer = self._cursorops(
            "topics", "skip-messages", TOPIC, "-s", SUBSCRIPTION, "--messageId-triplet", *ids
        )
        assert [m["triplet"] for m in answer["skipped"]] == ids, answer
        self.skipped += SKIPPED_PER_RUN
        return timing


@dataclass
class Row:
    what: str
    wall: Runs
    cpu: Runs
    hot: bool
    """One of the three commands (held to the aim), not a reference."""


def measure(work: Path, scale: int, runs: int) -> list[Row]:
    messages = BASE_MESSAGES * scale
    home = work / f"home-{scale}x"
    build_home(home, messages)
    environment = _environment(work)
    cold = Commands(home, messages, environment)
    python = sys.executable
    work_items = [
        ("`python -c pass`", lambda: timed([python, "-c", "pass"], environment)[0], False),
        (
            f"`python -c '{FLOOR_IMPORTS}'`",
            lambda: timed([python, "-c", FLOOR_IMPORTS], environment)[0],
            False,
        ),
        ("`topics stats`", cold.stats, True),
        ("`topics analyze-backlog -s sub`", cold.analyze, True),
        (f"`topics skip-messages` ({SKIPPED_PER_RUN} ids)", cold.skip, True),
    ]
    for _, run, _ in work_items:
        run()  # untimed: fills the bytecode cache
    timings: dict[str, list[Timing]] = {what: [] for what, _, _ in work_items}
    try:
        for _ in range(runs):
            # Interleaved, so that a burst of load on the shared machine hits every row alike.
            for what, run, _ in work_items:
                timings[what].append(run())
    finally:
        stop(str(home), None)  # the home's background standalone the first command started
    return [
        Row(
            what,
            Runs.of([t.wall for t in timings[what]]),
            Runs.of([t.cpu for t in timings[what]]),
            hot,
        )
        for what, _, hot in work_items
    ]


def markdown(
    host: machine.Machine, options: Options, work: Path, results: dict[int, list[Row]]
) -> str:
    lines = report.preamble("CLI latency", "cli_latency", host, options, work)
    lines += [
        f"Each figure is one new process per run, from start to exit: the three commands on a "
        f"non-partitioned topic of {BASE_MESSAGES:,} messages (one Shared subscription) and at "
        f"{', '.join(f'{s}x' for s in SCALES[1:])} that size, next to the interpreter's start-up "
        "and the client's own import in the same run, rows interleaved. Each command is one "
        "request to the home's standalone over its socket (warm: started by the first, untimed, "
        "run; stopped at the end). CPU is user + system seconds of the command's process; the "
        "broker's work runs in the standalone and shows in the wall time only; CPU over the "
        "floor is a command's median less the client import's median. "
        "Bytecode cached (one untimed run of each first). "
        f"Aim: under {AIM_S} s wall for each command at 1x.",
        "",
    ]
    headers = ["size", "command", "wall s", "CPU s", "CPU over the floor", f"wall < {AIM_S} s"]
    rows = []
    for scale, measured in results.items():
        floor = next(row for row in measured if FLOOR_IMPORTS in row.what).cpu.median
        for row in measured:
            rows.append(
                [
                    f"{BASE_MESSAGES * scale:,} msgs ({scale}x)",
                    row.what,
                    row.wall.cell(),
                    row.cpu.cell(),
                    f"{row.cpu.median - floor:+.3f} s" if row.hot else "",
                    report.verdict(row.wall.median < AIM_S) if row.hot else "reference",
                ]
            )
    lines += [report.table(headers, rows), ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Wall time of the cursorops command.", argv)
    runs = options.runs if options.quick else max(options.runs, RUNS)
    options = dataclasses.replace(options, runs=runs)
    scales = QUICK_SCALES if options.quick else SCALES
    host = machine.describe()
    results: dict[int, list[Row]] = {}
    with report.work_dir(options, "cli") as work:
        for scale in scales:
            results[scale] = measure(work, scale, runs)
            for row in results[scale]:
                print(
                    f"{scale}x {row.what}: wall {row.wall.cell()} cpu {row.cpu.cell()}", flush=True
                )
        text = markdown(host, options, work, results)
    return report.publish(options, SECTION, text)


if __name__ == "__main__":
    sys.exit(main())

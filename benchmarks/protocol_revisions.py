"""The binary protocol's throughput at two revisions, side by side, runs alternating.

The workloads are :func:`benchmarks.protocol.throughput`'s (batched produce,
consume and acknowledge, unbatched produce; the official client, 64-byte
payloads), run against ``python -m cursorops.cli.main standalone`` of one checkout and
then of the other: a base revision (``--base REV``, checked out into a
temporary ``git worktree`` removed afterwards, or ``--base-tree PATH``, a
checkout already there) and this checkout (or ``--current-tree PATH``, to
measure a revision between the base and this one). The client side is this script's
in both, so only the standalone differs. Runs alternate base, current, base,
current...; each starts a fresh standalone on a fresh store and notes the load
average as it starts and the CPU time the standalone spent in each workload
(``/proc/<pid>/stat``, all its threads), which waiting for a core on a shared
machine does not inflate the way it inflates wall time.

``python -m benchmarks.protocol_revisions --base 208fcc4^ [--pairs N] [--quick]``
prints every run and then the medians, ranges and ratios. It writes nothing
to ``docs/benchmarks.md``: what it measured is quoted where a section needs it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import protocol, report
from benchmarks.before_after import base_worktree
from benchmarks.machine import storage

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = ("produce_batched", "consume_ack", "produce_unbatched")
LABELS = {
    "produce_batched": "produce, batches of 100",
    "consume_ack": "consume and acknowledge",
    "produce_unbatched": "produce unbatched, synchronous",
}
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    tree: str
    load: float
    """1-minute load average as the run started."""
    rates: dict[str, float] = field(default_factory=dict)
    """Messages per second per workload."""
    cpu: dict[str, float] = field(default_factory=dict)
    """The standalone's CPU seconds per workload."""


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far, all threads."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _commit(tree: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def one_run(label: str, tree: Path, work: Path, count: int, unbatched: int) -> Run:
    run = Run(tree=label, load=os.getloadavg()[0])
    home = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=work))
    with protocol.standalone_process(home, tree) as (url, pid):
        marks: list[tuple[str, float]] = []
        produced, consumed, plain = protocol.throughput(
            url, count, unbatched, lambda name: marks.append((name, _cpu_seconds(pid)))
        )
    run.rates = dict(zip(WORKLOADS, (produced, consumed, plain), strict=True))
    for (name, start), (_next, end) in zip(marks, marks[1:], strict=False):
        run.cpu[name] = end - start
    return run


@contextmanager
def _base(args: argparse.Namespace, work: Path) -> Iterator[Path]:
    if args.base_tree:
        yield Path(args.base_tree).resolve()
    else:
        with base_worktree(args.base, work) as path:
            yield path


def _line(run: Run) -> str:
    rates = ", ".join(f"{name} {run.rates[name]:,.0f}/s" for name in WORKLOADS)
    cpu = ", ".join(f"{run.cpu[name]:.2f}" for name in WORKLOADS)
    return f"  {run.tree:<7} load {run.load:5.2f}: {rates}; standalone CPU s {cpu}"


def summary(runs: Sequence[Run], count: int, unbatched: int) -> list[str]:
    lines = []
    for name in WORKLOADS:
        messages = unbatched if name == "produce_unbatched" else count
        base = [r for r in runs if r.tree == "base"]
        current = [r for r in runs if r.tree == "current"]
        b = report.Runs.of([r.rates[name] for r in base])
        c = report.Runs.of([r.rates[name] for r in current])
        pairs = [x.rates[name] / y.rates[name] for x, y in zip(base, current, strict=False)]
        per = 100_000 / messages
        bc = report.Runs.of([r.cpu[name] * per for r in base])
        cc = report.Runs.of([r.cpu[name] * per for r in current])
        lines.append(
            f"{LABELS[name]} ({messages:,} msgs): base {b.cell('msg/s')}, current "
            f"{c.cell('msg/s')}; base/current {b.median / c.median:.3f} (pairs: median "
            f"{statistics.median(pairs):.3f}, {min(pairs):.3f} to {max(pairs):.3f}); "
            f"standalone CPU s per 100,000 msgs: base {bc.cell()}, current {cc.cell()}, "
            f"current/base {cc.median / bc.median:.3f}"
        )
    loads = [r.load for r in runs]
    lines.append(f"load average (1 min) at the runs: {min(loads):.2f} to {max(loads):.2f}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--base", help="the base revision, checked out into a temporary worktree")
    where.add_argument("--base-tree", help="a checkout of the base revision")
    parser.add_argument(
        "--current-tree", default=str(REPO), help="the checkout to compare (default: this one)"
    )
    parser.add_argument("--pairs", type=int, default=5, help="runs of each tree (default 5)")
    parser.add_argument("--quick", action="store_true", help="smoke sizes")
    parser.add_argument("--dir", default=None, help="folder for the stores (default: temp)")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    count = protocol.QUICK if args.quick else protocol.FULL
    unbatched = protocol.UNBATCHED_QUICK if args.quick else protocol.UNBATCHED_FULL
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cursorops-revisions-", dir=args.dir) as folder:
        work = Path(folder)
        with _base(args, work) as base:
            current = Path(args.current_tree).resolve()
            trees = {"base": base, "current": current}
            print(
                f"base {_commit(base)} ({base}), current {_commit(current)} ({current}); "
                f"{count:,} msgs batched, {unbatched:,} unbatched; stores on "
                f"{storage(work)}",
                flush=True,
            )
            runs = []
            for _pair in range(args.pairs):
                for label in ("base", "current"):
                    runs.append(one_run(label, trees[label], work, count, unbatched))
                    print(_line(runs[-1]), flush=True)
    print("\n".join(summary(runs, count, unbatched)))
    print(f"{(time.perf_counter() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

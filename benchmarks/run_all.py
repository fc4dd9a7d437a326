"""Run every benchmark, one after the other, each in its own Python process.

A process per benchmark so that one's memory and garbage never weigh on the
next. ``benchmarks.spark_backlog`` and ``benchmarks.airflow_match`` (a local
Airflow and Spark) run too when their modules exist, and are skipped with a
note when they do not. The options (``--quick``, ``--runs``,
``--write/--no-write``, ``--dir``), which every benchmark takes, are passed on.
The exit status is non-zero when any benchmark failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

CORE_BENCHMARKS = ("cursor_acks", "group_acks", "read_path", "produce", "skip_ids", "cli_latency")
OPTIONAL_BENCHMARKS = ("spark_backlog", "airflow_match")

_REPO = Path(__file__).resolve().parent.parent


def _available(name: str) -> bool:
    return importlib.util.find_spec(f"benchmarks.{name}") is not None


def _run(name: str, args: list[str]) -> tuple[int, float]:
    command = [sys.executable, "-m", f"benchmarks.{name}", *args]
    print(f"== {' '.join(command[1:])}", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=_REPO, check=False)
    return done.returncode, time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every benchmark.")
    parser.add_argument("--quick", action="store_true", help="small smoke sizes")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure")
    parser.add_argument("--write", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--dir", default=None, help="folder for the stores (default: temp)")
    args = parser.parse_args(argv)
    passed: list[str] = ["--quick"] if args.quick else []
    if args.runs is not None:
        passed += ["--runs", str(args.runs)]
    if args.write is not None:
        passed.append("--write" if args.write else "--no-write")
    if args.dir is not None:
        passed += ["--dir", args.dir]

    plan = list(CORE_BENCHMARKS)
    for name in OPTIONAL_BENCHMARKS:
        if _available(name):
            plan.append(name)
        else:
            print(f"== {name}: skipped, benchmarks/{name}.py is not present", flush=True)

    summary: list[tuple[str, int, float]] = []
    for name in plan:
        code, seconds = _run(name, passed)
        summary.append((name, code, seconds))
    print("\n== summary")
    for name, code, seconds in summary:
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        print(f"  {name:<15} {status:<18} {seconds:8.1f} s")
    return 0 if all(code == 0 for _, code, _ in summary) else 1


if __name__ == "__main__":
    sys.exit(main())

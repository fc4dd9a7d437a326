"""Run every benchmark, one after the other, each in its own Python process.

A process per benchmark so that one's memory and garbage never weigh on the
next. The heavy ones run after the others, each when its module exists and what
it needs is set up, and are skipped with a note otherwise:
``benchmarks.spark_backlog`` (a local Spark), ``benchmarks.airflow_skip`` and
``benchmarks.airflow_match`` (a local Airflow; the latter with Spark), and
``benchmarks.rest_load`` (Airflow's api-server on a PostgreSQL store, which
needs ``CURSOROPS_TEST_PG_URL``), ``benchmarks.protocol`` (against
pulsar-lite, when installed) and ``benchmarks.failover`` (two brokers on one
PostgreSQL, ``CURSOROPS_TEST_PG_URL``). The options (``--quick``, ``--runs``,
``--write/--no-write``, ``--dir``), which every benchmark takes, are passed on.
The exit status is non-zero when any benchmark failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

CORE_BENCHMARKS = (
    "cursor_acks",
    "read_path",
    "produce",
    "skip_ids",
    "skip_head",
    "undo_skip",
    "redrive",
    "radar",
    "cli_latency",
    "segment_encode",
)
OPTIONAL_BENCHMARKS = (
    "spark_backlog",
    "airflow_skip",
    "airflow_match",
    "rest_load",
    "protocol",
    "failover",
)
NEEDED_ENV = {"rest_load": "CURSOROPS_TEST_PG_URL", "failover": "CURSOROPS_TEST_PG_URL"}
"""An environment variable a benchmark needs set, or it is skipped."""

_REPO = Path(__file__).resolve().parent.parent


def _missing(name: str) -> str | None:
    """Why ``name`` cannot run here, or None."""
    if importlib.util.find_spec(f"benchmarks.{name}") is None:
        return f"benchmarks/{name}.py is not present"
    variable = NEEDED_ENV.get(name)
    if variable and not os.environ.get(variable):
        return f"{variable} is not set"
    return None


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
        missing = _missing(name)
        if missing is None:
            plan.append(name)
        else:
            print(f"== {name}: skipped, {missing}", flush=True)

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

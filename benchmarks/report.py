"""Shared plumbing of the benchmarks: options, timing, formatting, and ``docs/benchmarks.md``.

``docs/benchmarks.md`` is written by several benchmarks, possibly at the same
time, each owning one section between its own markers::

    <!-- NAME -->
    ...
    <!-- /NAME -->

:func:`write_section` is the one writer: it replaces only the text between the
markers of the named section (appending the section when it is new), creates
the file with its title and introduction when it is missing, and holds an
exclusive ``flock`` on the file while it reads and rewrites it, so two
benchmarks finishing together do not lose each other's sections. Any
benchmark, ``benchmarks/spark_backlog.py`` included, should write through it.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import fcntl
import os
import pstats
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.machine import Machine, storage

DOCS_PATH = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"

TITLE = "# Benchmarks"
INTRO = """\
Measured figures of cursorops, each section written by its script under
`benchmarks/` (`make bench` runs them all: `python -m benchmarks.run_all`).
Every number comes from a measurement of the run the section describes: times
are medians of the stated number of runs, with the fastest and slowest run in
brackets; ratios compare figures measured side by side in the same run. Each
section names the machine it ran on. A section is replaced only by a new run
of its own script."""

PROFILE_ROWS = 12
"""Rows of each hotspot table."""

MIN_RUNS = 3
"""Figures written to the docs are medians of at least this many runs."""

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_REPO = str(Path(__file__).resolve().parent.parent)


# -- docs/benchmarks.md -----------------------------------------------------------


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name} -->", f"<!-- /{name} -->"


def replace_section(document: str, name: str, markdown: str) -> str:
    """``document`` with the section ``name`` set to ``markdown`` (appended when absent).

    Only the text between ``<!-- name -->`` and ``<!-- /name -->`` changes;
    every other section stays byte for byte.
    """
    if not _NAME.match(name):
        raise ValueError(f"Invalid section name {name!r}: use letters, digits and _ . -")
    start, end = _markers(name)
    body = f"{start}\n{markdown.strip()}\n{end}"
    opening = document.find(start)
    closing = document.find(end, opening + len(start)) if opening >= 0 else -1
    if opening >= 0 and closing >= 0:
        return document[:opening] + body + document[closing + len(end) :]
    if opening >= 0 or document.find(end) >= 0:
        raise ValueError(f"docs section {name!r} has only one of its markers {start} {end}")
    return document.rstrip("\n") + "\n\n" + body + "\n"


def write_section(name: str, markdown: str, path: Path = DOCS_PATH) -> Path:
    """Write one benchmark's section of ``docs/benchmarks.md``; returns the path.

    Creates the file with :data:`TITLE` and :data:`INTRO` when it is missing.
    The file is locked (``flock``) and rewritten in place, so concurrent
    writers of different sections are serialized and none is lost.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    with os.fdopen(descriptor, "r+", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            document = handle.read()
            if not document.strip():
                document = f"{TITLE}\n\n{INTRO}\n"
            updated = replace_section(document, name, markdown)
            handle.seek(0)
            handle.write(updated)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return path


# -- options -----------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    quick: bool
    runs: int
    write: bool
    """Write the section to ``docs/benchmarks.md`` (default: yes, except with ``--quick``)."""
    work_root: str | None
    """Folder for the stores (default: the system's temporary folder)."""


def parse_options(description: str, argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="small smoke sizes; writes no docs unless --write"
    )
    parser.add_argument(
        "--runs", type=int, default=MIN_RUNS, help=f"runs per figure (default {MIN_RUNS})"
    )
    parser.add_argument(
        "--write",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write the section of docs/benchmarks.md (default: yes unless --quick)",
    )
    parser.add_argument("--dir", default=None, help="folder for the stores (default: temp)")
    args = parser.parse_args(argv)
    write = (not args.quick) if args.write is None else bool(args.write)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if write and args.runs < MIN_RUNS:
        parser.error(f"figures written to the docs need --runs >= {MIN_RUNS}")
    return Options(quick=args.quick, runs=args.runs, write=write, work_root=args.dir)


def publish(options: Options, section: str, markdown: str) -> int:
    """Print a benchmark's section, write it to the docs unless told not to; exit code 0."""
    print(markdown)
    if options.write:
        print(f"wrote {write_section(section, markdown)}")
    return 0


@contextmanager
def work_dir(options: Options, prefix: str) -> Iterator[Path]:
    """A fresh folder for one benchmark's stores, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"cursorops-{prefix}-", dir=options.work_root) as d:
        yield Path(d)


# -- timing ------------------------------------------------------------------------


class Stopwatch:
    """``with Stopwatch() as watch: ...`` then ``watch.seconds`` (``time.perf_counter``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


@dataclass(frozen=True)
class Runs:
    """The values one figure took over several runs."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Runs:
        if not values:
            raise ValueError("no runs")
        return cls(tuple(values))

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def cell(self, unit: str = "", digits: int = 3) -> str:
        """``"median (low–high) unit"``, the form every table uses."""
        suffix = f" {unit}" if unit else ""
        if len(self.values) == 1:
            return f"{number(self.median, digits)}{suffix}"
        return (
            f"{number(self.median, digits)}{suffix} "
            f"({number(self.low, digits)}–{number(self.high, digits)})"
        )


def rates(count: int, seconds: Runs) -> Runs:
    """Per-second rates of ``count`` items, one per run."""
    return Runs.of([count / s for s in seconds.values])


# -- formatting --------------------------------------------------------------------


def number(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits, thousands separated: 1,234,000 or 0.0123."""
    if value == 0:
        return "0"
    magnitude = len(str(int(abs(value)))) if abs(value) >= 1 else 0
    if magnitude >= digits:
        return f"{round(value, digits - magnitude):,.0f}"
    return f"{value:,.{digits}g}" if abs(value) < 1 else f"{value:,.{digits - magnitude}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def preamble(title: str, module: str, machine: Machine, options: Options, work: Path) -> list[str]:
    """The opening lines every section shares: title, command, date, runs, machine, storage."""
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    size = "smoke sizes (`--quick`)" if options.quick else "full size"
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return [
        f"## {title}",
        "",
        f"`python -m benchmarks.{module}`, {size}, run {when}; medians of {options.runs} runs, "
        "range in brackets.",
        "",
        f"Machine: {machine.line()}. Stores on {storage(work)}. "
        f"Load average (1, 5, 15 min) when the section was written: {load}.",
        "",
    ]


# -- profiles ----------------------------------------------------------------------


@dataclass(frozen=True)
class Hotspot:
    where: str
    """``path:line function``, the path relative to the repository or site-packages."""
    calls: int
    own: float
    """Seconds in the function itself."""
    cumulative: float
    """Seconds in the function and everything it called."""


@dataclass(frozen=True)
class Profile:
    total: float
    """Wall seconds of the profiled run, the base of the shares (``cProfile`` slows the
    code down: compare shares, not seconds)."""
    by_own: list[Hotspot]
    by_cumulative: list[Hotspot]
    """cursorops functions only (``core/``)."""


def _where(key: tuple[str, int, str]) -> str:
    file, line, name = key
    if file == "~":
        return re.sub(r" at 0x[0-9a-f]+", "", name)
    if "site-packages" + os.sep in file:
        file = file.split("site-packages" + os.sep, 1)[1]
    elif file.startswith(_REPO + os.sep):
        file = file[len(_REPO) + 1 :]
    else:
        file = os.path.basename(file)
    return f"{file}:{line} {name}"


def profile(work: Callable[[], object]) -> Profile:
    """Run ``work`` once under ``cProfile``; its top functions by own and cumulative time."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    try:
        work()
    finally:
        profiler.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler)
    raw = stats.stats  # type: ignore[attr-defined]
    rows = [
        Hotspot(_where(key), int(calls), own, cumulative)
        for key, (_, calls, own, cumulative, _) in raw.items()
    ]
    by_own = sorted(rows, key=lambda h: h.own, reverse=True)[:PROFILE_ROWS]
    ours = [h for h in rows if h.where.startswith("core/")]
    by_cumulative = sorted(ours, key=lambda h: h.cumulative, reverse=True)[:PROFILE_ROWS]
    return Profile(wall, by_own, by_cumulative)


def profile_markdown(result: Profile, what: str) -> list[str]:
    """Two hotspot tables (own time, then cursorops functions by cumulative time)."""

    def rows(spots: list[Hotspot]) -> list[list[str]]:
        return [
            [
                f"`{h.where}`",
                f"{h.calls:,}",
                f"{h.own:.2f}",
                f"{100 * h.own / result.total:.1f}%",
                f"{h.cumulative:.2f}",
                f"{100 * h.cumulative / result.total:.1f}%",
            ]
            for h in spots
        ]

    headers = ["function", "calls", "own s", "own share", "cumulative s", "cumulative share"]
    return [
        f"Profile of {what} under `cProfile` ({result.total:.2f} s wall time under the "
        "profiler, which slows calls down: read the shares of that time). Functions by own time:",
        "",
        table(headers, rows(result.by_own)),
        "",
        "cursorops functions by cumulative time (including what they call):",
        "",
        table(headers, rows(result.by_cumulative)),
        "",
    ]

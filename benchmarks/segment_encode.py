"""Encoding the segment of one message: with every column, and as the ledger store writes it.

An unbatched synchronous send over the binary protocol commits one entry of one
message: one Parquet segment encoded per send. The segment's table is built the
way the producer's path builds it (``cursorops.core.services.producer.entry_columns`` of an entry
with the client's ``MessageMetadata`` bytes, a 64-byte payload, no key, properties or
delay), then encoded in memory with the store's settings (no file, no fsync), three
ways:

- ``first``: without any of ``LATER_COLUMNS``, the segment's columns before they
  existed (the reference);
- ``every``: every column of ``MESSAGE_SCHEMA``, the later ones null but
  ``metadata`` (how segments were written before they left out their null columns);
- ``now``: as the store writes it, without the later columns null on every row
  (chosen by ``cursorops.core.store.ledger.segment_tables`` as it assembles the segment).

Each run encodes each ``encodes`` times, the three kinds taking turns, and takes
the median encode; the figure is the median over the runs. The assembly itself
(``segment_tables``, both tables and the choice) is timed the same way.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import machine, report
from benchmarks.report import Options, Runs
from cursorops.core.services.producer import Entry, entry_columns
from cursorops.core.store.ledger import (
    LATER_COLUMNS,
    SEGMENT_WRITE_OPTIONS,
    segment_tables,
)

SECTION = "segment_encode"
METADATA = bytes(range(48))
"""Stands for a client's ``MessageMetadata`` (producer name, sequence id, publish time)."""


KINDS = ("first", "every", "now")


@dataclass(frozen=True)
class Kind:
    label: str
    columns: int
    bytes: int
    seconds: Runs


def _message_columns() -> dict[str, pa.Array]:
    """The message columns of one unbatched message, as an unbatched protocol send makes them."""
    entry = Entry(
        False,
        "standalone-0-1",
        1_700_000_000_000,
        [b"%064d" % 7],
        [7],
        [None],
        [[]],
        [None],
        [None],
        [None],
        metadata=METADATA,
    )
    return entry_columns([entry])[1]


def _assemble(columns: dict[str, pa.Array]) -> tuple[pa.Table, pa.Table]:
    return segment_tables(-1, 12, 345, np.ones(1, np.int64), columns)


def _encoders() -> dict[str, Callable[[], int]]:
    table, written = _assemble(_message_columns())
    first = table.drop_columns(list(LATER_COLUMNS))

    def encode(segment: pa.Table) -> int:
        sink = pa.BufferOutputStream()
        pq.write_table(segment, sink, **SEGMENT_WRITE_OPTIONS)
        return len(sink.getvalue())

    return {
        "first": lambda: encode(first),
        "every": lambda: encode(table),
        "now": lambda: encode(written),
    }


LABELS = {
    "first": "before the later columns existed (the reference)",
    "every": "every column, the later ones null but `metadata` (as written before)",
    "now": "without the later columns null on every row (as written now)",
}


def _median_seconds(encode: Callable[[], int], encodes: int) -> float:
    times = []
    for _ in range(encodes):
        start = time.perf_counter()
        encode()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(options: Options) -> tuple[dict[str, Kind], Runs]:
    columns = _message_columns()
    table, written = _assemble(columns)
    encoders = _encoders()
    encodes = 100 if options.quick else 1_000
    for encode in encoders.values():
        _median_seconds(encode, 50)  # warm up: imports, allocator
    seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for run in range(options.runs):
        # Taking turns at going first, so none always runs on a warmer machine.
        order = KINDS[run % len(KINDS) :] + KINDS[: run % len(KINDS)]
        for kind in order:
            seconds[kind].append(_median_seconds(encoders[kind], encodes))
        shown = ", ".join(f"{kind} {seconds[kind][-1] * 1e3:.3f} ms" for kind in KINDS)
        print(f"  run {run}: {shown}", flush=True)
    assembly = Runs.of([_median_seconds(lambda: _assemble(columns), encodes) for _ in KINDS])
    counts = {
        "first": table.num_columns - len(LATER_COLUMNS),
        "every": table.num_columns,
        "now": written.num_columns,
    }
    kinds = {
        kind: Kind(LABELS[kind], counts[kind], encoders[kind](), Runs.of(seconds[kind]))
        for kind in KINDS
    }
    return kinds, assembly


def render(host: machine.Machine, options: Options, result: dict[str, Kind], assembly: Runs) -> str:
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    size = "smoke sizes (`--quick`)" if options.quick else "full size"
    encodes = 100 if options.quick else 1_000
    first, every, now = (result[kind].seconds.median for kind in KINDS)
    lines = [
        "## Encoding a one-message segment",
        "",
        f"`python -m benchmarks.{SECTION}`, {size}, run {when}; medians of {options.runs} "
        "runs, range in brackets.",
        "",
        f"Machine: {host.line()}; {os.cpu_count()} CPUs (nproc). In memory, no store. "
        f"Load average (1, 5, 15 min) when the section was written: {load}.",
        "",
        "The segment an unbatched synchronous send commits: one message (64-byte payload, the "
        "client's 48-byte `MessageMetadata`, no key, properties or delay), built as the "
        "producer's path builds it and encoded in memory with the store's Parquet settings "
        f"(no file, no fsync). Each run is the median of {encodes:,} encodes of each kind, "
        "the kinds taking turns at going first.",
        "",
        report.table(
            ["segment", "columns", "bytes", "encode"],
            [
                [
                    kind.label,
                    str(kind.columns),
                    f"{kind.bytes:,}",
                    Runs.of([v * 1e3 for v in kind.seconds.values]).cell("ms"),
                ]
                for kind in result.values()
            ],
        ),
        "",
        f"Ratios of medians: every column / now {every / now:.2f}x; now / before the later "
        f"columns {now / first:.2f}x. Assembling the segment's tables (every column, and "
        "the file's, chosen from the arrays) before encoding: "
        f"{Runs.of([v * 1e6 for v in assembly.values]).cell('µs')}, {len(KINDS)} runs.",
        "",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Encoding the Parquet segment of one message.", argv)
    host = machine.describe()
    result, assembly = measure(options)
    return report.publish(options, SECTION, render(host, options, result, assembly))


if __name__ == "__main__":
    sys.exit(main())

"""Acknowledgements on one cursor: in memory, persisted, recovered, durable.

(a) Random individual acknowledgements of distinct entries on one cursor over
    40 ledgers x 50,000 entries (1,000,000 of the 2,000,000 entries), through
    ``CursorState.acknowledge`` in calls of 1, 100 and 1,000 ids; then the
    state is persisted as a cursor snapshot on a SQLite ``MetadataStore`` (the
    state appended as one journal delta, then folded into the snapshot as the
    dispatcher folds a long journal) and recovered by a new ``MetadataStore``
    object that reads and replays it, checked equal.
(b) 10,000,000 isolated holes: every other entry of 200 ledgers x 100,000
    entries acknowledged (calls of 50,000 ids, one ledger's worth), persisted,
    recovered by a new store object, checked equal; bytes per hole.
(c) Durable acknowledgements the way a consumer's are written: each call one
    subscription transaction (the subscription's row lock, the delta appended,
    committed), in calls of 1 and of 1,000 ids.

Building the ``AckTarget`` lists is left out of every timing: a client hands
the broker message ids it already has.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Options, Profile, Runs, Stopwatch
from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.metadata import MetadataStore

SECTION = "cursor_acks"
TOPIC = "persistent://bench/acks/cursor"
SUBSCRIPTION = "bench"

AIM_ACKS_PER_S = 1_000_000
AIM_SECONDS_EACH_WAY = 5.0
AIM_BYTES_PER_HOLE = 3.0


@dataclass(frozen=True)
class Sizes:
    ledgers_a: int
    entries_a: int
    acks_a: int
    call_sizes: tuple[int, ...]
    ledgers_b: int
    entries_b: int
    build_call_b: int
    durable_layout: tuple[int, int]
    durable_single_calls: int
    durable_batch_calls: int
    durable_batch_size: int


FULL = Sizes(
    ledgers_a=40,
    entries_a=50_000,
    acks_a=1_000_000,
    call_sizes=(1, 100, 1_000),
    ledgers_b=200,
    entries_b=100_000,
    build_call_b=50_000,
    durable_layout=(40, 50_000),
    durable_single_calls=3_000,
    durable_batch_calls=1_000,
    durable_batch_size=1_000,
)

QUICK = Sizes(
    ledgers_a=4,
    entries_a=10_000,
    acks_a=20_000,
    call_sizes=(1, 100, 1_000),
    ledgers_b=10,
    entries_b=10_000,
    build_call_b=5_000,
    durable_layout=(4, 10_000),
    durable_single_calls=100,
    durable_batch_calls=20,
    durable_batch_size=1_000,
)


def _layout(ledgers: int, entries: int) -> LedgerLayout:
    # Ledger ids start at 1, as the metadata store allocates them.
    return LedgerLayout.of((ledger_id, entries) for ledger_id in range(1, ledgers + 1))


def _random_targets(layout: LedgerLayout, count: int, seed: int) -> list[AckTarget]:
    """``count`` distinct entries of ``layout`` in random order (every ledger equally long)."""
    per_ledger = layout.entries[0]
    picks = random.Random(seed).sample(range(layout.total_entries), count)
    first = layout.ledger_ids[0]
    return [AckTarget(Position(first + p // per_ledger, p % per_ledger)) for p in picks]


def _ids(count: int) -> str:
    return f"{count:,} id" if count == 1 else f"{count:,} ids"


def _chunks(targets: list[AckTarget], size: int) -> list[list[AckTarget]]:
    return [targets[i : i + size] for i in range(0, len(targets), size)]


class CursorDb:
    """A SQLite metadata store holding one topic and one subscription's cursor."""

    def __init__(self, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.url = f"sqlite:///{folder / f'{name}.db'}"
        self.store = MetadataStore(self.url)
        self.store.create_tenant("bench")
        self.store.create_namespace("bench/acks")
        topic = self.store.create_topic(TOPIC, 0)
        self.store.create_subscription(
            topic.name,
            SUBSCRIPTION,
            SubscriptionType.SHARED,
            {},
            {topic.name: cursor_codec.encode(CursorState())},
        )

    def state(self, layout: LedgerLayout) -> CursorState:
        return _stored(self.store, layout)


def _stored(store: MetadataStore, layout: LedgerLayout) -> CursorState:
    return replay(store.load_cursor(TOPIC, SUBSCRIPTION), layout)


def _fold(store: MetadataStore, layout: LedgerLayout) -> None:
    """The journal folded into a snapshot, as the dispatcher folds it: read, replay, encode,
    store the snapshot and drop the deltas it covers."""
    record = store.load_cursor(TOPIC, SUBSCRIPTION)
    state = replay(record, layout)
    store.compact_cursor(TOPIC, SUBSCRIPTION, cursor_codec.encode(state), record.version)


@dataclass(frozen=True)
class Persisted:
    append: Runs
    compact: Runs
    total: Runs
    recover: Runs
    snapshot_bytes: int
    journal_bytes: int


def persist_and_recover(
    state: CursorState, layout: LedgerLayout, work: Path, label: str, runs: int
) -> Persisted:
    """Persist ``state`` as a snapshot, restart, recover; assert the recovered state equals.

    Persist = the state appended as one journal delta (encode + one
    transaction) then folded (load, replay, encode, write the snapshot, drop the
    delta). Recover = a new ``MetadataStore`` object, the cursor read and replayed.
    Each run uses a fresh SQLite file.
    """
    appends: list[float] = []
    compacts: list[float] = []
    recovers: list[float] = []
    sizes: set[tuple[int, int]] = set()
    for run in range(runs):
        db = CursorDb(work / f"{label}-{run}", label)
        with Stopwatch() as append:
            db.store.append_cursor_delta(TOPIC, SUBSCRIPTION, cursor_codec.encode(state))
        with Stopwatch() as compact:
            _fold(db.store, layout)
        sizes.add(db.store.cursor_sizes(TOPIC, SUBSCRIPTION))
        db.store.close()
        with Stopwatch() as recover:
            restarted = MetadataStore(db.url)
            recovered = _stored(restarted, layout)
        assert recovered == state, f"{label}: recovered state differs"
        restarted.close()
        appends.append(append.seconds)
        compacts.append(compact.seconds)
        recovers.append(recover.seconds)
    assert len(sizes) == 1, f"{label}: snapshot size differs between runs: {sizes}"
    ((snapshot_bytes, journal_bytes),) = sizes
    return Persisted(
        append=Runs.of(appends),
        compact=Runs.of(compacts),
        total=Runs.of([a + c for a, c in zip(appends, compacts, strict=True)]),
        recover=Runs.of(recovers),
        snapshot_bytes=snapshot_bytes,
        journal_bytes=journal_bytes,
    )


# -- (a) random acknowledgements in memory ------------------------------------------


@dataclass(frozen=True)
class InMemory:
    layout: LedgerLayout
    acks: int
    seconds: dict[int, Runs]
    """Per call size (ids per call), the seconds for all ``acks``."""
    state: CursorState
    persisted: Persisted


def bench_in_memory(sizes: Sizes, options: Options, work: Path) -> InMemory:
    layout = _layout(sizes.ledgers_a, sizes.entries_a)
    targets = _random_targets(layout, sizes.acks_a, seed=1)
    seconds: dict[int, list[float]] = {size: [] for size in sizes.call_sizes}
    final: CursorState | None = None
    for _ in range(options.runs):
        # Call sizes interleaved within each run, so that drifts hit all alike.
        for size in sizes.call_sizes:
            calls = _chunks(targets, size)
            state = CursorState()
            with Stopwatch() as watch:
                for call in calls:
                    state.acknowledge(call, layout)
            seconds[size].append(watch.seconds)
            if final is None:
                final = state
            else:
                assert state == final, "the same acknowledgements must give the same state"
            print(f"  (a) calls of {size:>5} ids: {watch.seconds:.3f} s", flush=True)
    assert final is not None
    persisted = persist_and_recover(final, layout, work, "random", options.runs)
    return InMemory(
        layout,
        sizes.acks_a,
        {size: Runs.of(values) for size, values in seconds.items()},
        final,
        persisted,
    )


# -- (b) ten million isolated holes --------------------------------------------------


@dataclass(frozen=True)
class Holes:
    layout: LedgerLayout
    acked: int
    ranges: int
    build: Runs
    persisted: Persisted


def bench_holes(sizes: Sizes, options: Options, work: Path) -> Holes:
    layout = _layout(sizes.ledgers_b, sizes.entries_b)
    builds: list[float] = []
    built: CursorState | None = None
    for _ in range(options.runs):
        state = CursorState()
        elapsed = 0.0
        for ledger_id in layout.ledger_ids:
            odd = range(1, sizes.entries_b, 2)
            for start in range(0, len(odd), sizes.build_call_b):
                call = [
                    AckTarget(Position(ledger_id, entry_id))
                    for entry_id in odd[start : start + sizes.build_call_b]
                ]
                with Stopwatch() as watch:
                    state.acknowledge(call, layout)
                elapsed += watch.seconds
        builds.append(elapsed)
        print(f"  (b) build: {elapsed:.3f} s", flush=True)
        built = state if built is None else built
        assert state == built
    assert built is not None
    acked = len(built.individually_deleted)
    ranges = built.individually_deleted.range_count()
    expected = sizes.ledgers_b * (sizes.entries_b // 2)
    assert acked == ranges == expected, (acked, ranges, expected)
    persisted = persist_and_recover(built, layout, work, "holes", options.runs)
    return Holes(layout, acked, ranges, Runs.of(builds), persisted)


# -- (c) durable acknowledgements ---------------------------------------------------


@dataclass(frozen=True)
class Durable:
    calls: dict[int, int]
    """Per call size, the number of calls each run made."""
    seconds: dict[int, Runs]


def bench_durable(sizes: Sizes, options: Options, work: Path) -> Durable:
    layout = _layout(*sizes.durable_layout)
    plan = {
        1: sizes.durable_single_calls,
        sizes.durable_batch_size: sizes.durable_batch_calls,
    }
    seconds: dict[int, list[float]] = {size: [] for size in plan}
    for run in range(options.runs):
        for size, calls in plan.items():
            targets = _random_targets(layout, size * calls, seed=100 + run)
            chunks = _chunks(targets, size)
            db = CursorDb(work / f"durable-{size}-{run}", "durable")
            with Stopwatch() as watch:
                _acknowledge_durably(db.store, chunks)
            expected = CursorState()
            expected.acknowledge(targets, layout)
            assert db.state(layout) == expected
            db.store.close()
            seconds[size].append(watch.seconds)
            print(f"  (c) {calls} durable calls of {size} ids: {watch.seconds:.3f} s", flush=True)
    return Durable(plan, {size: Runs.of(values) for size, values in seconds.items()})


# -- profiles of the misses ---------------------------------------------------------


PROFILED_IN_MEMORY_ACKS = 200_000
PROFILED_DURABLE_ACKS = {1: 500, 1_000: 200_000}
"""Per call size, the acknowledgements of one profiled durable pass."""


def _acknowledge_all(calls: list[list[AckTarget]], layout: LedgerLayout) -> None:
    state = CursorState()
    for call in calls:
        state.acknowledge(call, layout)


def _acknowledge_durably(store: MetadataStore, chunks: list[list[AckTarget]]) -> None:
    """Each chunk as a consumer's acknowledgement is written: its delta encoded and
    appended in a subscription transaction of its own (``Dispatcher.acknowledge``'s)."""
    for chunk in chunks:
        delta = cursor_codec.encode(CursorState.ack_delta(chunk))
        with store.subscription_transaction(TOPIC, SUBSCRIPTION, 0) as txn:
            txn.append_cursor_delta(TOPIC, delta, ticket=Ticket.delivered_to("bench"))


def profile_misses(
    sizes: Sizes, work: Path, in_memory: InMemory, holes: Holes, durable: Durable
) -> list[tuple[str, Profile]]:
    """One ``cProfile`` pass (smaller than the measured ones) of each figure that missed its aim."""
    profiles: list[tuple[str, Profile]] = []
    layout = in_memory.layout
    for size, runs in in_memory.seconds.items():
        if in_memory.acks / runs.median >= AIM_ACKS_PER_S:
            continue
        count = min(PROFILED_IN_MEMORY_ACKS, in_memory.acks)
        calls = _chunks(_random_targets(layout, count, seed=1), size)
        what = f"{count:,} in-memory acknowledgements in calls of {_ids(size)}"
        print(f"profiling {what}", flush=True)
        profiles.append((what, report.profile(partial(_acknowledge_all, calls, layout))))
    durable_layout = _layout(*sizes.durable_layout)
    for size, runs in durable.seconds.items():
        if size * durable.calls[size] / runs.median >= AIM_ACKS_PER_S:
            continue
        count = min(PROFILED_DURABLE_ACKS.get(size, size * 100), size * durable.calls[size])
        chunks = _chunks(_random_targets(durable_layout, count, seed=99), size)
        db = CursorDb(work / f"profile-durable-{size}", "durable")
        what = f"{len(chunks):,} durable calls of {_ids(size)}"
        print(f"profiling {what}", flush=True)
        profiles.append((what, report.profile(partial(_acknowledge_durably, db.store, chunks))))
        db.store.close()
    persisted = holes.persisted
    if max(persisted.total.median, persisted.recover.median) >= AIM_SECONDS_EACH_WAY:
        built = CursorState()
        for ledger_id in holes.layout.ledger_ids:
            built.individually_deleted.add_many(ledger_id, range(1, holes.layout.entries[0], 2))
        what = f"persisting and recovering {holes.ranges:,} holes"
        print(f"profiling {what}", flush=True)
        profiles.append(
            (
                what,
                report.profile(
                    lambda: persist_and_recover(built, holes.layout, work, "profile-holes", 1)
                ),
            )
        )
    return profiles


# -- report -------------------------------------------------------------------------


def _persist_rows(persisted: Persisted) -> list[list[str]]:
    return [
        ["append the state as one journal delta", persisted.append.cell("s")],
        ["fold into the snapshot", persisted.compact.cell("s")],
        ["persist, total", persisted.total.cell("s")],
        ["recover: new `MetadataStore`, cursor read and replayed", persisted.recover.cell("s")],
    ]


def render(
    host: machine.Machine,
    sizes: Sizes,
    options: Options,
    work: Path,
    in_memory: InMemory,
    holes: Holes,
    durable: Durable,
    profiles: list[tuple[str, Profile]],
) -> str:
    lines = report.preamble("Cursor acknowledgements", "cursor_acks", host, options, work)
    a_rates = {size: report.rates(in_memory.acks, runs) for size, runs in in_memory.seconds.items()}
    layout_a = f"{len(in_memory.layout.ledger_ids)} ledgers x {in_memory.layout.entries[0]:,}"
    lines += [
        f"### (a) {in_memory.acks:,} random individual acknowledgements, in memory",
        "",
        f"Distinct random entries of {layout_a} entries, on one `CursorState` "
        "(`acknowledge`, with mark-delete auto-advance), all acknowledgements per run.",
        "",
        report.table(
            ["ids per call", "seconds", "acks/s", f"vs {AIM_ACKS_PER_S:,}/s aim"],
            [
                [
                    f"{size:,}",
                    in_memory.seconds[size].cell("s"),
                    a_rates[size].cell(),
                    report.verdict(a_rates[size].median >= AIM_ACKS_PER_S),
                ]
                for size in sizes.call_sizes
            ],
        ),
        "",
    ]
    smallest, largest = min(sizes.call_sizes), max(sizes.call_sizes)
    lines += [
        f"Calls of {largest:,} ids run "
        f"{a_rates[largest].median / a_rates[smallest].median:.1f}x the rate of calls of "
        f"{smallest} id (medians, same runs). Pulsar's client groups acknowledgements "
        "too (`acknowledgementGroupTime`), so the grouped figures are the comparable ones "
        "for a consumer; an admin skipping one id at a time sees the first row.",
        "",
        "Persisted as a snapshot on SQLite and recovered (equality of the recovered "
        "state asserted in every run):",
        "",
        report.table(["step", "seconds"], _persist_rows(in_memory.persisted)),
        "",
        f"Snapshot: {in_memory.persisted.snapshot_bytes:,} bytes "
        f"({in_memory.state.individually_deleted.range_count():,} individually deleted ranges, "
        f"mark-delete {in_memory.state.mark_delete}; journal after compaction "
        f"{in_memory.persisted.journal_bytes:,} bytes, from `cursor_sizes`).",
        "",
    ]
    per_hole = holes.persisted.snapshot_bytes / holes.ranges
    layout_b = f"{len(holes.layout.ledger_ids)} ledgers x {holes.layout.entries[0]:,} entries"
    build_rates = report.rates(holes.acked, holes.build)
    each_way = max(holes.persisted.total.median, holes.persisted.recover.median)
    lines += [
        f"### (b) {holes.ranges:,} isolated holes",
        "",
        f"Every other entry of {layout_b} acknowledged, "
        f"in calls of {sizes.build_call_b:,} ids: {holes.acked:,} acknowledged entries, "
        f"{holes.ranges:,} individually deleted ranges, each between two unacknowledged "
        "entries. Recovery runs on a new `MetadataStore` object over the same SQLite file "
        "and asserts the recovered state equal to the built one.",
        "",
        report.table(
            ["step", "seconds"],
            [["build (`CursorState.acknowledge`)", holes.build.cell("s")]]
            + _persist_rows(holes.persisted),
        ),
        "",
        f"Build rate: {build_rates.cell('acks/s')}. Snapshot: "
        f"{holes.persisted.snapshot_bytes:,} bytes = {per_hole:.3f} bytes per hole "
        f"(journal after compaction {holes.persisted.journal_bytes:,} bytes).",
        "",
    ]
    d_rates = {
        size: report.rates(size * durable.calls[size], runs)
        for size, runs in durable.seconds.items()
    }
    durable_rows = []
    for size, runs in durable.seconds.items():
        calls = durable.calls[size]
        per_call_ms = Runs.of([1000 * s / calls for s in runs.values])
        durable_rows.append(
            [
                f"{size:,}",
                f"{calls:,}",
                runs.cell("s"),
                per_call_ms.cell("ms"),
                d_rates[size].cell(),
                report.verdict(d_rates[size].median >= AIM_ACKS_PER_S),
            ]
        )
    d_small, d_large = min(durable.seconds), max(durable.seconds)
    lines += [
        "### (c) Durable acknowledgements",
        "",
        "Written as a consumer's acknowledgement is: per call, the delta encoded and "
        "appended in a subscription transaction of its own (the subscription's row lock, "
        "then the cursor's; SQLite in WAL mode, durable when it returns), random distinct "
        f"entries of {sizes.durable_layout[0]} ledgers x {sizes.durable_layout[1]:,} "
        "entries. The dispatcher folds the journal when it next reads the cursor, which "
        "is not part of these figures.",
        "",
        report.table(
            ["ids per call", "calls", "seconds", "per call", "acks/s", "vs aim"],
            durable_rows,
        ),
        "",
        f"Calls of {d_large:,} ids: {d_rates[d_large].median / d_rates[d_small].median:.0f}x "
        f"the acknowledgements per second of calls of {d_small} id (medians, same runs).",
        "",
        "### Against the aims",
        "",
        report.table(
            ["aim", "measured (median)", ""],
            [
                [
                    f">= {AIM_ACKS_PER_S:,} acks/s in memory",
                    ", ".join(
                        f"{report.number(a_rates[s].median)}/s in calls of {s:,}"
                        for s in sizes.call_sizes
                    ),
                    ", ".join(
                        f"{s:,}: {report.verdict(a_rates[s].median >= AIM_ACKS_PER_S)}"
                        for s in sizes.call_sizes
                    ),
                ],
                [
                    f">= {AIM_ACKS_PER_S:,} acks/s durable",
                    ", ".join(
                        f"{report.number(d_rates[s].median)}/s in calls of {s:,}"
                        for s in durable.seconds
                    ),
                    ", ".join(
                        f"{s:,}: {report.verdict(d_rates[s].median >= AIM_ACKS_PER_S)}"
                        for s in durable.seconds
                    ),
                ],
                [
                    f"< {AIM_SECONDS_EACH_WAY:g} s each way, {holes.ranges:,} holes",
                    f"persist {report.number(holes.persisted.total.median)} s, "
                    f"recover {report.number(holes.persisted.recover.median)} s",
                    report.verdict(each_way < AIM_SECONDS_EACH_WAY),
                ],
                [
                    f"< {AIM_BYTES_PER_HOLE:g} bytes per hole",
                    f"{per_hole:.3f} bytes per hole",
                    report.verdict(per_hole < AIM_BYTES_PER_HOLE),
                ],
            ],
        ),
        "",
    ]
    if profiles:
        lines += ["### Profiles of the misses", ""]
        for what, result in profiles:
            lines += report.profile_markdown(result, what)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Acknowledgements on one cursor.", argv)
    host = machine.describe()
    sizes = QUICK if options.quick else FULL
    with report.work_dir(options, "acks") as work:
        print("(a) random acknowledgements in memory", flush=True)
        in_memory = bench_in_memory(sizes, options, work)
        print("(b) isolated holes", flush=True)
        holes = bench_holes(sizes, options, work)
        print("(c) durable acknowledgements", flush=True)
        durable = bench_durable(sizes, options, work)
        profiles = profile_misses(sizes, work, in_memory, holes, durable)
        markdown = render(host, sizes, options, work, in_memory, holes, durable, profiles)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

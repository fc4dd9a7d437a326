"""PIP-423 skip by message id: 100,000 and 1,000,000 scattered ids over 8 partitions.

Two sizes, each its own topic of 8 partitions written with ``Broker.producing.produce``
in batches of 10 (not timed): 1x is 2,000,000 messages (200,000 entries) and
100,000 ids; 10x is 20,000,000 messages (2,000,000 entries) and 1,000,000 ids.
The ids are half the entries, chosen at random chunk by chunk as the topic is
written (so that 20,000,000 ids are never held at once): half of them whole
entries, half one batch index of another entry; then shuffled.

Timed, each on a fresh Shared subscription at the earliest position, the two
alternating which goes first from run to run:

- ``gating.skip.skip_messages``: validated, acknowledged, durable and audited
  when it returns;
- the same split into ``gating.skip.plan_skip`` (validation and routing, nothing
  written) and ``gating.skip.apply_skip`` (acknowledge and audit).

After every run the subscription's cursors are reloaded and each skipped id
is checked acknowledged. The first ``skip_messages`` of the process is also
reported on its own: it alone reads every segment's entry index, which the
ledger store keeps for later calls. When ``skip_messages`` misses its aim at 1x, one more
skip runs under ``cProfile`` and its hotspots are reported.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Options, Profile, Runs, Stopwatch
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skip_slice
from cursorops.core.store.cursor_state import replay

SECTION = "skip_ids"
ROLE = "admin"
TOPIC = "persistent://bench/skip/topic"


@dataclass(frozen=True)
class Sizes:
    scale: int
    partitions: int
    messages: int
    batch_size: int
    ids: int
    """Ids to skip: half whole entries, half batch indexes of other entries."""
    produce_chunk: int
    aim_seconds: float


FULL = (
    Sizes(1, 8, 2_000_000, 10, 100_000, 200_000, 1.0),
    Sizes(10, 8, 20_000_000, 10, 1_000_000, 200_000, 10.0),
)
QUICK = (
    Sizes(1, 8, 40_000, 10, 2_000, 20_000, 1.0),
    Sizes(10, 8, 400_000, 10, 20_000, 20_000, 10.0),
)


def build_topic(broker: Broker, sizes: Sizes, seed: int) -> tuple[list[MessageId], int]:
    """Write the topic; return the ids to skip and the number of entries written.

    Each produced chunk gives its share of ids (``ids`` per ``messages /
    batch_size`` entries), so only one chunk's ids are held at a time.
    """
    broker.admin.create_tenant(ROLE, "bench")
    broker.admin.create_namespace(ROLE, "bench/skip")
    broker.admin.create_topic(ROLE, TOPIC, partitions=sizes.partitions)
    rng = random.Random(seed)
    share = sizes.ids / (sizes.messages / sizes.batch_size)
    chosen: list[MessageId] = []
    entries_written = 0
    for start in range(0, sizes.messages, sizes.produce_chunk):
        stop = min(start + sizes.produce_chunk, sizes.messages)
        payloads = [b"%016d" % i for i in range(start, stop)]
        written = broker.producing.produce_columns(
            ROLE, TOPIC, payloads, batch_size=sizes.batch_size
        )
        entries = dict(
            zip(
                zip(
                    written.partition.tolist(),
                    written.ledger_id.tolist(),
                    written.entry_id.tolist(),
                    strict=True,
                ),
                written.batch_size.tolist(),
                strict=True,
            )
        )
        entries_written += len(entries)
        keys = rng.sample(sorted(entries), round(len(entries) * share))
        whole = len(keys) // 2
        chosen += [MessageId(ledger, entry, partition) for partition, ledger, entry in keys[:whole]]
        for partition, ledger, entry in keys[whole:]:
            size = entries[(partition, ledger, entry)]
            chosen.append(MessageId(ledger, entry, partition, rng.randrange(size), size))
    rng.shuffle(chosen)
    return chosen, entries_written


def check_skipped(broker: Broker, subscription: str, chosen: list[MessageId]) -> None:
    """Every chosen id is acknowledged in the subscription's reloaded cursors."""
    info = broker.metadata.get_topic(TOPIC)
    names = info.partition_names()
    for index, name in enumerate(names):
        layout = LedgerLayout.of(
            (ledger.ledger_id, ledger.entries) for ledger in broker.metadata.ledgers(name)
        )
        state = replay(broker.metadata.load_cursor(name, subscription), layout)
        mine = [m for m in chosen if m.partition == index]
        assert mine and all(state.is_acked(m.position, m.batch_index) for m in mine), name


@dataclass(frozen=True)
class Results:
    sizes: Sizes
    ids: int
    entries: int
    per_partition: dict[str, int]
    skip: Runs
    plan: Runs
    apply: Runs
    skip_cpu: Runs
    """CPU seconds of this process in ``skip_messages`` (the machine is shared: wall time
    includes waiting for a core)."""
    split_cpu: Runs
    cold: tuple[float, float]
    """Wall and CPU seconds of the process's first ``skip_messages``: the only call that
    reads every segment's entry index (the ledger store keeps them for later calls)."""
    profiles: list[tuple[str, Profile]]

    @property
    def split(self) -> Runs:
        return Runs.of([p + a for p, a in zip(self.plan.values, self.apply.values, strict=True)])


def measure(sizes: Sizes, options: Options, work: Path) -> Results:
    config = Config.from_home(work / f"home-{sizes.scale}x")
    with Broker(config) as broker:
        print(
            f"{sizes.scale}x: producing {sizes.messages:,} messages over {sizes.partitions} "
            "partitions",
            flush=True,
        )
        chosen, entries = build_topic(broker, sizes, seed=11)
        total = len(chosen)
        skips: list[float] = []
        plans: list[float] = []
        applies: list[float] = []
        skip_cpus: list[float] = []
        split_cpus: list[float] = []
        per_partition: dict[str, int] = {}
        for run in range(options.runs):
            # Which of the two goes first alternates, so that neither always runs warmer.
            order = ("whole", "split") if run % 2 == 0 else ("split", "whole")
            for kind in order:
                name = f"{kind}-{run}"
                broker.admin.create_subscription(
                    ROLE, TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
                )
                cpu = time.process_time()
                if kind == "whole":
                    with Stopwatch() as skip:
                        outcome = skip_slice.skip_messages(broker.gated, ROLE, TOPIC, name, chosen)
                    skip_cpus.append(time.process_time() - cpu)
                    per_partition = dict(outcome.per_partition)
                else:
                    with Stopwatch() as plan:
                        planned = skip_slice.plan_skip(broker.gated, ROLE, TOPIC, name, chosen)
                    with Stopwatch() as apply:
                        outcome = skip_slice.apply_skip(broker.gated, ROLE, planned)
                    split_cpus.append(time.process_time() - cpu)
                assert len(outcome.skipped) == total and not outcome.already_acknowledged
                check_skipped(broker, name, chosen)
            skips.append(skip.seconds)
            plans.append(plan.seconds)
            applies.append(apply.seconds)
            print(
                f"  {sizes.scale}x run {run}: skip_messages {skip.seconds:.3f} s; "
                f"plan {plan.seconds:.3f} s + apply {apply.seconds:.3f} s",
                flush=True,
            )
        profiles: list[tuple[str, Profile]] = []
        if sizes.scale == 1 and Runs.of(skips).median >= sizes.aim_seconds:
            what = f"one `skip_messages` of {total:,} ids on a fresh subscription"
            print(f"above the aim: profiling {what}", flush=True)
            name = "profiled"
            broker.admin.create_subscription(
                ROLE, TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
            )
            profiles.append(
                (
                    what,
                    report.profile(
                        lambda: skip_slice.skip_messages(broker.gated, ROLE, TOPIC, name, chosen)
                    ),
                )
            )
        return Results(
            sizes,
            total,
            entries,
            per_partition,
            Runs.of(skips),
            Runs.of(plans),
            Runs.of(applies),
            Runs.of(skip_cpus),
            Runs.of(split_cpus),
            # Run 0 goes whole first: its skip is the first call of the process.
            (skips[0], skip_cpus[0]),
            profiles,
        )


def render(host: machine.Machine, options: Options, work: Path, results: Sequence[Results]) -> str:
    lines = report.preamble("Skip by message id (PIP-423)", "skip_ids", host, options, work)
    lines += [
        "Each size is its own topic of 8 partitions written with `Broker.producing.produce` in "
        "batches of 10 (not timed). The ids are half the topic's entries, chosen at random as it "
        "is written: half whole entries, half one batch index of another entry, shuffled. Each "
        "run skips on a fresh Shared subscription, once whole and once split, alternating "
        "which goes first; afterwards every id is checked acknowledged in the reloaded "
        "cursors (with the per-id `CursorState.is_acked`). The machine has 2 cores shared "
        "with other work: read the medians, the load average above, and the CPU seconds "
        "this process spent (wall time also counts the time it waited for a core).",
        "",
    ]
    rows = []
    for r in results:
        size = f"{r.sizes.scale}x: {r.ids:,} ids, {r.sizes.messages:,} messages"
        aim = r.sizes.aim_seconds
        rows += [
            [
                size,
                "`skip_messages` (validated + acknowledged + durable + audited)",
                r.skip.cell("s"),
                r.skip_cpu.cell("s"),
                f"< {aim:g} s: {report.verdict(r.skip.median < aim)}",
            ],
            [size, "`plan_skip` (validate and route, nothing written)", r.plan.cell("s"), "", ""],
            [
                size,
                "`apply_skip` (re-validate, acknowledge, durable, audit)",
                r.apply.cell("s"),
                "",
                "",
            ],
            [
                size,
                "`plan_skip` + `apply_skip`",
                r.split.cell("s"),
                r.split_cpu.cell("s"),
                f"< {aim:g} s: {report.verdict(r.split.median < aim)}",
            ],
        ]
    headers = ["size", "call", "wall seconds", "CPU seconds", "aim (wall)"]
    lines += [report.table(headers, rows), ""]
    for r in results:
        spread = ", ".join(f"{n:,}" for n in r.per_partition.values())
        lines.append(
            f"- {r.sizes.scale}x: {r.entries:,} entries; per partition {spread} ids; "
            f"{report.number(r.ids / r.skip.median)} ids/s through `skip_messages`; planning "
            f"takes {r.plan.median / r.split.median:.0%} of the split total (medians). "
            f"The first `skip_messages` of the process, the one call that reads every "
            f"segment's entry index (the ledger store keeps them for later calls): "
            f"{report.number(r.cold[0])} s wall, {report.number(r.cold[1])} s CPU "
            f"(< {r.sizes.aim_seconds:g} s: {report.verdict(r.cold[0] < r.sizes.aim_seconds)})."
        )
    lines += ["", "Where the skip aims stand (wall time through `skip_messages`):", ""]
    for r in results:
        aim = r.sizes.aim_seconds
        lines.append(
            f"- {r.ids:,} ids in under {aim:g} s: {report.verdict(r.skip.median < aim)} "
            f"(median {report.number(r.skip.median)} s wall, "
            f"{report.number(r.skip_cpu.median)} s CPU: "
            f"CPU {'under' if r.skip_cpu.median < aim else 'over'} the aim); the first call "
            f"of the process {report.verdict(r.cold[0] < aim)} ({report.number(r.cold[0])} s "
            f"wall, {report.number(r.cold[1])} s CPU)."
        )
    if len(results) > 1:
        base, big = results[0], results[-1]
        growth = big.ids / base.ids
        lines += [
            "",
            f"How cost grows from {base.sizes.scale}x to {big.sizes.scale}x ({growth:g} times "
            "the ids and the topic), medians:",
            "",
            report.table(
                ["call", f"{base.sizes.scale}x", f"{big.sizes.scale}x", "ratio"],
                [
                    [
                        call,
                        f"{report.number(a.median)} s",
                        f"{report.number(b.median)} s",
                        f"{b.median / a.median:.1f}",
                    ]
                    for call, a, b in [
                        ("`skip_messages`", base.skip, big.skip),
                        ("`skip_messages`, CPU", base.skip_cpu, big.skip_cpu),
                        ("`plan_skip`", base.plan, big.plan),
                        ("`apply_skip`", base.apply, big.apply),
                    ]
                ],
            ),
        ]
    lines.append("")
    for r in results:
        for what, result in r.profiles:
            lines += report.profile_markdown(result, what)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options(
        "PIP-423 skip of 100,000 and 1,000,000 ids over 8 partitions.", argv
    )
    host = machine.describe()
    with report.work_dir(options, "skip") as work:
        results = [measure(sizes, options, work) for sizes in (QUICK if options.quick else FULL)]
        markdown = render(host, options, work, results)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

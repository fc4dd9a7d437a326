"""PIP-423 skip by message id: 100,000 scattered ids over 8 partitions.

A topic of 8 partitions holds 2,000,000 messages in batches of 10 (200,000
entries, 25,000 per partition), written with ``Broker.produce`` (not timed).
The ids to skip are 50,000 whole entries and 50,000 batch indexes, each of
another entry, all chosen at random across the partitions and shuffled.

Timed, each on a fresh Shared subscription at the earliest position, the two
alternating which goes first from run to run:

- ``Broker.skip_messages``: validated, acknowledged, durable and audited
  when it returns;
- the same split into ``Broker.plan_skip`` (validation and routing, nothing
  written) and ``Broker.apply_skip`` (acknowledge and audit).

After every run the subscription's cursors are reloaded and each skipped id
is checked acknowledged. When ``skip_messages`` misses the aim, one more
skip runs under ``cProfile`` and its hotspots are reported.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Options, Profile, Runs, Stopwatch
from core.broker import Broker
from core.config import Config
from core.ledger_layout import LedgerLayout
from core.managed_cursor import ManagedCursor
from core.message_id import MessageId
from core.producer import OutgoingMessage
from core.subscription import SubscriptionType

SECTION = "skip_ids"
ROLE = "admin"
TOPIC = "persistent://bench/skip/topic"
AIM_SECONDS = 2.0


@dataclass(frozen=True)
class Sizes:
    partitions: int
    messages: int
    batch_size: int
    whole_entries: int
    batch_indexes: int
    produce_chunk: int


FULL = Sizes(
    partitions=8,
    messages=2_000_000,
    batch_size=10,
    whole_entries=50_000,
    batch_indexes=50_000,
    produce_chunk=200_000,
)
QUICK = Sizes(
    partitions=8,
    messages=40_000,
    batch_size=10,
    whole_entries=1_000,
    batch_indexes=1_000,
    produce_chunk=20_000,
)


def build_topic(broker: Broker, sizes: Sizes) -> list[MessageId]:
    broker.create_tenant(ROLE, "bench")
    broker.create_namespace(ROLE, "bench/skip")
    broker.create_topic(ROLE, TOPIC, partitions=sizes.partitions)
    ids: list[MessageId] = []
    for start in range(0, sizes.messages, sizes.produce_chunk):
        stop = min(start + sizes.produce_chunk, sizes.messages)
        messages = [OutgoingMessage(b"%016d" % i) for i in range(start, stop)]
        ids.extend(broker.produce(ROLE, TOPIC, messages, batch_size=sizes.batch_size))
    return ids


def choose_ids(ids: list[MessageId], sizes: Sizes, seed: int) -> list[MessageId]:
    """Whole entries and batch indexes of other entries, scattered over every partition."""
    rng = random.Random(seed)
    entries: dict[tuple[int, int, int], int] = {}
    for m in ids:
        entries[(m.partition, m.ledger_id, m.entry_id)] = m.batch_size
    keys = rng.sample(sorted(entries), sizes.whole_entries + sizes.batch_indexes)
    chosen = [
        MessageId(ledger, entry, partition)
        for partition, ledger, entry in keys[: sizes.whole_entries]
    ]
    for partition, ledger, entry in keys[sizes.whole_entries :]:
        batch_size = entries[(partition, ledger, entry)]
        chosen.append(MessageId(ledger, entry, partition, rng.randrange(batch_size), batch_size))
    rng.shuffle(chosen)
    return chosen


def check_skipped(broker: Broker, subscription: str, chosen: list[MessageId]) -> None:
    """Every chosen id is acknowledged in the subscription's reloaded cursors."""
    info = broker.metadata.get_topic(TOPIC)
    names = info.partition_names()
    for index, name in enumerate(names):
        layout = LedgerLayout.of(
            (ledger.ledger_id, ledger.entries) for ledger in broker.metadata.ledgers(name)
        )
        state = ManagedCursor.open(broker.metadata, name, subscription, layout).state
        mine = [m for m in chosen if m.partition == index]
        assert mine and all(state.is_acked(m.position, m.batch_index) for m in mine), name


@dataclass(frozen=True)
class Results:
    messages: int
    entries: int
    per_partition: dict[str, int]
    skip: Runs
    plan: Runs
    apply: Runs
    profiles: list[tuple[str, Profile]]


def measure(sizes: Sizes, options: Options, work: Path) -> Results:
    config = Config.from_home(work / "home")
    with Broker(config) as broker:
        print(f"producing {sizes.messages:,} messages over {sizes.partitions} partitions")
        ids = build_topic(broker, sizes)
        chosen = choose_ids(ids, sizes, seed=11)
        total = sizes.whole_entries + sizes.batch_indexes
        skips: list[float] = []
        plans: list[float] = []
        applies: list[float] = []
        per_partition: dict[str, int] = {}
        for run in range(options.runs):
            # Which of the two goes first alternates, so that neither always runs warmer.
            order = ("whole", "split") if run % 2 == 0 else ("split", "whole")
            for kind in order:
                name = f"{kind}-{run}"
                broker.create_subscription(
                    ROLE, TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
                )
                if kind == "whole":
                    with Stopwatch() as skip:
                        outcome = broker.skip_messages(ROLE, TOPIC, name, chosen)
                    per_partition = dict(outcome.per_partition)
                else:
                    with Stopwatch() as plan:
                        planned = broker.plan_skip(ROLE, TOPIC, name, chosen)
                    with Stopwatch() as apply:
                        outcome = broker.apply_skip(ROLE, planned)
                assert len(outcome.skipped) == total and not outcome.already_acknowledged
                check_skipped(broker, name, chosen)
            skips.append(skip.seconds)
            plans.append(plan.seconds)
            applies.append(apply.seconds)
            print(
                f"  run {run}: skip_messages {skip.seconds:.3f} s; "
                f"plan {plan.seconds:.3f} s + apply {apply.seconds:.3f} s",
                flush=True,
            )
        profiles: list[tuple[str, Profile]] = []
        if Runs.of(skips).median >= AIM_SECONDS:
            what = f"one `skip_messages` of {total:,} ids on a fresh subscription"
            print(f"above the aim: profiling {what}", flush=True)
            name = "profiled"
            broker.create_subscription(
                ROLE, TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
            )
            profiles.append(
                (what, report.profile(lambda: broker.skip_messages(ROLE, TOPIC, name, chosen)))
            )
        entries = len({(m.partition, m.ledger_id, m.entry_id) for m in ids})
        return Results(
            len(ids),
            entries,
            per_partition,
            Runs.of(skips),
            Runs.of(plans),
            Runs.of(applies),
            profiles,
        )


def render(
    host: machine.Machine, sizes: Sizes, options: Options, work: Path, results: Results
) -> str:
    lines = report.preamble("Skip by message id (PIP-423)", "skip_ids", host, options, work)
    total = sizes.whole_entries + sizes.batch_indexes
    split_total = Runs.of(
        [p + a for p, a in zip(results.plan.values, results.apply.values, strict=True)]
    )
    spread = ", ".join(f"{n:,}" for n in results.per_partition.values())
    lines += [
        f"A topic of {sizes.partitions} partitions with {results.messages:,} messages in "
        f"batches of {sizes.batch_size} ({results.entries:,} entries), written with "
        f"`Broker.produce` (not timed). Skipped: {total:,} ids, {sizes.whole_entries:,} whole "
        f"entries and {sizes.batch_indexes:,} batch indexes of other entries, chosen at random "
        f"and shuffled (per partition: {spread}). Each run skips on a fresh Shared "
        "subscription, once whole and once split, alternating which goes first; afterwards "
        "every id is checked acknowledged in the reloaded cursors.",
        "",
        report.table(
            ["call", "seconds", f"vs < {AIM_SECONDS:g} s"],
            [
                [
                    "`skip_messages` (validated + acknowledged + durable + audited)",
                    results.skip.cell("s"),
                    report.verdict(results.skip.median < AIM_SECONDS),
                ],
                ["`plan_skip` (validate and route, nothing written)", results.plan.cell("s"), ""],
                ["`apply_skip` (acknowledge, durable, audit)", results.apply.cell("s"), ""],
                [
                    "`plan_skip` + `apply_skip`",
                    split_total.cell("s"),
                    report.verdict(split_total.median < AIM_SECONDS),
                ],
            ],
        ),
        "",
        f"Planning takes {results.plan.median / split_total.median:.0%} of the split total "
        f"(medians, same runs); {report.number(total / results.skip.median)} ids/s through "
        "`skip_messages`.",
        "",
    ]
    for what, result in results.profiles:
        lines += report.profile_markdown(result, what)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("PIP-423 skip of 100,000 ids over 8 partitions.", argv)
    host = machine.describe()
    sizes = QUICK if options.quick else FULL
    with report.work_dir(options, "skip") as work:
        results = measure(sizes, options, work)
        markdown = render(host, sizes, options, work, results)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

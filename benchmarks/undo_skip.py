"""Undo of a skip of 100,000 scattered ids over 8 partitions.

The topic of ``skip_ids`` at 1x: 8 partitions written with ``Broker.producing.produce`` in
batches of 10 (not timed), 2,000,000 messages (200,000 entries); 100,000 ids, half
the entries chosen at random, half of them whole entries and half one batch index
of another entry, shuffled.

Each run skips them on a fresh Shared subscription at the earliest position (not
timed), then times the undo of that skip:

- ``gating.undo_skip.plan_undo_skip``: the skip's audit record read, every id routed to its
  partition and checked on a retained ledger, those still acknowledged counted;
- ``gating.undo_skip.apply_undo_skip``: planned again, then the cursors locked, the
  acknowledgements taken back and written as one replacing delta per partition,
  with the ``undo-skip`` audit record, in one transaction.

After every run the cursors are reloaded and every id is checked unacknowledged.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import machine, report
from benchmarks.report import Options, Runs, Stopwatch
from benchmarks.skip_ids import FULL, QUICK, ROLE, TOPIC, Sizes, build_topic
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating import undo_skip
from cursorops.core.store.cursor_state import replay

SECTION = "undo_skip"
AIM_SECONDS = 5.0
"""Aim for the undo of 100,000 ids, plan and apply together, on a 2-core machine."""


def check_unacknowledged(broker: Broker, subscription: str, chosen: list[MessageId]) -> None:
    """No chosen id is acknowledged in the subscription's reloaded cursors."""
    names = broker.metadata.get_topic(TOPIC).partition_names()
    for index, name in enumerate(names):
        layout = LedgerLayout.of(
            (ledger.ledger_id, ledger.entries) for ledger in broker.metadata.ledgers(name)
        )
        state = replay(broker.metadata.load_cursor(name, subscription), layout)
        mine = [m for m in chosen if m.partition == index]
        acked = state.acked_many(
            np.array([m.ledger_id for m in mine], dtype=np.int64),
            np.array([m.entry_id for m in mine], dtype=np.int64),
            np.array([m.batch_index for m in mine], dtype=np.int64),
        )
        assert mine and not acked.any(), name


@dataclass(frozen=True)
class Results:
    sizes: Sizes
    ids: int
    entries: int
    plan: Runs
    apply: Runs
    cpu: Runs
    """CPU seconds of this process in plan and apply (wall time also counts waiting for a
    core on the shared machine)."""

    @property
    def total(self) -> Runs:
        return Runs.of([p + a for p, a in zip(self.plan.values, self.apply.values, strict=True)])


def measure(sizes: Sizes, options: Options, work: Path) -> Results:
    config = Config.from_home(work / "home")
    with Broker(config) as broker:
        print(
            f"producing {sizes.messages:,} messages over {sizes.partitions} partitions",
            flush=True,
        )
        chosen, entries = build_topic(broker, sizes, seed=11)
        plans: list[float] = []
        applies: list[float] = []
        cpus: list[float] = []
        for run in range(options.runs):
            name = f"undo-{run}"
            broker.admin.create_subscription(
                ROLE, TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
            )
            skipped = skips.skip_messages(broker.gated, ROLE, TOPIC, name, chosen)
            assert skipped.skip_id is not None and len(skipped.skipped) == len(chosen)
            cpu = time.process_time()
            with Stopwatch() as plan_watch:
                plan = undo_skip.plan_undo_skip(broker.gated, ROLE, TOPIC, name, skipped.skip_id)
            with Stopwatch() as apply_watch:
                outcome = undo_skip.apply_undo_skip(broker.gated, ROLE, plan)
            cpus.append(time.process_time() - cpu)
            assert len(outcome.unacknowledged) == len(chosen) and not outcome.not_acknowledged
            check_unacknowledged(broker, name, chosen)
            plans.append(plan_watch.seconds)
            applies.append(apply_watch.seconds)
            print(
                f"  run {run}: plan_undo_skip {plan_watch.seconds:.3f} s + "
                f"apply_undo_skip {apply_watch.seconds:.3f} s",
                flush=True,
            )
        return Results(sizes, len(chosen), entries, Runs.of(plans), Runs.of(applies), Runs.of(cpus))


def render(host: machine.Machine, options: Options, work: Path, result: Results) -> str:
    lines = report.preamble("Undo of a skip", "undo_skip", host, options, work)
    sizes = result.sizes
    lines += [
        f"The topic of `skip_ids` at 1x: {sizes.partitions} partitions written with "
        f"`Broker.producing.produce` in batches of {sizes.batch_size} (not timed), "
        f"{sizes.messages:,} messages ({result.entries:,} entries). Each run skips "
        f"{result.ids:,} scattered ids (half whole entries, half one batch index of another "
        "entry) on a fresh Shared subscription (not timed), then undoes that skip; afterwards "
        "every id is checked unacknowledged in the reloaded cursors. The machine has 2 cores "
        "shared with other work: read the medians, the load average above, and the CPU "
        "seconds this process spent.",
        "",
    ]
    size = f"{result.ids:,} ids, {sizes.messages:,} messages"
    rows = [
        [
            size,
            "`plan_undo_skip` (audit record, routing, retained ledgers, count)",
            result.plan.cell("s"),
            "",
            "",
        ],
        [
            size,
            "`apply_undo_skip` (planned again, locked, taken back, durable, audited)",
            result.apply.cell("s"),
            "",
            "",
        ],
        [
            size,
            "`plan_undo_skip` + `apply_undo_skip`",
            result.total.cell("s"),
            result.cpu.cell("s"),
            f"< {AIM_SECONDS:g} s: {report.verdict(result.total.median < AIM_SECONDS)}",
        ],
    ]
    lines += [
        report.table(["size", "call", "wall seconds", "CPU seconds", "aim (wall)"], rows),
        "",
        f"- {report.number(result.ids / result.total.median)} ids/s undone (median, plan and "
        "apply together). The apply plans again from the audit log (a forged or stale plan "
        "is refused), so the planning work is paid twice in a plan-then-apply undo.",
        "",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Undo of a skip of 100,000 ids over 8 partitions.", argv)
    host = machine.describe()
    sizes = (QUICK if options.quick else FULL)[0]
    with report.work_dir(options, "undo") as work:
        result = measure(sizes, options, work)
        markdown = render(host, options, work, result)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

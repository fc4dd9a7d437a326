"""``topics skip -n 1,000,000`` on a 10,000,000-message topic: the head counted in messages.

One non-partitioned topic written with ``Broker.producing.produce_columns`` in batches of 10
(not timed): 10,000,000 messages, 1,000,000 entries. Each run creates a fresh
Shared subscription at the earliest position, acknowledges the first 15 messages
(so the head starts inside a batch, not timed), then times:

- ``gating.skip.plan_skip_head`` alone: the head chosen from the entry index and the
  cursor, validated as a skip plan (what the workflow previews);
- ``gating.skip.skip_head``: chosen, locked, acknowledged, audited, in one call (the
  CLI's and REST's direct door).

Afterwards the backlog is checked to be exactly 10,000,000 - 15 - 1,000,000.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Options, Runs, Stopwatch
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skip_slice

SECTION = "skip_head"
ROLE = "admin"
TOPIC = "persistent://bench/head/events"
AIM_SECONDS = 2.0
"""Aim for ``skip -n 1,000,000`` on a 10,000,000-message topic, on a 2-core machine."""
ACKED_FIRST = 15


@dataclass(frozen=True)
class Sizes:
    messages: int
    skip: int
    batch_size: int
    chunk: int


FULL = Sizes(10_000_000, 1_000_000, 10, 500_000)
QUICK = Sizes(400_000, 40_000, 10, 100_000)


@dataclass(frozen=True)
class Results:
    sizes: Sizes
    plan: Runs
    skip: Runs
    cpu: Runs


def backlog(broker: Broker, subscription: str) -> int:
    return sum(
        a.result.messages for a in broker.analysis.analyze_backlog(ROLE, TOPIC, subscription)
    )


def measure(sizes: Sizes, options: Options, work: Path) -> Results:
    config = Config.from_home(work / "home")
    with Broker(config) as broker:
        broker.admin.create_tenant(ROLE, "bench")
        broker.admin.create_namespace(ROLE, "bench/head")
        broker.admin.create_topic(ROLE, TOPIC)
        print(f"producing {sizes.messages:,} messages", flush=True)
        for start in range(0, sizes.messages, sizes.chunk):
            stop = min(start + sizes.chunk, sizes.messages)
            payloads = [b"%016d" % i for i in range(start, stop)]
            broker.producing.produce_columns(ROLE, TOPIC, payloads, batch_size=sizes.batch_size)
        plans: list[float] = []
        skips: list[float] = []
        cpus: list[float] = []
        for run in range(options.runs):
            name = f"head-{run}"
            broker.admin.create_subscription(
                ROLE, TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
            )
            skip_slice.skip_head(broker.gated, ROLE, TOPIC, name, ACKED_FIRST)
            with Stopwatch() as plan_watch:
                plan = skip_slice.plan_skip_head(broker.gated, ROLE, TOPIC, name, sizes.skip)
            assert len(plan) > 0
            cpu = time.process_time()
            with Stopwatch() as skip_watch:
                outcome = skip_slice.skip_head(broker.gated, ROLE, TOPIC, name, sizes.skip)
            cpus.append(time.process_time() - cpu)
            messages = sum(
                m.batch_size if m.batch_index < 0 and m.batch_size > 0 else 1
                for m in outcome.skipped
            )
            assert messages == sizes.skip, messages
            assert backlog(broker, name) == sizes.messages - ACKED_FIRST - sizes.skip
            plans.append(plan_watch.seconds)
            skips.append(skip_watch.seconds)
            print(
                f"  run {run}: plan_skip_head {plan_watch.seconds:.3f} s, "
                f"skip_head {skip_watch.seconds:.3f} s",
                flush=True,
            )
        return Results(sizes, Runs.of(plans), Runs.of(skips), Runs.of(cpus))


def render(host: machine.Machine, options: Options, work: Path, result: Results) -> str:
    lines = report.preamble("skip -n on a large topic", "skip_head", host, options, work)
    sizes = result.sizes
    size = f"{sizes.skip:,} of {sizes.messages:,} messages"
    lines += [
        f"One non-partitioned topic of {sizes.messages:,} messages in batches of "
        f"{sizes.batch_size} (written with `Broker.producing.produce_columns`, not timed). "
        f"Each run "
        f"acknowledges the first {ACKED_FIRST} messages of a fresh Shared subscription (so "
        f"the head starts inside a batch), then skips the next {sizes.skip:,} messages; the "
        "backlog is then checked exact. Pulsar's `skip -n` would count entries: "
        f"{sizes.skip:,} entries are {sizes.skip * sizes.batch_size:,} messages here.",
        "",
        report.table(
            ["size", "call", "wall seconds", "CPU seconds", "aim (wall)"],
            [
                [
                    size,
                    "`plan_skip_head` (chosen and validated, no write)",
                    result.plan.cell("s"),
                    "",
                    "",
                ],
                [
                    size,
                    "`skip_head` (chosen, locked, acknowledged, audited)",
                    result.skip.cell("s"),
                    result.cpu.cell("s"),
                    f"< {AIM_SECONDS:g} s: {report.verdict(result.skip.median < AIM_SECONDS)}",
                ],
            ],
        ),
        "",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("skip -n 1,000,000 on a 10,000,000-message topic.", argv)
    host = machine.describe()
    sizes = QUICK if options.quick else FULL
    with report.work_dir(options, "skip-head") as work:
        result = measure(sizes, options, work)
        markdown = render(host, options, work, result)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

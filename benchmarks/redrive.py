"""Redrive of a dead-letter topic: 100,000 messages back to a topic of three subscriptions.

Each run has its own topic (three Shared subscriptions, ten messages each has
consumed) and its dead-letter topic ``<topic>-billing-DLQ`` with one subscription
and 100,000 messages written with ``Broker.producing.produce`` (not timed), as a client's
dead-letter producer writes them: one entry each, a key out of 1,000 and two
properties.

Timed: ``gating.redrive.plan_redrive`` (authorize, read the dead-letter topic and its
cursor, nothing written) and ``gating.redrive.apply_redrive`` (re-read the planned
entries, then in one transaction: the new segment, the acknowledgements on the two
other subscriptions and on the dead-letter subscription, the audit record). After
each run the backlogs are counted exactly (``analyze_backlog``): ``billing`` has
the 100,000 messages, the other two nothing new, the dead-letter subscription none.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Options, Profile, Runs, Stopwatch
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import redrive
from cursorops.core.services.producer import OutgoingMessage

SECTION = "redrive"
ROLE = "admin"
NAMESPACE = "bench/redrive"
SUBSCRIPTIONS = ("audit", "billing", "shipping")
FULL_MESSAGES = 100_000
QUICK_MESSAGES = 5_000
AIM_SECONDS = 10.0


@dataclass(frozen=True)
class Results:
    messages: int
    plan: Runs
    apply: Runs
    total: Runs
    cpu: Runs
    """CPU seconds of this process in plan + apply (the machine is shared)."""
    profiles: list[tuple[str, Profile]]


def seed(broker: Broker, topic: str, messages: int) -> None:
    broker.admin.create_topic(ROLE, topic)
    for sub in SUBSCRIPTIONS:
        broker.admin.create_subscription(
            ROLE, topic, sub, SubscriptionType.SHARED, initial_position="earliest"
        )
    broker.producing.produce(ROLE, topic, [OutgoingMessage(b"m%d" % i) for i in range(10)])
    for sub in SUBSCRIPTIONS:
        broker.reading.consume(ROLE, topic, sub, 10, ack=True)
    dlq = f"{topic}-billing-DLQ"
    broker.admin.create_topic(ROLE, dlq)
    broker.admin.create_subscription(
        ROLE, dlq, "dlq-reader", SubscriptionType.SHARED, initial_position="earliest"
    )
    dead = [
        OutgoingMessage(
            b"%064d" % i,
            key=f"order-{i % 1000}",
            properties={"REAL_TOPIC": topic, "ORIGIN_MESSAGE_ID": f"7:{i}:-1"},
        )
        for i in range(messages)
    ]
    broker.producing.produce(ROLE, dlq, dead)


def backlogs(broker: Broker, topic: str) -> dict[str, int]:
    found = {
        row.subscription: row.result.messages
        for row in broker.analysis.analyze_backlog(ROLE, topic)
    }
    (dlq,) = broker.analysis.analyze_backlog(ROLE, f"{topic}-billing-DLQ", "dlq-reader")
    return {**found, "dlq-reader": dlq.result.messages}


def measure(options: Options, work: Path) -> Results:
    messages = QUICK_MESSAGES if options.quick else FULL_MESSAGES
    config = Config.from_home(work / "home")
    plans: list[float] = []
    applies: list[float] = []
    cpus: list[float] = []
    profiles: list[tuple[str, Profile]] = []
    with Broker(config) as broker:
        broker.admin.create_tenant(ROLE, "bench")
        broker.admin.create_namespace(ROLE, NAMESPACE)
        for run in range(options.runs):
            topic = f"persistent://{NAMESPACE}/orders-{run}"
            seed(broker, topic, messages)
            cpu = time.process_time()
            with Stopwatch() as plan_watch:
                plan = redrive.plan_redrive(broker.gated, ROLE, topic, "billing")
            with Stopwatch() as apply_watch:
                outcome = redrive.apply_redrive(broker.gated, ROLE, plan)
            cpus.append(time.process_time() - cpu)
            assert len(outcome.redriven) == messages
            assert backlogs(broker, topic) == {
                "audit": 0,
                "billing": messages,
                "shipping": 0,
                "dlq-reader": 0,
            }
            plans.append(plan_watch.seconds)
            applies.append(apply_watch.seconds)
            print(
                f"run {run}: plan {plan_watch.seconds:.3f} s + apply {apply_watch.seconds:.3f} s",
                flush=True,
            )
        total = Runs.of([p + a for p, a in zip(plans, applies, strict=True)])
        if total.median >= AIM_SECONDS:
            topic = f"persistent://{NAMESPACE}/orders-profiled"
            seed(broker, topic, messages)
            what = f"one plan and apply of {messages:,} messages"
            profiles.append(
                (
                    what,
                    report.profile(
                        lambda: redrive.apply_redrive(
                            broker.gated,
                            ROLE,
                            redrive.plan_redrive(broker.gated, ROLE, topic, "billing"),
                        )
                    ),
                )
            )
    return Results(messages, Runs.of(plans), Runs.of(applies), total, Runs.of(cpus), profiles)


def render(host: machine.Machine, options: Options, work: Path, r: Results) -> str:
    lines = report.preamble("Redrive a dead-letter topic", "redrive", host, options, work)
    lines += [
        "Each run redrives a fresh dead-letter topic of "
        f"{r.messages:,} messages (one entry each, keys and two properties, as a client's "
        "dead-letter producer writes them) to a topic of three Shared subscriptions, for "
        "`billing` alone. Afterwards the backlogs are counted exactly: `billing` holds the "
        "redriven messages, the other two and the dead-letter subscription none. The machine "
        "has 2 cores shared with other work: wall time also counts the time this process "
        "waited for a core.",
        "",
    ]
    aim = f"< {AIM_SECONDS:g} s: {report.verdict(r.total.median < AIM_SECONDS)}"
    rows = [
        ["`plan_redrive` (authorize, read the DLQ and its cursor)", r.plan.cell("s"), "", ""],
        [
            "`apply_redrive` (re-read; publish + 3 acknowledgements + audit, one transaction)",
            r.apply.cell("s"),
            "",
            "",
        ],
        ["plan + apply", r.total.cell("s"), r.cpu.cell("s"), aim],
    ]
    lines += [report.table(["call", "wall seconds", "CPU seconds", "aim (wall)"], rows), ""]
    lines.append(
        f"- {report.number(r.messages / r.total.median)} messages/s redriven (median); "
        f"planning takes {r.plan.median / r.total.median:.0%} of the total."
    )
    lines.append("")
    for what, result in r.profiles:
        lines += report.profile_markdown(result, what)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options(
        "Redrive of a 100,000-message dead-letter topic to one subscription.", argv
    )
    host = machine.describe()
    with report.work_dir(options, "redrive") as work:
        results = measure(options, work)
        markdown = render(host, options, work, results)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

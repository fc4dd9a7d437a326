"""The poison-pill radar over 100 subscriptions: what the backlog audit's scan_radar does.

10 topics of 4 partitions, each holding 100,000 messages in batches of 10 and
10 Shared subscriptions at the earliest position (100 subscriptions, 1,000,000
messages, 100,000 entries). Each subscription has 500 scattered messages
acknowledged by id (half whole entries, half one batch index), so every
partition has acknowledged messages behind unacknowledged ones. Churn: on two
subscriptions per topic a consumer restarts 3 times, each time taking 100
messages into its queue and closing without acknowledging them (no redelivery
request: their counts stay 0). Then on one of those a consumer receives 100
messages and negatively acknowledges 5 of them three times (the pills:
redelivery counts in the pending set). Not timed.

Timed: :func:`cursorops.airflow.backlog_audit.radar_report` over the 10 topics with the
default limits and the age criterion at 0 s (every message behind an
acknowledged one is a finding), on a fresh Broker each run, as the task opens
one: entry indexes read from the segments, every cursor loaded, every pending
set read, the listed messages' keys read. The aim: under 30 s. Checked: the
messages found redelivered are exactly the pills (precision 1.0 of the
redelivery criterion, churn included).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Options, Runs, Stopwatch
from cursorops.airflow.backlog_audit import radar_report
from cursorops.core.domain.analysis.poison_radar import RadarLimits
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips

SECTION = "radar"
ROLE = "admin"
AIM_SECONDS = 30.0
RESTARTS = 3
"""Consumer restarts (churn) on each of two subscriptions per topic."""
PILLS = 5
"""Messages negatively acknowledged three times, on one subscription per topic."""


@dataclass(frozen=True)
class Sizes:
    topics: int
    subscriptions: int
    """Per topic."""
    partitions: int
    messages: int
    """Per topic."""
    batch_size: int
    acked: int
    """Messages acknowledged by id per subscription."""


FULL = Sizes(10, 10, 4, 100_000, 10, 500)
QUICK = Sizes(2, 5, 2, 5_000, 10, 50)


def build(broker: Broker, sizes: Sizes, seed: int) -> list[str]:
    broker.admin.create_tenant(ROLE, "bench")
    broker.admin.create_namespace(ROLE, "bench/radar")
    rng = random.Random(seed)
    topics = []
    for t in range(sizes.topics):
        topic = f"persistent://bench/radar/t{t}"
        topics.append(topic)
        broker.admin.create_topic(ROLE, topic, partitions=sizes.partitions)
        for s in range(sizes.subscriptions):
            broker.admin.create_subscription(
                ROLE, topic, f"s{s}", SubscriptionType.SHARED, initial_position="earliest"
            )
        payloads = [b"%016d" % i for i in range(sizes.messages)]
        written = broker.producing.produce_columns(
            ROLE, topic, payloads, batch_size=sizes.batch_size
        )
        entries = sorted(
            set(
                zip(
                    written.partition.tolist(),
                    written.ledger_id.tolist(),
                    written.entry_id.tolist(),
                    written.batch_size.tolist(),
                    strict=True,
                )
            )
        )
        for s in range(sizes.subscriptions):
            chosen = rng.sample(entries, sizes.acked)
            half = len(chosen) // 2
            ids = [MessageId(ledger, entry, part) for part, ledger, entry, _ in chosen[:half]]
            ids += [
                MessageId(ledger, entry, part, rng.randrange(size), size)
                for part, ledger, entry, size in chosen[half:]
            ]
            skips.skip_messages(broker.gated, ROLE, topic, f"s{s}", ids)
        for s in range(min(2, sizes.subscriptions)):
            for _ in range(RESTARTS):
                restarting = broker.reading.dispatcher(ROLE, topic, f"s{s}").subscribe(
                    "restarting", receiver_queue_size=100
                )
                restarting.receive_many(1)
                restarting.close()
        consumer = broker.reading.dispatcher(ROLE, topic, "s0").subscribe(
            "c", receiver_queue_size=100
        )
        received = consumer.receive_many(100)
        pills = {m.message_id for m in received[:: 100 // PILLS]}
        consumer.acknowledge([m for m in received if m.message_id not in pills])
        nacks = dict.fromkeys(pills, 0)
        batch = [m for m in received if m.message_id in pills]
        while batch:
            for message in batch:
                if message.message_id in pills and nacks[message.message_id] < 3:
                    nacks[message.message_id] += 1
                    consumer.negative_acknowledge(message)
            if min(nacks.values()) >= 3:
                break
            batch = consumer.receive_many(100)
        consumer.close()
    return topics


def measure(sizes: Sizes, options: Options, work: Path) -> tuple[Runs, dict[str, int]]:
    config = Config.from_home(work / "home")
    limits = RadarLimits(3, 0, 50)
    with Broker(config) as broker:
        print(
            f"building {sizes.topics} topics x {sizes.subscriptions} subscriptions, "
            f"{sizes.messages:,} messages each",
            flush=True,
        )
        topics = build(broker, sizes, seed=7)
    seconds: list[float] = []
    found: dict[str, int] = {}
    for run in range(options.runs):
        with Broker(config) as broker, Stopwatch() as watch:
            document = radar_report(broker, ROLE, topics, limits)
        seconds.append(watch.seconds)
        found = {
            "subscriptions": document["subscriptions"],
            "stuck": document["stuck"],
            "listed": sum(len(f["listed"]) for f in document["findings"]),
            "redelivered": sum(f["redelivered"] for f in document["findings"]),
        }
        print(f"run {run + 1}: {watch.seconds:.2f} s, {found}", flush=True)
        # Churn is no evidence: what is found redelivered is the pills, no more, no less.
        assert found["redelivered"] == PILLS * sizes.topics, found
    return Runs.of(seconds), found


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options(__doc__.splitlines()[0] if __doc__ else "", argv)
    sizes = QUICK if options.quick else FULL
    host = machine.describe()
    with report.work_dir(options, "radar") as work:
        runs, found = measure(sizes, options, work)
        lines = report.preamble("Poison-pill radar", "radar", host, options, work)
    count = sizes.topics * sizes.subscriptions
    lines += [
        f"{count} subscriptions: {sizes.topics} topics of {sizes.partitions} partitions, "
        f"{sizes.subscriptions} Shared subscriptions each; {sizes.messages:,} messages per "
        f"topic in batches of {sizes.batch_size}; {sizes.acked} messages acknowledged by id "
        f"per subscription; churn: on 2 subscriptions per topic a consumer restarts {RESTARTS} "
        "times, each taking 100 messages into its queue and closing without acknowledging; "
        f"{PILLS} messages negatively acknowledged 3 times on one subscription per topic (the "
        "pills). `radar_report` (what scan_radar runs) with minRedeliveries 3, minAgeSeconds "
        "0, maxListed 50, on a fresh Broker per run. Precision is that of the redelivery "
        "criterion: pills among the messages found redelivered.",
        "",
        report.table(
            [
                "subscriptions",
                "radar, wall",
                "stuck found",
                "pills",
                "redelivered found",
                "precision",
                "listed",
                "aim",
            ],
            [
                [
                    str(found["subscriptions"]),
                    runs.cell("s"),
                    f"{found['stuck']:,}",
                    str(PILLS * sizes.topics),
                    str(found["redelivered"]),
                    f"{PILLS * sizes.topics / max(found['redelivered'], 1):.2f}",
                    str(found["listed"]),
                    f"< {AIM_SECONDS:.0f} s: {report.verdict(runs.median < AIM_SECONDS)}",
                ]
            ],
        ),
        "",
    ]
    return report.publish(options, SECTION, "\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())

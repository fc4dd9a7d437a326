"""The read path: messages per second through a Shared subscription's consumer.

1,000,000 messages in batches of 10 (100,000 entries) on one non-partitioned
topic, written with ``Broker.produce`` (the ``Producer`` over the Parquet
``LedgerStore``; not timed). 10% of the messages, chosen at random by batch
index, are acknowledged on the subscription before it is read (not timed).
Then one consumer of ``Broker.dispatcher(...).subscribe(...)`` calls
``receive_many(1000)`` until nothing is left:

- without acknowledging (one subscription, read afresh each run);
- acknowledging each chunk of 1,000 with ``Consumer.acknowledge`` (durable,
  one metadata transaction per chunk; a fresh, identically pre-acknowledged
  subscription each run).

Two figures each: delivery alone (the receive loop over a built dispatcher)
and end to end (building the dispatcher, which reads the partition's rows,
plus the loop). For each kind of pass that misses the aim, one extra pass
runs under ``cProfile`` (an acknowledging one over its first 200 chunks) and
its hotspots are reported.
"""

from __future__ import annotations

import gc
import itertools
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Options, Profile, Runs, Stopwatch
from core.broker import Broker
from core.config import Config
from core.cursor import AckTarget
from core.ledger_layout import LedgerLayout
from core.managed_cursor import ManagedCursor
from core.message_id import MessageId
from core.producer import OutgoingMessage
from core.subscription import SubscriptionType

SECTION = "read_path"
ROLE = "admin"
TOPIC = "persistent://bench/read/topic"
PLAIN = "plain"
CHUNK = 1_000
AIM_MESSAGES_PER_S = 200_000
PROFILED_ACK_CHUNKS = 200
"""An acknowledging pass is profiled over its first chunks only: profiling slows it down."""


@dataclass(frozen=True)
class Sizes:
    messages: int
    batch_size: int
    acked_fraction: float
    produce_chunk: int
    payload_bytes: int


FULL = Sizes(
    messages=5_000, batch_size=10, acked_fraction=0.10, produce_chunk=100_000, payload_bytes=32
)
QUICK = Sizes(
    messages=2_000, batch_size=10, acked_fraction=0.10, produce_chunk=100_000, payload_bytes=32
)
SCALES = (1, 10, 30)
"""The benchmark runs at these multiples of the base size, to show how cost grows."""


@dataclass(frozen=True)
class Pass:
    build: float
    """Seconds to build the dispatcher (it reads the partition's rows)."""
    deliver: float
    """Seconds of the receive loop."""
    delivered: int
    cpu: float = 0.0
    """CPU seconds of this process during the receive loop."""


class Topic:
    """The benchmark topic in one installation, with its pre-acknowledged message ids."""

    def __init__(self, broker: Broker, sizes: Sizes) -> None:
        self.broker = broker
        broker.create_tenant(ROLE, "bench")
        broker.create_namespace(ROLE, "bench/read")
        broker.create_topic(ROLE, TOPIC, partitions=0)
        pad = f"%0{sizes.payload_bytes}d"
        ids: list[MessageId] = []
        for start in range(0, sizes.messages, sizes.produce_chunk):
            stop = min(start + sizes.produce_chunk, sizes.messages)
            messages = [OutgoingMessage((pad % i).encode()) for i in range(start, stop)]
            ids.extend(broker.produce(ROLE, TOPIC, messages, batch_size=sizes.batch_size))
        self.ids = ids
        acked = random.Random(7).sample(ids, round(sizes.acked_fraction * len(ids)))
        self.acked = acked
        self.layout = LedgerLayout.of(
            (ledger.ledger_id, ledger.entries) for ledger in broker.metadata.ledgers(TOPIC)
        )

    def subscription(self, name: str) -> str:
        """A Shared subscription at the earliest position with the chosen 10% acknowledged."""
        self.broker.create_subscription(
            ROLE, TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
        )
        cursor = ManagedCursor.open(self.broker.metadata, TOPIC, name, self.layout)
        cursor.acknowledge([AckTarget(m.position, m.batch_index, m.batch_size) for m in self.acked])
        return name

    def read(self, subscription: str, *, acknowledge: bool, chunks: int | None = None) -> Pass:
        """One pass: build the dispatcher, receive (``chunks`` at most) until nothing is left."""
        with Stopwatch() as build:
            dispatcher = self.broker.dispatcher(ROLE, TOPIC, subscription)
        consumer = dispatcher.subscribe("bench", receiver_queue_size=CHUNK)
        delivered = 0
        cpu = time.process_time()
        with Stopwatch() as deliver:
            for _ in itertools.repeat(None) if chunks is None else range(chunks):
                chunk = consumer.receive_many(CHUNK)
                if not chunk:
                    break
                delivered += len(chunk)
                if acknowledge:
                    consumer.acknowledge(chunk)
        cpu = time.process_time() - cpu
        # Leave the subscription: what the consumer holds goes back to the next pass.
        consumer.close()
        return Pass(build.seconds, deliver.seconds, delivered, cpu)

    def check_unacked_delivered(self, subscription: str) -> None:
        """The no-ack pass delivers exactly the messages not acknowledged beforehand."""
        dispatcher = self.broker.dispatcher(ROLE, TOPIC, subscription)
        consumer = dispatcher.subscribe("check", receiver_queue_size=CHUNK)
        seen: list[tuple[int, int, int]] = []
        while chunk := consumer.receive_many(CHUNK):
            seen.extend(
                (m.message_id.ledger_id, m.message_id.entry_id, m.message_id.batch_index)
                for m in chunk
            )
        consumer.close()
        acked = {(m.ledger_id, m.entry_id, m.batch_index) for m in self.acked}
        expected = [
            (m.ledger_id, m.entry_id, m.batch_index)
            for m in self.ids
            if (m.ledger_id, m.entry_id, m.batch_index) not in acked
        ]
        assert seen == expected, "delivered messages differ from the unacknowledged ones"

    def check_all_acknowledged(self, subscription: str) -> None:
        cursor = ManagedCursor.open(self.broker.metadata, TOPIC, subscription, self.layout)
        state = cursor.state
        assert state.mark_delete == self.layout.last_position, state.mark_delete
        assert not state.individually_deleted and not state.batch_acks

    def profile(self, subscription: str, *, acknowledge: bool, chunks: int | None) -> Profile:
        return report.profile(
            lambda: self.read(subscription, acknowledge=acknowledge, chunks=chunks)
        )


@dataclass(frozen=True)
class Results:
    messages: int
    entries: int
    acked_before: int
    plain: list[Pass]
    acking: list[Pass]
    profiles: list[tuple[str, Profile]]


def measure(sizes: Sizes, options: Options, work: Path, *, profile: bool = True) -> Results:
    config = Config.from_home(work / "home")
    with Broker(config) as broker:
        print(f"producing {sizes.messages:,} messages (not timed)", flush=True)
        topic = Topic(broker, sizes)
        topic.subscription(PLAIN)
        expected = len(topic.ids) - len(topic.acked)
        topic.check_unacked_delivered(PLAIN)
        plain: list[Pass] = []
        acking: list[Pass] = []
        for run in range(options.runs):
            gc.collect()
            one = topic.read(PLAIN, acknowledge=False)
            assert one.delivered == expected, (one.delivered, expected)
            plain.append(one)
            print(f"  run {run}: no ack: build {one.build:.3f} s, deliver {one.deliver:.3f} s")
            name = topic.subscription(f"acking-{run}")
            gc.collect()
            one = topic.read(name, acknowledge=True)
            assert one.delivered == expected, (one.delivered, expected)
            topic.check_all_acknowledged(name)
            acking.append(one)
            print(f"  run {run}: ack:    build {one.build:.3f} s, deliver {one.deliver:.3f} s")
        profiles: list[tuple[str, Profile]] = []
        if (
            profile
            and Runs.of([p.delivered / p.deliver for p in plain]).median < AIM_MESSAGES_PER_S
        ):
            what = "one no-ack pass (dispatcher build + receive loop)"
            print(f"below the aim: profiling {what}", flush=True)
            gc.collect()
            profiles.append((what, topic.profile(PLAIN, acknowledge=False, chunks=None)))
        if (
            profile
            and Runs.of([p.delivered / p.deliver for p in acking]).median < AIM_MESSAGES_PER_S
        ):
            chunks = min(PROFILED_ACK_CHUNKS, -(-expected // CHUNK))
            what = (
                f"the first {chunks * CHUNK:,} messages of an acknowledging pass "
                "(dispatcher build + receive loop + acknowledge)"
            )
            print(f"below the aim: profiling {what}", flush=True)
            name = topic.subscription("acking-profiled")
            gc.collect()
            profiles.append((what, topic.profile(name, acknowledge=True, chunks=chunks)))
        return Results(
            messages=len(topic.ids),
            entries=topic.layout.total_entries,
            acked_before=len(topic.acked),
            plain=plain,
            acking=acking,
            profiles=profiles,
        )


def _rows(label: str, passes: list[Pass]) -> list[list[str]]:
    build = Runs.of([p.build for p in passes])
    deliver = Runs.of([p.deliver for p in passes])
    total = Runs.of([p.build + p.deliver for p in passes])
    rate = Runs.of([p.delivered / p.deliver for p in passes])
    end_to_end = Runs.of([p.delivered / (p.build + p.deliver) for p in passes])
    return [
        [
            label,
            build.cell("s"),
            deliver.cell("s"),
            rate.cell(),
            report.verdict(rate.median >= AIM_MESSAGES_PER_S),
            total.cell("s"),
            end_to_end.cell(),
            report.verdict(end_to_end.median >= AIM_MESSAGES_PER_S),
        ]
    ]


def render(
    host: machine.Machine, sizes: Sizes, options: Options, work: Path, results: Results
) -> str:
    lines = report.preamble("Read path", "read_path", host, options, work)
    delivered = results.plain[0].delivered
    plain_rate = Runs.of([p.delivered / p.deliver for p in results.plain])
    ack_rate = Runs.of([p.delivered / p.deliver for p in results.acking])
    headers = [
        "consumer",
        "build dispatcher",
        "receive loop",
        "msg/s (loop)",
        f"vs {AIM_MESSAGES_PER_S:,}/s",
        "build + loop",
        "msg/s (end to end)",
        f"vs {AIM_MESSAGES_PER_S:,}/s",
    ]
    lines += [
        f"{results.messages:,} messages of {sizes.payload_bytes} bytes in batches of "
        f"{sizes.batch_size} ({results.entries:,} entries) on one topic, written with "
        f"`Broker.produce` (not timed); {results.acked_before:,} random batch indexes "
        f"({sizes.acked_fraction:.0%}) acknowledged before reading (not timed). One consumer "
        f"of a Shared subscription (`Broker.dispatcher(...).subscribe(...)`, receiver queue "
        f"{CHUNK:,}) calls `receive_many({CHUNK})` until nothing is left: "
        f"{delivered:,} messages each run (asserted; the first pass also checked to be "
        "exactly the unacknowledged messages, in order). Building the dispatcher reads "
        "nothing: each dispatch reads on lazily from the subscription's read position. The "
        "subscription honours delayed delivery (every message's `deliver_at` is checked; "
        "none is delayed here) and redelivers what a closed consumer held (each no-ack pass "
        "after the first reads redeliveries).",
        "",
        report.table(
            headers,
            _rows("no acknowledgement", results.plain)
            + _rows(f"`acknowledge` each chunk of {CHUNK:,}", results.acking),
        ),
        "",
        f"Acknowledging each chunk (durable, one SQLite transaction per chunk; every "
        "message acknowledged at the end, asserted) delivers "
        f"{ack_rate.median / plain_rate.median:.2f}x the no-ack rate (medians, same runs).",
        "",
    ]
    for what, result in results.profiles:
        lines += report.profile_markdown(result, what)
    return "\n".join(lines) + "\n"


def scaling(sizes: Sizes, scaled: list[tuple[int, Results]]) -> list[str]:
    """The table of figures at each multiple of the base size."""
    rows = []
    for scale, results in scaled:
        for label, passes in (("no ack", results.plain), ("ack each chunk", results.acking)):
            delivered = passes[0].delivered
            loop = Runs.of([p.deliver for p in passes])
            cpu = Runs.of([p.cpu for p in passes])
            rows.append(
                [
                    f"{scale}x",
                    label,
                    f"{delivered:,}",
                    loop.cell("s"),
                    report.rates(delivered, loop).cell(),
                    cpu.cell("s"),
                    report.rates(delivered, cpu).cell(),
                    f"{1e6 * cpu.median / delivered:.1f} µs",
                ]
            )
    return [
        "### How cost grows",
        "",
        f"The same passes at {', '.join(f'{s}x' for s in SCALES)} of {sizes.messages:,} "
        "messages (each size a fresh installation, same runs count). CPU time is this "
        "process's (`time.process_time`) during the receive loop: on a machine shared with "
        "other engineers' tests it says what the code costs when it is not waiting for a "
        "core. A level CPU time per message across sizes means cost grows linearly with "
        "what is delivered: no dispatch rereads the backlog or the pending set.",
        "",
        report.table(
            [
                "size",
                "consumer",
                "delivered",
                "receive loop",
                "msg/s (wall)",
                "CPU time",
                "msg/s (CPU)",
                "CPU per message",
            ],
            rows,
        ),
        "",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Read path through a Shared subscription.", argv)
    host = machine.describe()
    base = QUICK if options.quick else FULL
    scaled: list[tuple[int, Results]] = []
    with report.work_dir(options, "read") as work:
        for scale in SCALES:
            sizes = Sizes(
                base.messages * scale,
                base.batch_size,
                base.acked_fraction,
                base.produce_chunk,
                base.payload_bytes,
            )
            print(f"== {scale}x: {sizes.messages:,} messages", flush=True)
            results = measure(sizes, options, work / f"x{scale}", profile=scale == SCALES[-1])
            scaled.append((scale, results))
        largest = Sizes(
            base.messages * SCALES[-1],
            base.batch_size,
            base.acked_fraction,
            base.produce_chunk,
            base.payload_bytes,
        )
        markdown = render(host, largest, options, work, scaled[-1][1])
        markdown += "\n" + "\n".join(scaling(base, scaled))
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

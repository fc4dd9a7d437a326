"""The read path: messages per second through a Shared subscription's consumer.

Messages in batches of 10 on one non-partitioned topic, written with
``Broker.producing.produce`` (the ``Producer`` over the Parquet ``LedgerStore``; not
timed). 10% of the messages, chosen at random by batch index, are acknowledged
on the subscription before it is read (not timed). Then one consumer of
``Broker.reading.dispatcher(...).subscribe(...)`` reads until nothing is left, in five
kinds of pass side by side in each run:

- ``receive_many(1000)`` (a ``Message`` per message), without acknowledging
  (one subscription, read afresh each run: every pass after the first reads
  redeliveries);
- ``receive_batch(1000)`` (the columnar ``MessageBatch``), without
  acknowledging (its own subscription, likewise);
- each of the two acknowledging each chunk of 1,000 (durable, one metadata
  transaction per chunk; a fresh, identically pre-acknowledged subscription
  each run);
- ``receive_batch(10000)`` with a receiver queue of 10,000 (a third
  subscription, read like the second): a user's choice, not Pulsar's default
  of 1,000, so an extra row beside the headline, labelled as such.

Two figures each: delivery alone (the receive loop over a built dispatcher)
and end to end (building the dispatcher plus the loop), with the CPU time of
the loop and the load average around it (the machine is shared). At the
largest size, the columnar no-ack pass runs once more under ``cProfile`` when
it misses the aim, and its hotspots are reported.
"""

from __future__ import annotations

import gc
import itertools
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.report import Options, Profile, Runs, Stopwatch
from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.store.cursor_state import replay

SECTION = "read_path"
ROLE = "admin"
TOPIC = "persistent://bench/read/topic"
PLAIN = "plain"
COLUMNAR = "columnar"
WIDE = "columnar-wide"
CHUNK = 1_000
"""Pulsar's default receiver queue: the headline rows."""
WIDE_CHUNK = 10_000
"""A larger receiver queue and receive size, a user's choice: an extra row, labelled so."""
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
    load: float = 0.0
    """The 1-minute load average when the loop ended."""
    first: float = 0.0
    """Seconds of the loop's first receive call (its dispatch loads the cursor)."""
    first_count: int = 0
    """Messages the first receive call returned."""


class Topic:
    """The benchmark topic in one installation, with its pre-acknowledged message ids."""

    def __init__(self, broker: Broker, sizes: Sizes) -> None:
        self.broker = broker
        broker.admin.create_tenant(ROLE, "bench")
        broker.admin.create_namespace(ROLE, "bench/read")
        broker.admin.create_topic(ROLE, TOPIC, partitions=0)
        pad = f"%0{sizes.payload_bytes}d"
        ids: list[MessageId] = []
        for start in range(0, sizes.messages, sizes.produce_chunk):
            stop = min(start + sizes.produce_chunk, sizes.messages)
            payloads = [(pad % i).encode() for i in range(start, stop)]
            ids += broker.producing.produce_columns(
                ROLE, TOPIC, payloads, batch_size=sizes.batch_size
            )
        self.ids = ids
        acked = random.Random(7).sample(ids, round(sizes.acked_fraction * len(ids)))
        self.acked = acked
        self.layout = LedgerLayout.of(
            (ledger.ledger_id, ledger.entries) for ledger in broker.metadata.ledgers(TOPIC)
        )

    def subscription(self, name: str) -> str:
        """A Shared subscription at the earliest position with the chosen 10% acknowledged."""
        self.broker.admin.create_subscription(
            ROLE, TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
        )
        targets = [AckTarget(m.position, m.batch_index, m.batch_size) for m in self.acked]
        delta = cursor_codec.encode(CursorState.ack_delta(targets))
        self.broker.metadata.append_cursor_delta(TOPIC, name, delta)
        return name

    def read(
        self,
        subscription: str,
        *,
        acknowledge: bool,
        columnar: bool = False,
        chunks: int | None = None,
        queue: int = CHUNK,
    ) -> Pass:
        """One pass: build the dispatcher, receive (``chunks`` at most) until nothing is left.

        ``columnar`` receives with ``receive_batch`` (a ``MessageBatch`` per
        chunk), otherwise with ``receive_many`` (a ``Message`` per message).
        """
        with Stopwatch() as build:
            dispatcher = self.broker.reading.dispatcher(ROLE, TOPIC, subscription)
        consumer = dispatcher.subscribe("bench", receiver_queue_size=queue)
        delivered = 0
        first = 0.0
        first_count = 0
        cpu = time.process_time()
        with Stopwatch() as deliver:
            for _ in itertools.repeat(None) if chunks is None else range(chunks):
                started = time.perf_counter()
                chunk = consumer.receive_batch(queue) if columnar else consumer.receive_many(queue)
                if not delivered:
                    first, first_count = time.perf_counter() - started, len(chunk)
                if not len(chunk):
                    break
                delivered += len(chunk)
                if acknowledge:
                    consumer.acknowledge(chunk)
        cpu = time.process_time() - cpu
        load = os.getloadavg()[0]
        # Leave the subscription: what the consumer holds goes back to the next pass.
        consumer.close()
        return Pass(build.seconds, deliver.seconds, delivered, cpu, load, first, first_count)

    def check_unacked_delivered(self, subscription: str, *, columnar: bool) -> None:
        """A no-ack pass delivers exactly the messages not acknowledged beforehand, in order."""
        dispatcher = self.broker.reading.dispatcher(ROLE, TOPIC, subscription)
        consumer = dispatcher.subscribe("check", receiver_queue_size=CHUNK)
        seen: list[tuple[int, int, int]] = []
        while True:
            if columnar:
                batch = consumer.receive_batch(CHUNK)
                seen.extend(
                    zip(
                        batch.ledger_id.tolist(),
                        batch.entry_id.tolist(),
                        batch.batch_index.tolist(),
                        strict=True,
                    )
                )
            else:
                chunk = consumer.receive_many(CHUNK)
                seen.extend(
                    (m.message_id.ledger_id, m.message_id.entry_id, m.message_id.batch_index)
                    for m in chunk
                )
            if not len(batch if columnar else chunk):
                break
        consumer.close()
        acked = {(m.ledger_id, m.entry_id, m.batch_index) for m in self.acked}
        expected = [
            (m.ledger_id, m.entry_id, m.batch_index)
            for m in self.ids
            if (m.ledger_id, m.entry_id, m.batch_index) not in acked
        ]
        assert seen == expected, "delivered messages differ from the unacknowledged ones"

    def check_all_acknowledged(self, subscription: str) -> None:
        state = replay(self.broker.metadata.load_cursor(TOPIC, subscription), self.layout)
        assert state.mark_delete == self.layout.last_position, state.mark_delete
        assert not state.individually_deleted and not state.batch_acks

    def profile(self, subscription: str, *, columnar: bool) -> Profile:
        return report.profile(lambda: self.read(subscription, acknowledge=False, columnar=columnar))


@dataclass(frozen=True)
class Results:
    messages: int
    entries: int
    acked_before: int
    passes: dict[str, list[Pass]]
    """Each kind of pass (:data:`KINDS`) -> its runs."""
    profiles: list[tuple[str, Profile]]


KINDS = (
    ("`receive_many`, no acknowledgement", False, False, CHUNK),
    ("`receive_batch`, no acknowledgement", True, False, CHUNK),
    ("`receive_many` + `acknowledge` each chunk", False, True, CHUNK),
    ("`receive_batch` + `acknowledge(batch)` each chunk", True, True, CHUNK),
    (
        f"`receive_batch({WIDE_CHUNK})`, no acknowledgement, receiver queue {WIDE_CHUNK:,}"
        " (a user's choice, not Pulsar's default)",
        True,
        False,
        WIDE_CHUNK,
    ),
)
"""(label, columnar, acknowledge, receiver queue and receive size) of each run's passes."""


def measure(sizes: Sizes, options: Options, work: Path, *, profile: bool = True) -> Results:
    config = Config.from_home(work / "home")
    with Broker(config) as broker:
        print(f"producing {sizes.messages:,} messages (not timed)", flush=True)
        topic = Topic(broker, sizes)
        topic.subscription(PLAIN)
        topic.subscription(COLUMNAR)
        topic.subscription(WIDE)
        expected = len(topic.ids) - len(topic.acked)
        topic.check_unacked_delivered(PLAIN, columnar=False)
        topic.check_unacked_delivered(COLUMNAR, columnar=True)
        topic.check_unacked_delivered(WIDE, columnar=True)
        passes: dict[str, list[Pass]] = {label: [] for label, *_ in KINDS}
        for run in range(options.runs):
            for label, columnar, acknowledge, queue in KINDS:
                if acknowledge:
                    name = topic.subscription(f"acking-{int(columnar)}-{run}")
                else:
                    name = PLAIN if not columnar else COLUMNAR if queue == CHUNK else WIDE
                gc.collect()
                one = topic.read(name, acknowledge=acknowledge, columnar=columnar, queue=queue)
                assert one.delivered == expected, (label, one.delivered, expected)
                if acknowledge:
                    topic.check_all_acknowledged(name)
                passes[label].append(one)
                print(
                    f"  run {run}: {label}: build {one.build:.3f} s, deliver {one.deliver:.3f} s, "
                    f"cpu {one.cpu:.3f} s, load {one.load:.1f}",
                    flush=True,
                )
        profiles: list[tuple[str, Profile]] = []
        if profile:
            # Whether the aim is met or not, the section says where a pass's time goes.
            what = "one `receive_batch` no-ack pass (dispatcher build + receive loop)"
            print(f"profiling {what}", flush=True)
            gc.collect()
            profiles.append((what, topic.profile(COLUMNAR, columnar=True)))
        return Results(
            messages=len(topic.ids),
            entries=topic.layout.total_entries,
            acked_before=len(topic.acked),
            passes=passes,
            profiles=profiles,
        )


def _rows(label: str, passes: list[Pass]) -> list[list[str]]:
    deliver = Runs.of([p.deliver for p in passes])
    rate = Runs.of([p.delivered / p.deliver for p in passes])
    cpu_rate = Runs.of([p.delivered / p.cpu for p in passes])
    end_to_end = Runs.of([p.delivered / (p.build + p.deliver) for p in passes])
    return [
        [
            label,
            Runs.of([p.build for p in passes]).cell("s"),
            deliver.cell("s"),
            rate.cell(),
            report.verdict(rate.median >= AIM_MESSAGES_PER_S),
            Runs.of([p.cpu for p in passes]).cell("s"),
            cpu_rate.cell(),
            report.verdict(cpu_rate.median >= AIM_MESSAGES_PER_S),
            end_to_end.cell(),
            Runs.of([p.load for p in passes]).cell(digits=2),
        ]
    ]


def _median_rate(passes: list[Pass], *, cpu: bool) -> float:
    return Runs.of([p.delivered / (p.cpu if cpu else p.deliver) for p in passes]).median


def _first_dispatch(passes: list[Pass]) -> str:
    """What the first receive call of a pass costs, and the rate of the calls after it."""
    first = Runs.of([p.first for p in passes])
    rest = Runs.of([(p.delivered - p.first_count) / (p.deliver - p.first) for p in passes])
    share = Runs.of([p.first / p.deliver for p in passes])
    return (
        f"Of each pass, the first `receive_batch` takes {first.cell('s')} "
        f"({share.median:.0%} of the loop, median): its dispatch loads the subscription's "
        "cursor afresh in a new dispatcher (the snapshot with the randomly acknowledged batch "
        "indexes: one ack set per partly acknowledged batch, decoded by "
        "`cursorops.core.domain.acks.cursor_codec`) "
        "and decodes the first row group. The calls after it deliver at "
        f"{rest.cell()} msg/s (wall): the cost per dispatch once a consumer is running."
    )


def render(
    host: machine.Machine, sizes: Sizes, options: Options, work: Path, results: Results
) -> str:
    lines = report.preamble("Read path", "read_path", host, options, work)
    many, batch, many_ack, batch_ack, wide = (kind[0] for kind in KINDS)
    delivered = results.passes[many][0].delivered
    headers = [
        "consumer",
        "build dispatcher",
        "receive loop",
        "msg/s (wall)",
        f"vs {AIM_MESSAGES_PER_S:,}/s",
        "CPU time of the loop",
        "msg/s (CPU)",
        f"vs {AIM_MESSAGES_PER_S:,}/s",
        "msg/s (build + loop, wall)",
        "load average (1 min)",
    ]
    p = results.passes
    lines += [
        f"{results.messages:,} messages of {sizes.payload_bytes} bytes in batches of "
        f"{sizes.batch_size} ({results.entries:,} entries) on one topic, written with "
        f"`Broker.producing.produce` (not timed); {results.acked_before:,} random batch indexes "
        f"({sizes.acked_fraction:.0%}) acknowledged before reading (not timed). One consumer "
        f"of a Shared subscription (`Broker.reading.dispatcher(...).subscribe(...)`, receiver "
        f"queue "
        f"{CHUNK:,}) reads until nothing is left with `receive_many({CHUNK})` (a `Message` "
        f"per message) or `receive_batch({CHUNK})` (one columnar `MessageBatch` per chunk), "
        f"the kinds of pass side by side in each run: {delivered:,} messages each pass "
        "(asserted; one pass of each receive call also checked to be exactly the "
        "unacknowledged messages, in order). Each dispatch reads on from the subscription's "
        "read position, filters acknowledged batch indexes, pending and delayed messages "
        "with numpy masks over the decoded record batch, and records what it delivers "
        "pending in one metadata transaction (plain SQL on the store's DBAPI connection, "
        "no ORM), as runs (one row per stretch of a ledger, every message kept in it, each "
        "field as offsets in as few bytes as they need: `cursorops.core.store.pending_runs`). It "
        "lists "
        "only segments added since the last dispatch, reads the ledger list again only when "
        "there were some, and keeps decoded row groups between dispatches. The subscription "
        "honours delayed delivery (every message's `deliver_at` is checked; none is delayed "
        "here) and redelivers what a closed consumer held (each no-ack pass after the first "
        "reads redeliveries). CPU time is this process's (`time.process_time`) during the "
        "loop: on a machine shared with other engineers' tests it says what the code costs "
        "when it is not waiting for a core; the load average is taken as each loop ends. "
        f"The last row uses a receiver queue and receive size of {WIDE_CHUNK:,} instead of "
        f"Pulsar's default {CHUNK:,}: a user's choice, shown for what a dispatch's fixed "
        "cost amounts to; the headline is the default.",
        "",
        report.table(
            headers,
            [row for label, *_ in KINDS for row in _rows(label, p[label])],
        ),
        "",
        f"`receive_batch` against `receive_many` in the same runs (medians): "
        f"{_median_rate(p[batch], cpu=False) / _median_rate(p[many], cpu=False):.2f}x wall, "
        f"{_median_rate(p[batch], cpu=True) / _median_rate(p[many], cpu=True):.2f}x CPU "
        "without acknowledging; "
        f"{_median_rate(p[batch_ack], cpu=False) / _median_rate(p[many_ack], cpu=False):.2f}x "
        f"wall, {_median_rate(p[batch_ack], cpu=True) / _median_rate(p[many_ack], cpu=True):.2f}x"
        " CPU acknowledging each chunk (durable, one SQLite transaction per chunk; every "
        "message acknowledged at the end, asserted).",
        "",
    ]
    best_cpu = _median_rate(p[batch], cpu=True)
    best_wall = _median_rate(p[batch], cpu=False)
    met = best_cpu >= AIM_MESSAGES_PER_S
    lines += [
        f"Where the {AIM_MESSAGES_PER_S:,} msg/s aim stands at Pulsar's default receiver "
        f"queue of {CHUNK:,}: the columnar no-ack pass runs at "
        f"{best_cpu:,.0f} msg/s of CPU time ({1e6 / best_cpu:.1f} µs of CPU per message, "
        f"against the {1e6 / AIM_MESSAGES_PER_S:.1f} µs the aim allows): "
        + (
            "met on CPU time"
            if met
            else f"missed by {AIM_MESSAGES_PER_S / best_cpu:.1f}x on CPU time"
        )
        + f"; on the wall clock of this shared machine it runs at {best_wall:,.0f} msg/s ("
        + (
            "met"
            if best_wall >= AIM_MESSAGES_PER_S
            else f"missed by {AIM_MESSAGES_PER_S / best_wall:.2f}x"
        )
        + " on the wall clock). "
        f"With a receiver queue of {WIDE_CHUNK:,} (a user's choice) the same pass runs at "
        f"{_median_rate(p[wide], cpu=True):,.0f} msg/s of CPU time and "
        f"{_median_rate(p[wide], cpu=False):,.0f} on the wall clock: the difference is "
        "what each dispatch costs whatever its size (one metadata transaction and its "
        "statements, a record-batch read and pending lookup per partition, one commit: "
        "see the profile). " + _first_dispatch(p[batch]),
        "",
    ]
    for what, result in results.profiles:
        lines += report.profile_markdown(result, what)
    if min(best_cpu, best_wall) < AIM_MESSAGES_PER_S:
        lines += [_what_is_left(sizes), ""]
    return "\n".join(lines) + "\n"


def _what_is_left(sizes: Sizes) -> str:
    """What a default-queue dispatch still costs, and why each part is there."""
    return (
        f"What is left at a queue of {CHUNK:,} (see the profile): per dispatch, one commit of "
        "the metadata store (SQLite's WAL written and synced: what was delivered is recorded "
        "pending before it is handed over, so a crash redelivers rather than loses it), about "
        "ten plain statements (lock, consumer lease, cursor version, new segments, pending "
        "lookup, the run recorded, read position), the acknowledged-index mask and pending "
        "lookup per record batch read, and a `take` of the chosen rows "
        f"({sizes.acked_fraction:.0%} of the batch indexes acknowledged leave gaps, so no "
        "slice); a Parquet row group decoded every few dispatches (decoded once per dispatcher "
        "and kept); per pass, the first dispatch's cursor load (above), paid once per "
        "dispatcher, in `cursorops.core.domain.acks.cursor_codec` and "
        "`cursorops.core.domain.acks.ack_set`. "
        "Each no-ack pass "
        "after the "
        "first also takes every message again from released runs (the previous pass closed "
        "its consumer), a lookup and a rewrite of those runs per dispatch. A larger receiver "
        "queue divides all the per-dispatch parts by its size (the last row)."
    )


def scaling(sizes: Sizes, scaled: list[tuple[int, Results]]) -> list[str]:
    """The table of figures at each multiple of the base size."""
    rows = []
    for scale, results in scaled:
        for label, *_ in KINDS:
            passes = results.passes[label]
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
                    Runs.of([p.load for p in passes]).cell(digits=2),
                ]
            )
    return [
        "### How cost grows",
        "",
        f"The same passes at {', '.join(f'{s}x' for s in SCALES)} of {sizes.messages:,} "
        "messages (each size a fresh installation, same runs count). A level CPU time per "
        "message across sizes means cost grows linearly with what is delivered: no dispatch "
        "rereads the backlog or the pending set.",
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
                "load average (1 min)",
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
